"""What a session file says, checked before it is believed.

The file is evidence of what happened, not a promise that it is well formed: ama may have been killed
between a tool call and its result, and a person may have edited the file. So the context rebuilt from it is
repaired before any request is built from it (`pair_tool_calls`): every tool call gets a result (an
"interrupted" error where none was written) and results without a call are dropped, because providers
refuse a conversation with a dangling call (HTTP 400) — every later prompt would fail. Paths read from the
file (handoffs) must stay inside the session's own folder (`read_contained`), and a stored meter or billing
state is used only when it decodes and every figure in it is plausible (`stored_state`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ama_acp import ownfiles
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage

INTERRUPTED = "This tool call was interrupted (ama stopped before it finished); its outcome is unknown."
MAX_HANDOFF_BYTES = 4 << 20  # a handoff is a few KB; anything this big was not written by ama

# A stored state as the file holds it (decoded JSON); opaque to everything but the meter and the billing.
StoredState = Mapping[str, object]


class PairResult(msgspec.Struct):
    messages: list[Message]
    tail: list[tuple[ToolCallPart, ToolResultMessage]]  # results added at the end (written back by the caller)
    inserted: int = 0  # results added before the end (in memory only: a file cannot take them there)
    dropped: int = 0  # results without a call (or a second result for one call)


def interrupted_result(call: ToolCallPart) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=[TextPart(INTERRUPTED)], is_error=True)


def pair_tool_calls(messages: list[Message]) -> PairResult:
    """The context with every tool call followed by its result, and no result without its call.

    A call's results belong right after its assistant message (before the next user or assistant message),
    which is where providers look for them.
    """
    out: list[Message] = []
    tail: list[tuple[ToolCallPart, ToolResultMessage]] = []
    open_calls: dict[str, ToolCallPart] = {}  # calls of the last assistant message still without a result
    inserted = dropped = 0
    for m in messages:
        if isinstance(m, ToolResultMessage):
            if open_calls.pop(m.tool_call_id, None) is not None:
                out.append(m)
            else:
                dropped += 1
            continue
        for call in open_calls.values():
            out.append(interrupted_result(call))
            inserted += 1
        open_calls = {}
        out.append(m)
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                open_calls.setdefault(call.id, call)
    for call in open_calls.values():
        result = interrupted_result(call)
        out.append(result)
        tail.append((call, result))
    return PairResult(out, tail, inserted, dropped)


def stored_state(value: StoredState | None, kind: type[msgspec.Struct]) -> StoredState | None:
    """A stored meter/billing state that decodes as `kind` with plausible figures, else None (the caller keeps
    the last good one: never a made-up 0)."""
    if value is None:
        return None
    try:
        state = msgspec.convert(value, kind)
    except (msgspec.ValidationError, RecursionError, TypeError, ValueError):
        return None
    return value if _plausible(state) else None


def _plausible(state: msgspec.Struct) -> bool:
    """No negative or non-finite figure: such a state was damaged, and a figure not measured is unknown."""
    for value in msgspec.structs.astuple(state):
        if isinstance(value, msgspec.Struct):
            if not _plausible(value):
                return False
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int | float) and not (0 <= value < 1e18):
            return False
    return True


def read_contained(folder: Path, rel: str, limit: int = MAX_HANDOFF_BYTES) -> str | None:
    """The text of `folder/rel` if it is a regular file inside `folder`, reached through no link, of at most
    `limit` bytes; else None. A session file is not trusted to name what ama reads (`/etc/passwd`,
    `../../.ssh/id_rsa`, a symlink out, a FIFO that would block the load)."""
    if not isinstance(rel, str) or not rel or "\0" in rel or os.path.isabs(rel):
        return None
    # Through the one opener of ama's folders: a link anywhere below the sessions folder (the session's own
    # folder replaced by a link elsewhere, a link as the file), a FIFO, a device or a file past `limit` is None.
    try:
        data = ownfiles.read_file(folder / rel, folder.parent, limit)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", errors="replace")
