"""Which workspace a session's tools use: the editor's (`fs/*`, `terminal/*`) when the client advertised
them, else the local disk and subprocesses. ama never calls a client method the client did not advertise.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

import anyio

from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import CommandResult, LocalWorkspace
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

# The wire id of the tool call running in this task, so a terminal can be embedded in it.
current_tool_call: ContextVar[str | None] = ContextVar("current_tool_call", default=None)


class EditorWorkspace(LocalWorkspace):
    """Reads and writes through the editor (its unsaved buffers are the truth) and runs commands in its
    terminals, for whichever of those the client advertised; everything else is local."""

    def __init__(self, runtime: Any, session: Any, fs_read: bool, fs_write: bool, terminal: bool) -> None:
        super().__init__()
        self._rt = runtime
        self._session = session
        self._fs_read = fs_read
        self._fs_write = fs_write
        self._terminal = terminal

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        if not self._fs_read:
            return await super().read_text(path, line, limit)
        if not await self.exists(path):  # ACP has no "not found" code of its own; keep the tools' contract
            raise FileNotFoundError(path)
        result = await self._rt.client_request(
            "fs/read_text_file", w.ReadTextFileRequest(session_id=self._session.id, path=path, line=line, limit=limit)
        )
        return str((result or {}).get("content", ""))

    async def write_text(self, path: str, text: str) -> None:
        if not self._fs_write:
            return await super().write_text(path, text)
        await self._rt.client_request(
            "fs/write_text_file", w.WriteTextFileRequest(session_id=self._session.id, path=path, content=text)
        )

    async def run_command(self, command: str, cwd: str, timeout: float, output_cap: int) -> CommandResult:
        if not self._terminal:
            return await super().run_command(command, cwd, timeout, output_cap)
        sid = self._session.id
        created = await self._rt.client_request(
            "terminal/create",
            w.CreateTerminalRequest(
                session_id=sid,
                command="/bin/sh",
                args=["-c", command],
                cwd=cwd,
                output_byte_limit=output_cap,
                env=[
                    w.EnvVariable(name=k, value=v)
                    for k, v in (("TERM", "dumb"), ("PAGER", "cat"), ("GIT_PAGER", "cat"))
                ],
            ),
        )
        terminal_id = str(created["terminalId"])
        ref = w.TerminalRequest(session_id=sid, terminal_id=terminal_id)
        wire_id = current_tool_call.get()
        timed_out = False
        try:
            if wire_id is not None:  # the person watches the command run inside the tool call
                await self._session.send(
                    w.ToolCallUpdate(tool_call_id=wire_id, content=[w.TerminalRef(terminal_id=terminal_id)])
                )
            exit_status: dict = {}
            with anyio.move_on_after(timeout) as scope:
                exit_status = await self._rt.client_request("terminal/wait_for_exit", ref) or {}
            if scope.cancelled_caught:
                timed_out = True
                await self._rt.client_request("terminal/kill", ref)
            output = await self._rt.client_request("terminal/output", ref) or {}
            status = output.get("exitStatus") or exit_status or {}
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                try:
                    await self._rt.client_request("terminal/kill", ref, timeout=2)
                except Exception as exc:  # the client may already be gone
                    log.warning("terminal/kill failed: %s", exc)
            raise
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self._rt.client_request("terminal/release", ref, timeout=2)
                except Exception as exc:
                    log.warning("terminal/release failed: %s", exc)
        return CommandResult(
            exit_code=status.get("exitCode"),
            signal=_signal_number(status.get("signal")),
            output=str(output.get("output", "")),
            truncated=bool(output.get("truncated", False)),
            timed_out=timed_out,
        )


def _signal_number(sig: Any) -> int | None:
    if sig is None:
        return None
    if isinstance(sig, int):
        return sig
    import signal

    try:
        return int(getattr(signal, str(sig)))
    except (AttributeError, TypeError, ValueError):
        return -1


def tool_context(runtime: Any, session: Any) -> ToolContext:
    caps = runtime.client_caps
    fs_read, fs_write, terminal = caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal
    if fs_read or fs_write or terminal:
        workspace: Any = EditorWorkspace(runtime, session, fs_read, fs_write, terminal)
    else:
        workspace = LocalWorkspace()
    policy = PathPolicy([session.cwd, *session.additional_directories])
    return ToolContext(workspace=workspace, cwd=session.cwd, policy=policy)
