"""The facets of a live session (session/live.py `Session`) that several of its parts see: small Protocols, one a
group of members that travel together, which each part's own seam extends (compacting.py `CompactedSession`,
approval.py `ApprovalSession`, …) instead of declaring those members again.

Each part still names only the facets it uses, so it can be driven in a test by anything that has them; the
Session satisfies every one of them structurally. Nothing here names a part of the session, so any part may
import this module without an import circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import anyio

from ama_acp.session.store.entries import Entry
from ama_acp.tools.context import ToolContext
from ama_acp.wire import types as w


class Identified(Protocol):
    """Which session: the id its requests to the client, its updates and its log lines carry."""

    @property
    def id(self) -> str: ...


class Rooted(Protocol):
    """The session's own folder (its `cwd`, an absolute path the client gave)."""

    @property
    def cwd(self) -> str: ...


class Located(Rooted, Protocol):
    """Every folder the session works in: its own and the ones the person added (session/new, session/load)."""

    @property
    def additional_directories(self) -> Sequence[str]: ...


class UsesModel(Protocol):
    """The model the session's requests go to now (the person may switch it between turns)."""

    @property
    def model_id(self) -> str: ...


class ToolGuard(Protocol):
    """How the session's tool calls are judged: the permission mode now (it may change while the person is
    asked), and where a call's paths resolve and the workspace it works in."""

    @property
    def mode(self) -> str: ...

    @property
    def tool_ctx(self) -> ToolContext: ...


class Cancellable(Protocol):
    """The turn's cancel as a client call sees it: whether it came, and the scope a call that must not be cut
    off at once is waited out in (`Session.graceful`)."""

    @property
    def cancelled(self) -> bool: ...

    def graceful(self, timeout: float, grace: float) -> AbstractContextManager[anyio.CancelScope]: ...


class Sends(Protocol):
    """The way out to the person: every update of the session (session/editor/outbox.py)."""

    async def send(self, update: w.SessionUpdate) -> None: ...


class Persists(Sends, Protocol):
    """The session file as well: every entry of it goes through `persist` (session/store/journal.py)."""

    def persist(self, entry: Entry) -> None: ...


class ReportsUsage(Sends, Protocol):
    """The context's figures as well: a `usage_update`, and the notices that follow it."""

    async def report_usage(self, force: bool = False, message_end: bool = False) -> None: ...
