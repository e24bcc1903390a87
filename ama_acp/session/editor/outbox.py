"""Where every update of one session goes out: during a prompt turn, text deltas merged at the editor's frame
rate (session/editor/coalesce.py), everything else after what is pending; and before the first update after the
session file failed, the one warning that the session can no longer be saved (session/store/journal.py).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

import anyio
import msgspec

from ama_acp.agent.events import new_message_id
from ama_acp.config import Config
from ama_acp.session.editor.coalesce import ChunkCoalescer, ChunkKind
from ama_acp.session.store.journal import Journal
from ama_acp.wire import types as w


class OutboxRuntime(Protocol):
    """What the outbox needs from the sessions' shared runtime (session/manager.py `SessionManager`)."""

    @property
    def config(self) -> Config: ...

    @property
    def client_caps(self) -> w.ClientCapabilities: ...

    async def send_update(self, session_id: str, update: w.SessionUpdate) -> None: ...


class Outbox:
    def __init__(self, session_id: str, runtime: OutboxRuntime, journal: Journal) -> None:
        self._session_id = session_id
        self._rt = runtime
        self._journal = journal
        stream = runtime.config.stream
        self._chunks = ChunkCoalescer(
            self._send_now, window=stream.coalesce_window_ms / 1000, max_chars=stream.coalesce_max_chars
        )

    async def send(self, update: w.SessionUpdate) -> None:
        await self._chunks.send(_identified(update))

    async def text(self, kind: ChunkKind, text: str, message_id: str | None) -> None:
        """One streamed delta of a message or a thought (the hot path of a turn)."""
        await self._chunks.text(kind, text, message_id)

    def turn(self) -> AbstractAsyncContextManager[None]:
        """Merging on for a prompt turn; what is pending goes out when the turn ends, however it ends."""
        return self._chunks.turn()

    async def _send_now(self, update: w.SessionUpdate) -> None:
        warning = self._journal.unsaved_notice(self._rt.client_caps)
        if warning is not None:
            with anyio.CancelScope(shield=True):  # a cancel must not swallow the one warning
                await self._rt.send_update(self._session_id, _identified(warning))
        await self._rt.send_update(self._session_id, update)


def _identified(update: w.SessionUpdate) -> w.SessionUpdate:
    """Everything ama says is a message with an id: text it sends without one (a notice told as a message, a
    warning, a compaction's word) becomes a message of its own, so a client that pairs messages by id can."""
    if isinstance(update, w.AgentMessageChunk | w.AgentThoughtChunk) and update.message_id is None:
        return msgspec.structs.replace(update, message_id=new_message_id())
    return update
