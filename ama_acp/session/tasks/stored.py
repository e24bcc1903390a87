"""A finished task opened again by its session id, `<parent id>.task-<n>` (issue 28 point 6); the one place that
builds and parses that id (`TaskSessionId`).

`session/load` replays the task's stored conversation (session/store/task_journal.py: its task as the user's
message, its replies, its tool calls with their results) as a load of any session does, then reports its meter:
one `usage_update` from its stored figures, none when its window is unknown (D1). `session/resume` sends only
the meter. The task is not made a live session: it is a restricted session in the schema's sense (a mutation
of a subagent session needs a capability granted to that session, and ama grants none), so a prompt, a mode or
config change, or stats on its id are refused with -32602 (`refuse`), and `session/close` of it has nothing to
close. Its history belongs to the parent: `session/list` does not list it, and deleting the parent deletes it.

The id is hostile input: it must be `<a valid session id>.task-<a positive integer>`, else it goes the way of
any other id (the store's `InvalidSessionId`). Only the parent id names a file (`journal_path`), so no task's id
can reach a path of its own choosing. A task is found by the session id stored with it; a line that holds none
cannot be loaded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import msgspec

from ama_acp.conversation.messages import AssistantMessage, ToolCallPart, ToolResultMessage
from ama_acp.rpc.dispatch import defer
from ama_acp.rpc.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, AcpError
from ama_acp.session.restore import replay_updates
from ama_acp.session.store import entries as en
from ama_acp.session.store.cwd import normal_cwd, same_cwd
from ama_acp.session.store.reader import LoadedSession
from ama_acp.session.store.session_store import is_valid_session_id
from ama_acp.session.store.task_journal import StoredTask, journal_path, read_journal
from ama_acp.session.turn.toolset import describe_call
from ama_acp.tools.base import Tool
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

# The parent part is then checked by the store's own rule (`is_valid_session_id`); n has no leading zero.
_TASK_SESSION_ID = re.compile(r"(?P<parent>[A-Za-z0-9_-]+)\.task-(?P<n>[1-9][0-9]{0,8})", re.ASCII)


class TaskSessionId(NamedTuple):
    """The `number`-th task of session `parent` (from 1, across loads)."""

    parent: str
    number: int

    @property
    def session_id(self) -> str:
        return f"{self.parent}.task-{self.number}"


def parse_task_session_id(session_id: object) -> TaskSessionId | None:
    """The parts of a task's session id; None for anything else (which then fails as any unknown id does)."""
    if not isinstance(session_id, str):
        return None
    m = _TASK_SESSION_ID.fullmatch(session_id)
    if m is None or not is_valid_session_id(m["parent"]):
        return None
    return TaskSessionId(m["parent"], int(m["n"]))


def refuse(session_id: str) -> AcpError | None:
    """The answer to a request that would change (or run) a task: its session is restricted, kept for reading."""
    task = parse_task_session_id(session_id)
    if task is None:
        return None
    return AcpError(
        INVALID_PARAMS,
        f"Invalid params: sessionId: {session_id} is the session of a task of session {task.parent}; it is kept to "
        "be read (session/load) and takes no prompts or changes — continue in its parent session",
        {"sessionId": session_id, "parentSessionId": task.parent},
    )


def find_task(data_dir: Path, task_id: TaskSessionId) -> StoredTask | None:
    """The stored task with this id, from its parent's journal; None when there is none (or it cannot be read).
    Lines are decoded one by one: a damaged line costs that line only."""
    data = read_journal(journal_path(data_dir, task_id.parent))
    if data is None:
        return None
    decoder = msgspec.json.Decoder(StoredTask)
    wanted = task_id.session_id.encode()
    for n, line in enumerate(data.split(b"\n"), 1):
        if wanted not in line:  # most lines are other tasks: not decoded at all
            continue
        try:
            task = decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("task journal of %s: line %d skipped: %s", task_id.parent, n, str(exc)[:200])
            continue
        if task.session_id == task_id.session_id:
            return task
    return None


