"""What an external ACP agent carrying out a task (session/tasks/external/agent.py) asks of its client, answered by
ama as its parent session would answer its own tools: the same workspace, the same mode, the same person.

- `fs/read_text_file` and `fs/write_text_file`: a path outside the session's workspace is refused outright (the
  workspace boundary), and so is a write into `.git` in every mode (tools/common.py `refuse_git_internals`, the
  check of ama's own `write_file`); inside it the parent's approver judges the call as ama's own `read_file` /
  `write_file` (Read only refuses a write, Manual asks the editor with the diff, Accept edits writes), and the
  file is read or written through the parent's workspace (the editor's buffers when it serves fs/*).
- `session/request_permission`: judged under the parent's mode as a call of the agent's stated kind (a kind ama
  does not know, or `other`, counts as `execute`: the agent asks because it is about to act); what the mode
  leaves to the person is forwarded to the editor with the parent's session id, the agent's options under names
  derived from their kinds (`option_names`) and a tool call id under the task call's, and the person's choice
  goes back.
- One question at a time: whatever may ask the person (a permission request, a file request or a terminal
  judged by the approver) waits while another of the same agent is open; `MAX_WAITING` may wait, and past that
  a request is refused at once (`SESSION_BUSY`), so an agent cannot stack dialogs in front of the person.
- `terminal/*`: forwarded to the editor when it offers terminals (session/tasks/external/terminals.py, which uses
  `approve_call` here); otherwise not advertised to the agent.

With `clientCapabilities.subagents` the task is a session of its own (session/tasks/external/view.py): what is
asked of the editor names that session and a tool call announced in it (`subagent`), and a file request's call is
settled (completed or failed) when it is answered.

Every request is hostile input: decoded here, a malformed one answered with an error for that request only.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Protocol

import anyio
import msgspec

from ama_acp.agent import events as ev
from ama_acp.permissions import decide, path_problem
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, SESSION_BUSY, AcpError
from ama_acp.session.editor.client import ClientRequests, PeerEditor
from ama_acp.session.turn.host import Approves
from ama_acp.tools.base import Location, ToolError
from ama_acp.tools.common import refuse_git_internals
from ama_acp.tools.context import ToolContext
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.tasks.external.view import SubagentSession

log = logging.getLogger(__name__)

_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode"})
_TITLE_CHARS = 300
_OPTION_CHARS = 80  # of the agent's own name for an option, when it is shown
MAX_OPTIONS = 16
MAX_WAITING = 32  # requests of one agent waiting for its open question to be answered; past it, refused
# What the person is shown of each option: its kind's meaning, never the agent's word alone (an allow option named
# "Reject" would pass for the other kind).
OPTION_LABELS = {
    "allow_once": "Allow once",
    "allow_always": "Allow always",
    "reject_once": "Reject once",
    "reject_always": "Reject always",
}


class ExternalParent(Protocol):
    """What the answers need of the parent session (session/live.py `Session`)."""

    @property
    def id(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def tool_ctx(self) -> ToolContext: ...

    @property
    def approver(self) -> Approves: ...

    @property
    def rt(self) -> ClientRequests: ...


class _Location(msgspec.Struct, frozen=True):
    path: str
    line: int | None = None


class _ToolCall(msgspec.Struct, frozen=True, rename="camel"):
    """The parts of the agent's `toolCall` ama shows the person (the rest of it is the agent's own)."""

    tool_call_id: str = ""
    title: str | None = None
    kind: str | None = None
    locations: list[_Location] | None = None
    raw_input: object = None  # any JSON: shown to the person as the agent sent it


class _PermissionParams(msgspec.Struct, frozen=True, rename="camel"):
    session_id: str
    tool_call: _ToolCall
    options: list[w.PermissionOption]


def _error(code: int, message: str) -> AcpError:
    return AcpError(code, message)


class ExternalRequests:
    """The handlers for one external agent's requests (set on its `AgentProcess`)."""

    def __init__(
        self, parent: ExternalParent, task_id: str, agent: str, subagent: SubagentSession | None = None
    ) -> None:
        self._p = parent
        self._task = task_id
        self._agent = agent
        self._calls = 0
        self.session_id: str | None = None  # the agent's session, once session/new answered
        self.forwarded = 0  # permission requests that reached the editor
        self.subagent = subagent  # the task's own session at the editor (subagents); None: the parent's
        self._asking = anyio.Lock()  # held while a question of this agent may be open (one at a time)

    def next_wire_id(self) -> str:
        self._calls += 1
        return f"{self._task}.x{self._calls}"

    def check_session(self, params: JSONObject) -> None:
        if self.session_id is None or params.get("sessionId") != self.session_id:
            raise _error(INVALID_PARAMS, "`sessionId` is not the session ama opened for this agent")

    def _path(self, params: JSONObject) -> str:
        value = params.get("path")
        if not isinstance(value, str) or not value or not os.path.isabs(value):
            raise _error(INVALID_PARAMS, "`path` is required and must be an absolute path")
        if (problem := path_problem(value)) is not None:
            raise _error(INVALID_PARAMS, f"`path` {problem}")
        resolved = self._p.tool_ctx.resolve(value)
        if not resolved.inside:
            raise _error(INVALID_PARAMS, f"Refused: {value} is outside this session's workspace")
        return resolved.path or resolved.abs_path

    async def _approve(self, name: str, kind: str, path: str, args: dict[str, object]) -> str | None:
        title = f"{self._agent}: {'Read' if kind == 'read' else 'Write'} {path}"
        call = ev.ToolCallRequested(self.next_wire_id(), name, title, kind, [Location(path)], args)
        return await self.approve_call(call, args)

    def _question(self) -> anyio.Lock:
        """The turn to ask the person (`async with`): refused at once when `MAX_WAITING` already wait for it."""
        if self._asking.locked() and self._asking.statistics().tasks_waiting >= MAX_WAITING:
            raise _error(
                SESSION_BUSY,
                f"Refused: {MAX_WAITING} requests of this agent already wait for the person to answer its open "
                "question; send it again once they are answered",
            )
        return self._asking

    async def approve_call(self, call: ev.ToolCallRequested, args: dict[str, object]) -> str | None:
        """Judged as ama's own call; the id of the call announced in the task's session (to settle), if any.
        A refusal is this request's error. The approver may ask the person: one such call at a time."""
        async with self._question():
            return await self._approved(call, args)

    async def _approved(self, call: ev.ToolCallRequested, args: dict[str, object]) -> str | None:
        subagent = self.subagent
        if subagent is None:
            refusal = await self._p.approver.approve(call, args)
        else:
            await subagent.call_for(call)
            refusal = await subagent.approver.approve(call, args)
        if refusal is not None:
            if subagent is not None:
                await subagent.settle(call.wire_id, False)
            raise _error(INVALID_PARAMS, f"Refused: {refusal.for_person}")
        return call.wire_id if subagent is not None else None

    async def settle(self, call_id: str | None, ok: bool) -> None:
        """The end of a call announced in the task's session for a request; nothing without one."""
        if self.subagent is not None and call_id is not None:
            await self.subagent.settle(call_id, ok)

    async def read_text_file(self, params: JSONObject) -> dict[str, object]:
        self.check_session(params)
        path = self._path(params)
        line, limit = _uint(params, "line"), _uint(params, "limit")
        shown = await self._approve("read_file", "read", path, {"path": path})
        try:
            text = await self._p.tool_ctx.workspace.read_text(path, line, limit)
        except FileNotFoundError:
            await self.settle(shown, False)
            raise _error(RESOURCE_NOT_FOUND, f"File not found: {path}") from None
        except (OSError, ValueError) as exc:  # a folder, a binary file, a file that went away
            await self.settle(shown, False)
            raise _error(INTERNAL_ERROR, f"Cannot read {path}: {exc}") from None
        await self.settle(shown, True)
        return {"content": text}

    async def write_text_file(self, params: JSONObject) -> dict[str, object]:
        self.check_session(params)
        path = self._path(params)
        content = params.get("content")
        if not isinstance(content, str):
            raise _error(INVALID_PARAMS, "`content` is required and must be a string")
        try:  # in every mode, before anyone is asked: the check of ama's own write_file
            refuse_git_internals(self._p.tool_ctx.resolve(path), path)
        except ToolError:
            raise _error(
                INVALID_PARAMS,
                f"Refused: {path} is inside a .git directory (or is one): its config and hooks name programs git "
                "runs, so a write there is not an edit, and ama makes none for an agent",
            ) from None
        shown = await self._approve("write_file", "edit", path, {"path": path, "content": content})
        try:
            await self._p.tool_ctx.workspace.write_text(path, content)
        except (OSError, ValueError) as exc:
            await self.settle(shown, False)
            raise _error(INTERNAL_ERROR, f"Cannot write {path}: {exc}") from None
        await self.settle(shown, True)
        return {}

    async def request_permission(self, params: JSONObject) -> dict[str, object]:
        req = self._permission_request(params)
        call = req.tool_call
        kind = call.kind if call.kind in _KINDS else "execute"
        paths = [loc.path for loc in call.locations or [] if os.path.isabs(loc.path) and not path_problem(loc.path)]
        inside = all(self._p.tool_ctx.resolve(p).inside for p in paths)
        decision = decide(self._p.mode, kind, inside)
        if decision != "ask":
            return _outcome(_choose(req.options, "allow" if decision == "allow" else "reject"))
        answer = await self._forward(req, kind, paths)
        return _outcome(None if answer is None else self._confirmed(req.options, answer, kind, inside))

    def _permission_request(self, params: JSONObject) -> _PermissionParams:
        try:
            req = msgspec.convert(params, _PermissionParams)
        except msgspec.ValidationError as exc:
            raise _error(INVALID_PARAMS, f"Invalid session/request_permission params: {exc}") from None
        self.check_session(params)
        if not 1 <= len(req.options) <= MAX_OPTIONS:
            raise _error(INVALID_PARAMS, f"`options` must hold 1–{MAX_OPTIONS} options")
        if len({o.option_id for o in req.options}) < len(req.options):  # the answer would name two kinds at once
            raise _error(INVALID_PARAMS, "`options` must have distinct `optionId`s")
        return req

    def _confirmed(self, options: list[w.PermissionOption], answer: str, kind: str, inside: bool) -> str | None:
        """The person's choice as the agent gets it: a reject when it is no option of the agent's, or an allow the
        mode no longer allows."""
        chosen = next((o for o in options if o.option_id == answer), None)
        if chosen is None:
            log.warning("the editor chose an option the external agent never offered")
            return _choose(options, "reject")
        if chosen.kind.startswith("allow") and decide(self._p.mode, kind, inside) == "deny":
            return _choose(options, "reject")  # switched to Read only while the person was asked
        return chosen.option_id

    async def _forward(self, req: _PermissionParams, kind: str, paths: list[str]) -> str | None:
        """The person's choice (an optionId), or None when the dialog was cancelled or could not be shown. One
        question of this agent at a time."""
        async with self._question():
            return await self._asked(req, kind, paths)

    async def _asked(self, req: _PermissionParams, kind: str, paths: list[str]) -> str | None:
        call = req.tool_call
        title = f"{self._agent}: {_title(call.title)}"
        call_id, session_id = self.next_wire_id(), self._p.id
        subagent = self.subagent
        if subagent is not None:  # its own session: the agent's call when the editor saw it, else one announced now
            shown = ev.ToolCallRequested(call_id, "permission", title, kind, [], {})
            call_id, session_id = await subagent.call_for(shown, call.tool_call_id or None), subagent.session_id
        request = w.RequestPermissionRequest(
            session_id=session_id,
            tool_call=w.ToolCallFields(
                tool_call_id=call_id,
                status="pending",
                title=title,
                kind=kind,
                locations=[w.ToolCallLocation(path=p) for p in paths] or None,
                raw_input=call.raw_input,
            ),
            options=option_names(req.options),
        )
        self.forwarded += 1
        try:
            answer = await PeerEditor(self._p.rt.client_request).request_permission(request)
        except Exception as exc:  # an editor that cannot ask: the agent is told `cancelled`, nothing runs
            log.info("forwarding an external agent's permission request failed: %s", type(exc).__name__)
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                await self.settle(call_id, False)
            return None
        outcome = answer.outcome
        chosen = outcome.option_id if isinstance(outcome, w.SelectedPermissionOutcome) else None
        # A call ama announced for the question ends with the answer.
        await self.settle(call_id, any(o.option_id == chosen and o.kind.startswith("allow") for o in req.options))
        return chosen


def _title(title: str | None) -> str:
    """The agent's title for its request, as one printable line."""
    line = " ".join((title or "A request of the helper agent").split())[:_TITLE_CHARS]
    return "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in line)


def option_names(options: list[w.PermissionOption]) -> list[w.PermissionOption]:
    """The options as the person is shown them: each named by its kind ("Allow once", …); the agent's own name
    follows (one printable line) only where two options share a kind, to tell them apart."""
    kinds = [o.kind for o in options]
    shown = []
    for option in options:
        label = OPTION_LABELS[option.kind]
        if kinds.count(option.kind) > 1:
            own = " ".join(option.name.split())[:_OPTION_CHARS]
            label += ": " + "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in own)
        shown.append(w.PermissionOption(option_id=option.option_id, name=label, kind=option.kind))
    return shown


def _choose(options: list[w.PermissionOption], meaning: str) -> str | None:
    for kind in (f"{meaning}_once", f"{meaning}_always"):
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


def _outcome(option_id: str | None) -> dict[str, object]:
    if option_id is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def _uint(params: JSONObject, name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _error(INVALID_PARAMS, f"`{name}` must be a non-negative integer")
    return value
