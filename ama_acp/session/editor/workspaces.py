"""Which workspace a session's tools use: the editor's (`fs/*`, `terminal/*`) when the client advertised
them, else the local disk and subprocesses. ama never calls a client method the client did not advertise.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Protocol, TypeVar

import anyio
import anyio.lowlevel

from ama_acp.rpc.errors import ClientError
from ama_acp.sandbox import OFF, Sandbox, confines_terminals, sandbox_state
from ama_acp.sandbox.temp import remove_temp
from ama_acp.sandbox.terminal import confine
from ama_acp.session.editor.client import ClientRequests, EditorClient, MalformedAnswer, PeerEditor
from ama_acp.session.facets import Cancellable, Identified, Located, Sends
from ama_acp.session.runtime import Configured, KnowsClient
from ama_acp.tools.base import ToolError
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import CommandResult, CutShort, LocalWorkspace, cut_short
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

# The wire id of the tool call running in this task, so a terminal can be embedded in it.
current_tool_call: ContextVar[str | None] = ContextVar("current_tool_call", default=None)


# Every call to the editor has a deadline: an editor that never answers must not hang the turn.
FS_TIMEOUT = 30.0  # fs/read_text_file, fs/write_text_file
TERMINAL_TIMEOUT = 5.0  # terminal/output, kill, release (wait_for_exit: the command's own timeout)
# terminal/create may wait for a person: a client can ask them before it creates the terminal (ama's own
# `ama acp-client` does), and 5 s failed every command whose person took longer. Never past the tool call's own
# deadline (run_command's timeout + 15 s): a terminal created after it would be stopped at once.
TERMINAL_CREATE_TIMEOUT = 300.0
# A terminal/create abandoned by a cancel: the editor may still create the terminal; this long we wait for
# its answer so that terminal can be released instead of leaking.
CREATE_GRACE = 2.0


_T = TypeVar("_T")


def _create_timeout() -> float:
    """TERMINAL_CREATE_TIMEOUT, or the whole seconds left before the tool call's deadline if that comes sooner
    (the wait is shielded: the call's deadline cannot end it)."""
    left = min(TERMINAL_CREATE_TIMEOUT, anyio.current_effective_deadline() - anyio.current_time())  # inf: none
    return max(1.0, float(math.floor(left)))


class EditorRuntime(ClientRequests, KnowsClient, Configured, Protocol):
    """What `tool_context` needs of the runtime: what the client offered, the way to ask it, and `[sandbox]`."""


class TerminalHost(Identified, Cancellable, Sends, Protocol):
    """What the editor's workspace needs of its session: the id its requests carry, the turn's cancel (a
    terminal/create is waited out gracefully, see `Session.graceful`) and the updates that embed a terminal."""


class WorkspaceSession(TerminalHost, Located, Protocol):
    """What `tool_context` needs of the session: the above, and the folders its tools may work in."""


class EditorWorkspace(LocalWorkspace):
    """Reads and writes through the editor (its unsaved buffers are the truth) and runs commands in its
    terminals, for whichever of those the client advertised; everything else is local.

    A ClientError from the editor becomes a ToolError carrying the editor's own message (the model and the
    person read "File is locked", not "ClientError: Internal error (-32603)"); so does an answer the editor
    got wrong (`MalformedAnswer`: the call fails, saying which field)."""

    def __init__(
        self, editor: EditorClient, session: TerminalHost, fs_read: bool, fs_write: bool, terminal: bool
    ) -> None:
        super().__init__()
        self._editor = editor
        self._session = session
        self._fs_read = fs_read
        self._fs_write = fs_write
        self._terminal = terminal
        # The editor confines its terminals itself (sandbox.CONFINED_TERMINALS): the command goes bare.
        self.editor_confines = False

    async def _ask(self, method: str, timeout: float, answer: Awaitable[_T]) -> _T:
        """`answer`, the editor's call to `method` under `timeout`, with its failures as the tool's."""
        try:
            return await answer
        except ClientError as exc:
            raise ToolError(f"The editor refused {method}: {exc.message or exc}") from None
        except TimeoutError:
            raise ToolError(f"The editor did not answer {method} within {timeout:g} s.") from None
        except MalformedAnswer as exc:
            raise ToolError(str(exc)) from None

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        if not self._fs_read:
            return await super().read_text(path, line, limit)
        if not await self.exists(path):  # ACP has no "not found" code of its own; keep the tools' contract
            raise FileNotFoundError(path)
        request = w.ReadTextFileRequest(session_id=self._session.id, path=path, line=line, limit=limit)
        read = await self._ask(
            "fs/read_text_file", FS_TIMEOUT, self._editor.read_text_file(request, timeout=FS_TIMEOUT)
        )
        return read.content

    async def write_text(self, path: str, text: str) -> None:
        if not self._fs_write:
            return await super().write_text(path, text)
        request = w.WriteTextFileRequest(session_id=self._session.id, path=path, content=text)
        await self._ask("fs/write_text_file", FS_TIMEOUT, self._editor.write_text_file(request, timeout=FS_TIMEOUT))

    async def _create_terminal(self, request: w.CreateTerminalRequest, tmp: str | None) -> str:
        """terminal/create that survives a cancel: the answer is awaited (bounded) and its terminal released,
        so the terminal the editor creates anyway does not leak. Then the cancel goes on."""
        created: w.CreateTerminalResponse | None = None
        timeout = _create_timeout()
        with self._session.graceful(timeout, CREATE_GRACE) as scope:
            created = await self._ask(
                "terminal/create", timeout, self._editor.create_terminal(request, timeout=timeout)
            )
        if scope.cancelled_caught or created is None:  # no answer within the grace (after a cancel) or the timeout
            await anyio.lowlevel.checkpoint()  # a cancelled turn ends here; otherwise the editor was too slow
            raise ToolError(f"The editor did not answer terminal/create within {timeout:g} s.")
        if self._session.cancelled:
            ref = w.TerminalRequest(session_id=self._session.id, terminal_id=created.terminal_id)
            await self._release(ref, tmp)
            await anyio.lowlevel.checkpoint()  # the turn's cancel takes effect here
        return created.terminal_id

    async def _release(self, ref: w.TerminalRequest, tmp: str | None) -> None:
        """Release the terminal, and remove the private temp folder its command had (`tmp`, when sandboxed)."""
        with anyio.CancelScope(shield=True):
            try:
                await self._editor.release_terminal(ref, timeout=TERMINAL_TIMEOUT)
            except Exception as exc:  # the client may be gone; the log says which terminal may be left
                log.warning("terminal/release of %s failed: %s", ref.terminal_id, exc)
            finally:
                remove_temp(tmp)

    async def run_command(
        self, command: str, cwd: str, timeout: float, output_cap: int, confined: bool = True
    ) -> CommandResult:
        if not self._terminal:
            return await super().run_command(command, cwd, timeout, output_cap, confined)
        sid = self._session.id
        argv, env = ["/bin/sh", "-c", command], {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
        # The editor runs it on this machine (ACP's paths are shared): the launcher confines it there too, but for
        # the one run outside the sandbox the person allowed (`confined` False).
        box = confine(self.sandbox if confined and not self.editor_confines else None, argv, env)
        tmp, blocked = None, ""
        if box is not None and self.sandbox is not None:
            argv, env, tmp, blocked = box.argv, box.env, box.tmp, self.sandbox.state.blocked()
        elif self.editor_confines:  # the editor's own sandbox, which even an allowed run outside ama's stays in
            blocked = "writes outside the workspace (the editor confines its terminals)"
        try:
            terminal_id = await self._create_terminal(
                w.CreateTerminalRequest(
                    session_id=sid,
                    command=argv[0],
                    args=argv[1:],
                    cwd=cwd,
                    output_byte_limit=output_cap,
                    env=[w.EnvVariable(name=k, value=v) for k, v in env.items()],
                ),
                tmp,
            )
        except BaseException:  # no terminal (a refusal, a timeout, a cancel): its temp folder goes now
            remove_temp(tmp)
            raise
        ref = w.TerminalRequest(session_id=sid, terminal_id=terminal_id)
        wire_id = current_tool_call.get()
        kept: CutShort | None = None  # a cancelled run whose terminal the call's final update still shows
        try:
            if wire_id is not None:  # the person watches the command run inside the tool call
                await self._session.send(
                    w.ToolCallUpdate(tool_call_id=wire_id, content=[w.TerminalRef(terminal_id=terminal_id)])
                )
            return await self._run_to_end(ref, timeout, blocked)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                try:
                    await self._editor.kill_terminal(ref, timeout=TERMINAL_TIMEOUT)
                except Exception as exc:  # the client may already be gone
                    log.warning("terminal/kill failed: %s", exc)
                kept = await self._keep_for_final_update(ref, wire_id, tmp)
            raise
        except ClientError as exc:
            raise ToolError(f"The editor's terminal failed: {exc.message or exc}") from None
        except MalformedAnswer as exc:  # terminal/wait_for_exit's answer (the others are `_ask`ed)
            raise ToolError(str(exc)) from None
        finally:
            if kept is None:
                await self._release(ref, tmp)

    async def _run_to_end(self, ref: w.TerminalRequest, timeout: float, blocked: str) -> CommandResult:
        """The command in the terminal waited for (killed once `timeout` passes), then what it printed;
        `blocked` what the sandbox it ran in refused (CommandResult.sandbox)."""
        exited = w.WaitForTerminalExitResponse()
        with anyio.move_on_after(timeout) as scope:
            exited = await self._editor.wait_for_terminal_exit(ref)
        if scope.cancelled_caught:
            await self._ask(
                "terminal/kill", TERMINAL_TIMEOUT, self._editor.kill_terminal(ref, timeout=TERMINAL_TIMEOUT)
            )
        output = await self._ask(
            "terminal/output", TERMINAL_TIMEOUT, self._editor.terminal_output(ref, timeout=TERMINAL_TIMEOUT)
        )
        status = output.exit_status
        if status is None or (status.exit_code is None and status.signal is None):  # the output's says nothing
            status = exited
        return CommandResult(
            exit_code=status.exit_code,
            signal=_signal_number(status.signal),
            output=output.output,
            truncated=output.truncated,
            timed_out=scope.cancelled_caught,
            sandbox=blocked,
        )

    async def _keep_for_final_update(
        self, ref: w.TerminalRequest, wire_id: str | None, tmp: str | None
    ) -> CutShort | None:
        """A command cancelled while it ran: its terminal stays in the call's final update (the session releases
        it once that update is sent, so no editor is shown a terminal id it was already told is invalid), and its
        output so far goes to the call's record, which a replay shows when the terminal is long gone. None when
        nobody takes it (no call shows the terminal): the caller releases it at once."""
        sink = cut_short.get()
        if sink is None or wire_id is None:
            return None
        try:
            answer = await self._editor.terminal_output(ref, timeout=TERMINAL_TIMEOUT)
            sink.output = answer.output
        except Exception as exc:  # the record goes without the output; the terminal is still shown
            log.warning("terminal/output of cancelled %s failed: %s", ref.terminal_id, exc)
        sink.terminal_id = ref.terminal_id
        sink.release = lambda: self._release(ref, tmp)
        return sink


def _signal_number(sig: str | int | None) -> int | None:
    """The signal's number: a client names it ("SIGKILL"); one that sends a number is taken at its word; a
    name Python does not know is -1 (killed by a signal, which one unknown)."""
    if sig is None or isinstance(sig, int):
        return sig
    import signal

    try:
        return int(getattr(signal, sig))
    except (AttributeError, TypeError, ValueError):
        return -1


def tool_context(runtime: EditorRuntime, session: WorkspaceSession) -> ToolContext:
    caps = runtime.client_caps
    fs_read, fs_write, terminal = caps.fs.read_text_file, caps.fs.write_text_file, caps.terminal
    editor_confines = terminal and confines_terminals(caps.meta)
    if fs_read or fs_write or terminal:
        editor = PeerEditor(runtime.client_request)
        served = EditorWorkspace(editor, session, fs_read, fs_write, terminal)
        served.editor_confines = editor_confines
        workspace: LocalWorkspace = served
    else:
        workspace = LocalWorkspace()
    roots = [session.cwd, *session.additional_directories]
    # Commands are confined to the session's folders, those ama runs itself and those in the editor's terminal.
    state = sandbox_state(runtime.config.sandbox, roots)
    # A launcher kept ready only where ama starts the commands itself (no editor terminal); the release closes it.
    workspace.sandbox = sandbox = Sandbox(state, roots, warm=not terminal)
    unsandboxed = state.reason if state.mode != OFF and not state.active else ""
    return ToolContext(
        workspace=workspace,
        cwd=session.cwd,
        policy=PathPolicy(roots),
        unsandboxed=unsandboxed,
        sandboxed=state.active,
        # An editor that confines its terminals confines an external agent's too: they go to it bare.
        sandbox=None if editor_confines else sandbox,
        terminals_confined=editor_confines or state.active,
    )
