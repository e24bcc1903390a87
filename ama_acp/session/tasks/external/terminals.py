"""An external agent's `terminal/*` requests, forwarded to the editor through ama (session/tasks/external/agent.py).

Offered to the agent only when the editor offers terminals. `terminal/create` is judged as ama's own
`run_command`: its cwd (the session's folder when it names none) must be an absolute path inside the session's
workspace, and the parent's mode decides — Read only refuses, Manual asks the person (the parent's approval, in
the task's session when the editor sees one), Full access runs it — in the session's sandbox, as ama's own
commands (the editor runs the launcher, the agent's command at its end; the private temp folder goes with the
terminal). The editor's terminal id never reaches the agent: the agent gets an id of ama's (`term-<n>`), valid on
its own connection only, so it cannot name another session's terminals; output, wait_for_exit, kill and release
go to the editor under the mapped id. Terminals the agent leaves open are killed and released when its task ends.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable
from typing import Annotated, TypeVar

import anyio
import msgspec

from ama_acp.agent import events as ev
from ama_acp.permissions import path_problem
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.rpc.errors import INTERNAL_ERROR, INVALID_PARAMS, AcpError
from ama_acp.sandbox.temp import remove_temp
from ama_acp.sandbox.terminal import Confined, confine, program_argv
from ama_acp.session.editor.client import PeerEditor
from ama_acp.session.tasks.external.requests import ExternalParent, ExternalRequests
from ama_acp.tools.base import Location
from ama_acp.wire import types as w

log = logging.getLogger(__name__)
_T = TypeVar("_T")

MAX_TERMINALS = 64  # open at once for one agent
MAX_ARGS = 1000
MAX_ENV = 200
RELEASE_S = 2.0


class _Env(msgspec.Struct, frozen=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    value: Annotated[str, msgspec.Meta(max_length=65536)]


class _Create(msgspec.Struct, frozen=True, rename="camel"):
    session_id: str
    command: Annotated[str, msgspec.Meta(min_length=1, max_length=65536)]
    args: Annotated[list[str], msgspec.Meta(max_length=MAX_ARGS)] = []
    env: Annotated[list[_Env], msgspec.Meta(max_length=MAX_ENV)] = []
    cwd: str | None = None
    output_byte_limit: Annotated[int, msgspec.Meta(ge=0, lt=2**53)] | None = None


class _Which(msgspec.Struct, frozen=True, rename="camel"):
    session_id: str
    terminal_id: str


class ExternalTerminals:
    """The terminal handlers of one external agent (set on its `AgentProcess` when the editor offers terminals)."""

    def __init__(self, parent: ExternalParent, requests: ExternalRequests, agent: str) -> None:
        self._p = parent
        self._r = requests
        self._agent = agent
        self._ids: dict[str, str] = {}  # ama's id for the agent → the editor's id
        self._temps: dict[str, str] = {}  # the editor's id → its command's private temp folder (sandboxed)
        self._count = 0

    def _editor(self) -> PeerEditor:
        return PeerEditor(self._p.rt.client_request)

    async def create(self, params: JSONObject) -> dict[str, object]:
        try:
            req = msgspec.convert(params, _Create)
        except msgspec.ValidationError as exc:
            raise AcpError(INVALID_PARAMS, f"Invalid terminal/create params: {exc}") from None
        self._r.check_session(params)
        if len(self._ids) >= MAX_TERMINALS:
            raise AcpError(INVALID_PARAMS, f"Refused: at most {MAX_TERMINALS} terminals may be open at once")
        cwd = req.cwd if req.cwd is not None else self._p.tool_ctx.cwd
        if not os.path.isabs(cwd) or path_problem(cwd) is not None:
            raise AcpError(INVALID_PARAMS, "`cwd` must be an absolute path")
        resolved = self._p.tool_ctx.resolve(cwd)
        if not resolved.inside:
            raise AcpError(INVALID_PARAMS, f"Refused: {cwd} is outside this session's workspace")
        cwd = resolved.path or resolved.abs_path
        line = " ".join([req.command, *req.args])
        title = f"{self._agent}: Run {' '.join(line.split())[:200]}"
        args: dict[str, object] = {"command": line, "cwd": cwd}
        call = ev.ToolCallRequested(self._r.next_wire_id(), "run_command", title, "execute", [Location(cwd)], args)
        shown = await self._r.approve_call(call, args)
        argv, env = [req.command, *req.args], [(e.name, e.value) for e in req.env]
        box = self._confine(req, cwd)
        if box is not None:  # the launcher confines it to the session's folders, as ama's own commands
            argv, env = box.argv, list(box.env.items())
        try:
            made = await self._editor().create_terminal(
                w.CreateTerminalRequest(
                    session_id=self._p.id,
                    command=argv[0],
                    args=argv[1:],
                    env=[w.EnvVariable(name=name, value=value) for name, value in env],
                    cwd=cwd,
                    output_byte_limit=req.output_byte_limit,
                )
            )
        except Exception as exc:
            remove_temp(box.tmp if box is not None else None)
            await self._r.settle(shown, False)
            raise AcpError(INTERNAL_ERROR, f"The editor could not create the terminal: {exc}") from None
        except BaseException:  # a cancel: no terminal to keep the temp folder for
            remove_temp(box.tmp if box is not None else None)
            raise
        if box is not None:
            self._temps[made.terminal_id] = box.tmp
        await self._r.settle(shown, True)
        self._count += 1
        ours = f"term-{self._count}"
        self._ids[ours] = made.terminal_id
        return {"terminalId": ours}

    def _confine(self, req: _Create, cwd: str) -> Confined | None:
        """The agent's command made ready to run confined by the session's sandbox; None when none is active."""
        env = {e.name: e.value for e in req.env}
        return confine(self._p.tool_ctx.sandbox, program_argv(req.command, req.args, env.get("PATH"), cwd), env)

    def _theirs(self, params: JSONObject) -> str:
        try:
            req = msgspec.convert(params, _Which)
        except msgspec.ValidationError as exc:
            raise AcpError(INVALID_PARAMS, f"Invalid terminal params: {exc}") from None
        self._r.check_session(params)
        theirs = self._ids.get(req.terminal_id)
        if theirs is None:
            raise AcpError(INVALID_PARAMS, f"No terminal {req.terminal_id[:64]!r} was created for this agent")
        return theirs

    def _which(self, theirs: str) -> w.TerminalRequest:
        return w.TerminalRequest(session_id=self._p.id, terminal_id=theirs)

    async def output(self, params: JSONObject) -> object:
        answer = await self._forward(self._editor().terminal_output(self._which(self._theirs(params))))
        return msgspec.to_builtins(answer)

    async def wait_for_exit(self, params: JSONObject) -> object:
        answer = await self._forward(self._editor().wait_for_terminal_exit(self._which(self._theirs(params))))
        return msgspec.to_builtins(answer)

    async def kill(self, params: JSONObject) -> object:
        await self._forward(self._editor().kill_terminal(self._which(self._theirs(params))))
        return {}

    async def release(self, params: JSONObject) -> object:
        theirs = self._theirs(params)
        try:
            await self._forward(self._editor().release_terminal(self._which(theirs)))
        finally:
            remove_temp(self._temps.pop(theirs, None))
        self._ids = {k: v for k, v in self._ids.items() if v != theirs}
        return {}

    async def _forward(self, pending: Awaitable[_T]) -> _T:
        try:
            return await pending
        except AcpError:
            raise
        except Exception as exc:  # the editor's error answer, a malformed answer: this request fails, no more
            raise AcpError(INTERNAL_ERROR, f"The editor could not do it: {exc}") from None

    async def close(self) -> None:
        """Kill and release what the agent left open (its task ended). Never raises."""
        editor = self._editor()
        for theirs in list(self._ids.values()):
            with anyio.move_on_after(RELEASE_S):
                try:
                    await editor.kill_terminal(self._which(theirs))
                    await editor.release_terminal(self._which(theirs))
                except Exception as exc:  # the editor went away: nothing left to release
                    log.info("an external agent's terminal was not released: %s", type(exc).__name__)
        for tmp in self._temps.values():
            remove_temp(tmp)
        self._ids.clear()
        self._temps.clear()