def history(task: StoredTask, header: en.Header, tool: Callable[[str], Tool | None], cwd: str) -> list[w.SessionUpdate]:
    """The task's conversation as the updates its live turn produced, through the replay of any session
    (restore.py `replay_updates`): its messages, and each tool call as it was asked, then ended with its result.
    `header`: its parent's (the task was run in the parent's folder)."""
    entries: list[en.Entry] = []
    calls: dict[str, ToolCallPart] = {}  # asked, not yet answered (provider id -> call)
    numbered: dict[str, str] = {}
    for message in task.messages:
        entries.append(en.MessageEntry(message=message))
        if isinstance(message, AssistantMessage):
            for part in message.tool_calls:
                calls[part.id] = part
                numbered[part.id] = f"{task.session_id}.call-{len(numbered) + 1}"  # ids may repeat across requests
        elif isinstance(message, ToolResultMessage) and message.tool_call_id in calls:
            part = calls.pop(message.tool_call_id)
            status = "failed" if message.is_error else "completed"
            entries.append(_record(part, numbered.pop(part.id), status, message.text, tool, cwd))
    for part in calls.values():  # a call the task never saw the end of (it was cancelled): failed, as on a load
        entries.append(_record(part, numbered[part.id], "failed", "", tool, cwd))
    return replay_updates(LoadedSession(header=header, entries=entries))


def _record(
    part: ToolCallPart, wire_id: str, status: str, text: str, tool: Callable[[str], Tool | None], cwd: str
) -> en.ToolCallEntry:
    try:
        args = part.parsed_arguments()
    except ValueError:
        args = {}
    shown = describe_call(tool(part.name), part.name, args, cwd)
    return en.ToolCallEntry(
        wire_id=wire_id,
        provider_id=part.id,
        name=part.name,
        title=shown.title if shown is not None else part.name,
        kind=shown.kind if shown is not None else "other",
        status=status,
        raw_input=args,
        content_text=en.clip_replay_text(text),
    )


def meter(task: StoredTask) -> w.UsageUpdate | None:
    """The task's last meter as stored; None when its window or its count was unknown (none is invented)."""
    if task.context_window is None or task.context_tokens is None:
        return None
    cost = w.Cost(amount=task.cost.amount, currency=task.cost.currency) if task.cost is not None else None
    return w.UsageUpdate(used=task.context_tokens, size=task.context_window, cost=cost)


def title(task: StoredTask) -> w.SessionInfoUpdate | None:
    return w.SessionInfoUpdate(title=task.description) if task.description else None


Send = Callable[[str, w.SessionUpdate], Awaitable[None]]


async def open_task(
    task_id: TaskSessionId,
    cwd: str,
    *,
    replay: bool,
    read_parent: Callable[[str], LoadedSession],
    data_dir: Path,
    tool: Callable[[str], Tool | None],
    send: Send,
) -> w.LoadSessionResponse:
    """session/load (`replay`) or session/resume of a stored task: its history before the response (a load),
    its title and meter after it (both). Nothing is registered: the task stays restricted (`refuse`)."""
    sid = task_id.session_id
    try:
        parent = read_parent(task_id.parent)  # a task has no folder of its own: its parent's is checked
    except AcpError as exc:
        if exc.code == RESOURCE_NOT_FOUND:
            raise AcpError.session_not_found(sid) from None
        raise
    if not same_cwd(parent.header.cwd, normal_cwd(cwd)):
        raise AcpError.invalid_params(f"cwd: session {sid} belongs to {normal_cwd(parent.header.cwd)!r}, not {cwd!r}")
    task = find_task(data_dir, task_id)
    if task is None:  # never stored (a task still running is stored when it ends), or stored without its id
        raise AcpError.session_not_found(sid)
    if replay:
        for update in history(task, parent.header, tool, parent.header.cwd):  # all history before the response
            await send(sid, update)

    async def after() -> None:
        for update in (title(task), meter(task)):
            if update is not None:
                await send(sid, update)

    defer(after)
    return w.LoadSessionResponse()
