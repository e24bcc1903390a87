"""Which workspace a session's tools use: the editor's (`fs/*`, `terminal/*`) when the client advertised
them, else the local disk and subprocesses. ama never calls a client method the client did not advertise.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ama_acp.rpc.errors import ClientError
from ama_acp.rpc.peer import Params
from ama_acp.tools.base import ToolError
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import CommandResult, LocalWorkspace
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.runtime import Runtime
    from ama_acp.session.session import Session

log = logging.getLogger(__name__)

# The wire id of the tool call running in this task, so a terminal can be embedded in it.
current_tool_call: ContextVar[str | None] = ContextVar("current_tool_call", default=None)


# Every call to the editor has a deadline: an editor that never answers must not hang the turn.
FS_TIMEOUT = 30.0  # fs/read_text_file, fs/write_text_file
TERMINAL_TIMEOUT = 5.0  # terminal/create, output, kill, release (wait_for_exit: the command's own timeout)
# A terminal/create abandoned by a cancel: the editor may still create the terminal; this long we wait for
# its answer so that terminal can be released instead of leaking.
CREATE_GRACE = 2.0


class EditorWorkspace(LocalWorkspace):
    """Reads and writes through the editor (its unsaved buffers are the truth) and runs commands in its
    terminals, for whichever of those the client advertised; everything else is local.

    A ClientError from the editor becomes a ToolError carrying the editor's own message (the model and the
    person read "File is locked", not "ClientError: Internal error (-32603)")."""

    def __init__(self, runtime: Runtime, session: Session, fs_read: bool, fs_write: bool, terminal: bool) -> None:
        super().__init__()
        self._rt = runtime
        self._session = session
        self._fs_read = fs_read
        self._fs_write = fs_write
        self._terminal = terminal

    async def _call(self, method: str, params: Params, timeout: float) -> Any:  # the editor's raw JSON
        try:
            return await self._rt.client_request(method, params, timeout=timeout)
        except ClientError as exc:
            raise ToolError(f"The editor refused {method}: {exc.message or exc}") from None
        except TimeoutError:
            raise ToolError(f"The editor did not answer {method} within {timeout:g} s.") from None

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        if not self._fs_read:
            return await super().read_text(path, line, limit)
        if not await self.exists(path):  # ACP has no "not found" code of its own; keep the tools' contract
            raise FileNotFoundError(path)
        result = await self._call(
            "fs/read_text_file",
            w.ReadTextFileRequest(session_id=self._session.id, path=path, line=line, limit=limit),
            FS_TIMEOUT,
        )
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolError(f"The editor's answer to fs/read_text_file for {path} has no text content.")
        return content

    async def write_text(self, path: str, text: str) -> None:
        if not self._fs_write:
            return await super().write_text(path, text)
        await self._call(
            "fs/write_text_file",
            w.WriteTextFileRequest(session_id=self._session.id, path=path, content=text),
            FS_TIMEOUT,
        )

    async def _create_terminal(self, request: w.CreateTerminalRequest) -> str:
        """terminal/create that survives a cancel: the answer is awaited (bounded) and its terminal released,
        so the terminal the editor creates anyway does not leak. Then the cancel goes on."""
        created: Any = None
        with self._session.graceful(TERMINAL_TIMEOUT, CREATE_GRACE) as scope:
            created = await self._call("terminal/create", request, TERMINAL_TIMEOUT)
        if scope.cancelled_caught:  # no answer within the grace (after a cancel) or the timeout
            await anyio.lowlevel.checkpoint()  # a cancelled turn ends here; otherwise the editor was too slow
            raise ToolError(f"The editor did not answer terminal/create within {TERMINAL_TIMEOUT:g} s.")
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str) or not terminal_id:
            raise ToolError("The editor's answer to terminal/create has no terminalId.")
        if self._session.cancelled:
            await self._release(w.TerminalRequest(session_id=self._session.id, terminal_id=terminal_id))
            await anyio.lowlevel.checkpoint()  # the turn's cancel takes effect here
        return terminal_id

    async def _release(self, ref: w.TerminalRequest) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self._rt.client_request("terminal/release", ref, timeout=TERMINAL_TIMEOUT)
            except Exception as exc:  # the client may be gone; the log says which terminal may be left
                log.warning("terminal/release of %s failed: %s", ref.terminal_id, exc)

    async def run_command(self, command: str, cwd: str, timeout: float, output_cap: int) -> CommandResult:
        if not self._terminal:
            return await super().run_command(command, cwd, timeout, output_cap)
        sid = self._session.id
        terminal_id = await self._create_terminal(
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
            )
        )
        ref = w.TerminalRequest(session_id=sid, terminal_id=terminal_id)
        wire_id = current_tool_call.get()
        timed_out = False
        try:
            if wire_id is not None:  # the person watches the command run inside the tool call
                await self._session.send(
                    w.ToolCallUpdate(tool_call_id=wire_id, content=[w.TerminalRef(terminal_id=terminal_id)])
                )
            exit_status: Any = {}
            with anyio.move_on_after(timeout) as scope:
                exit_status = await self._rt.client_request("terminal/wait_for_exit", ref) or {}
            if scope.cancelled_caught:
                timed_out = True
                await self._call("terminal/kill", ref, TERMINAL_TIMEOUT)
            output = await self._call("terminal/output", ref, TERMINAL_TIMEOUT) or {}
            if not isinstance(output, dict) or not isinstance(exit_status, dict):
                raise ToolError("The editor's answer about the terminal is not an object.")
            status = output.get("exitStatus") or exit_status or {}
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                try:
                    await self._rt.client_request("terminal/kill", ref, timeout=TERMINAL_TIMEOUT)
                except Exception as exc:  # the client may already be gone
                    log.warning("terminal/kill failed: %s", exc)
            raise
        except ClientError as exc:
            raise ToolError(f"The editor's terminal failed: {exc.message or exc}") from None
        finally:
            await self._release(ref)
        return CommandResult(
            exit_code=status.get("exitCode") if isinstance(status.get("exitCode"), int) else None,
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


def tool_context(runtime: Runtime, session: Session) -> ToolContext:
    caps = runtime.client_caps
    fs_read, fs_write, terminal = caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal
    if fs_read or fs_write or terminal:
        workspace: LocalWorkspace = EditorWorkspace(runtime, session, fs_read, fs_write, terminal)
    else:
        workspace = LocalWorkspace()
    policy = PathPolicy([session.cwd, *session.additional_directories])
    return ToolContext(workspace=workspace, cwd=session.cwd, policy=policy)
