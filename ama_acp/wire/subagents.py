"""The UNSTABLE `subagent_update` session update (schema/v1/schema.unstable.json `SubagentUpdate`,
`StateUpdate`, `IdleStateUpdate`, `ErrorStopReason`): a parent session announces a subagent session it owns
(the schema's "child session"; ama's tasks, session/tasks/subagent_view.py), and reports the state of its work.
Apart from wire/types.py, which holds it in `SessionUpdate`, to keep each module one sitting long; the same
conventions (camelCase, absent optionals left out).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType, field


class _Out(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    pass


class SubagentUsage(_Out, frozen=True):
    """The unstable `Usage` of finished work: the subagent session's billed tokens. The same schema type as a
    PromptResponse's (wire/types.py `TurnUsage`, S1)."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None


class SubagentError(_Out, frozen=True):
    """The JSON-RPC error object of a subagent session that failed (`ErrorStopReason.error`)."""

    code: int
    message: str


class SubagentState(_Out, frozen=True):
    """`StateUpdate`: a whole snapshot of a subagent session's foreground work. `stopReason`, `usage` and `error` only with
    `idle` (IdleStateUpdate, ErrorStopReason)."""

    state: Literal["running", "idle", "requires_action", "unknown"]
    stop_reason: str | None = None
    usage: SubagentUsage | None = None
    error: SubagentError | None = None


class SubagentUpdate(_Out, tag_field="sessionUpdate", tag="subagent_update", frozen=True):
    """A subagent session this session owns, announced on the parent's session id before any update under its
    own. Omitted fields keep their previous values (UNSET, never null: null would clear them)."""

    session_id: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    state: SubagentState | UnsetType = UNSET
    cwd: str | UnsetType = UNSET
    meta: dict[str, Any] | UnsetType = field(default=UNSET, name="_meta")
