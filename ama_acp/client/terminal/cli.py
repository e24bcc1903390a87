"""`ama acp-client [options] -- AGENT COMMAND…`: drive any ACP agent over stdio and show what an editor would.

    --prompt TEXT (repeatable)   send these prompts, then exit; without it, on a terminal, the person types
                                 prompts at `» ` (and /mode, /model, /option, /help); from a pipe, each line
                                 read is one prompt
    --list | --load ID | --resume ID   list the agent's sessions for --cwd; or open a stored one (load replays it)
    --program-status auto|on|off       tell the terminal the client's state (OSC 7501; default: the config's
                                       `client.program_status`, else auto = when the terminal answers the query)

Exit codes are in `turn.py`: 0 success, 1 the agent answered an error, 2 bad usage, 3 the agent could not
start or exited, 4 protocol violations, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack
from typing import IO

import anyio

from ama_acp.client.confine import configured_sandbox, unsandboxed
from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.display.ansi import DIM
from ama_acp.client.display.content import field, objects, permission_details
from ama_acp.client.display.meter import context_percent
from ama_acp.client.display.render import Renderer, Writer
from ama_acp.client.errors import RpcError
from ama_acp.client.handlers import PermissionPolicy
from ama_acp.client.terminal import sessions, tty_input
from ama_acp.client.terminal.agent_stderr import AgentStderr
from ama_acp.client.terminal.desk import Desk
from ama_acp.client.terminal.grants import Grants
from ama_acp.client.terminal.program_status import Emitter
from ama_acp.client.terminal.repl import LineSource, run_line, terminal_permission, typed_lines
from ama_acp.client.terminal.turn import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATIONS,
    Interrupted,
    describe_failure,
    report_violations,
    settle_session_open,
)
from ama_acp.client.terminal.turn_status import APP, TurnStatus
from ama_acp.errors import ConfigError
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.rpc.errors import INVALID_PARAMS
from ama_acp.textsafe import one_line, terminal_safe

INIT_TIMEOUT = 30.0
STDERR_GRACE = 0.5  # seconds to wait, after the agent was closed, for the end of its stderr


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ama acp-client",
        description="Drive an ACP agent over stdio and show what an editor would show.",
        usage="ama acp-client [--prompt TEXT]... [--list | --load ID | --resume ID] [--cwd DIR] "
        "[--auto-approve|--reject] [--program-status auto|on|off] [--no-fs] [--no-terminal] [--allow-terminals] -- AGENT COMMAND...",
    )
    p.add_argument("--prompt", action="append", default=[], metavar="TEXT", help="a prompt to send (repeatable)")
    p.add_argument("--cwd", default=None, help="the session's working directory (default: the current one)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--list", action="store_true", help="list the agent's sessions for --cwd, then exit")
    which.add_argument("--load", metavar="ID", help="open a stored session; the agent replays it")
    which.add_argument("--resume", metavar="ID", help="open a stored session without a replay")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--auto-approve", action="store_true", help="allow every permission request once")
    answer.add_argument("--reject", action="store_true", help="reject every permission request")
    p.add_argument(
        "--program-status",
        choices=("auto", "on", "off"),
        default=None,
        help="report the client's state to the terminal (OSC 7501); default: config, else auto",
    )
    p.add_argument("--config", default=None, metavar="PATH", help="ama's config file (for client.program_status)")
    p.add_argument("--no-fs", action="store_true", help="do not offer fs/read_text_file and fs/write_text_file")
    p.add_argument("--no-terminal", action="store_true", help="do not offer terminal/*")
    p.add_argument(
        "--allow-terminals",
        action="store_true",
        help="run every command the agent asks for (terminal/create) without asking; without it each is asked "
        "about, and refused when there is no terminal to ask",
    )
    p.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    return p


def _split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


async def ask_person(params: JSONObject) -> JSONValue:
    """Permission policy without a terminal we can drive (not POSIX): the options on stderr, a line from stdin."""
    params = terminal_safe(params)
    options = objects(params.get("options"))
    tool = call if isinstance(call := params.get("toolCall"), dict) else {}
    lines = [f"Permission requested: {field(tool.get('title') or tool.get('toolCallId'))}"]
    lines += ["  │ " + detail for detail in permission_details(tool)]
    lines += [f"  {i}. {field(o.get('name'))} ({field(o.get('kind'))})" for i, o in enumerate(options, 1)]
    sys.stderr.write("\n".join(lines) + "\nChoose a number (empty = cancel): ")
    sys.stderr.flush()
    answer = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    try:
        return options[int(answer.strip()) - 1].get("optionId")
    except (ValueError, IndexError):
        return None


def program_status_mode(args: argparse.Namespace, err: Writer) -> str:
    """--program-status, else the config's `client.program_status`, else auto. A config that cannot be read is
    an error when it was named (--config or AMA_CONFIG, as for ama itself), a warning otherwise: the client still
    works, with auto."""
    if args.program_status is not None:
        return str(args.program_status)
    from ama_acp.config import load_config

    try:
        return load_config(args.config).client.program_status
    except ConfigError as exc:
        if args.config is not None or os.environ.get("AMA_CONFIG"):
            raise
        err.write(f"ama acp-client: ignoring the config ({exc}); program status is auto\n")
        return "auto"


def _flushing_writer(out: Writer) -> Callable[[str], None]:
    def write(text: str) -> None:
        out.write(text)
        flush = getattr(out, "flush", None)
        if flush:
            flush()

    return write


async def _piped_lines(stdin: IO[str]) -> AsyncIterator[str]:
    """Prompts piped in: one per non-empty line, until EOF (or a stdin that cannot be read)."""
    while True:
        try:
            line = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
        except (OSError, ValueError):
            return
        if not line:
            return
        if line.strip():
            yield line.rstrip("\n")


async def _given(prompts: Iterable[str]) -> AsyncIterator[str]:
    for text in prompts:
        yield text


class _Client:
    """One run: the connection, the renderer, the program status and where lines come from."""

    def __init__(
        self, args: argparse.Namespace, out: Writer, err: Writer, term: LineSource | None, stdin: IO[str] | None
    ) -> None:
        self.args, self.out, self.err, self.term, self.stdin = args, out, err, term, stdin
        self.cwd = os.path.abspath(args.cwd or os.getcwd())
        self.renderer = Renderer(out, colour=False if args.no_color else None, cwd=self.cwd)
        self.session_id: str | None = None
        # One line for every question and the prompt; the commands the person just allowed (one question each).
        self.desk = Desk(self.renderer)
        self.grants = Grants()
        self.person_answers = False  # whether the permission policy asks the person (only their answer grants)
        self.step = "start"  # what the client was doing, for the message when something fails
        self.status = TurnStatus(None)

    def use_status(self, emitter: Emitter | None) -> None:
        self.status = TurnStatus(
            emitter, percent=lambda: context_percent(self.renderer.usage.get(self.session_id or ""))
        )
        # The progress follows the meter: a new figure moves it, a model change (the figure forgotten) drops it.
        self.renderer.on_meter = self._meter_moved

    def _meter_moved(self, session_id: str) -> None:
        if session_id == self.session_id:
            self.status.meter_changed()

    def on_update(self, params: JSONObject) -> None:
        self.renderer.update(params)
        self.grants.updated(params)
        if params.get("sessionId") != self.session_id or not isinstance(update := params.get("update"), dict):
            return
        if update.get("sessionUpdate") == "session_info_update" and "title" in update:
            self._take_title()

    def _take_title(self) -> None:
        """The program status carries the title the renderer last showed for the session. Also called once the
        session is open: a title sent while it opened (ama's on load/resume) was held with the other updates,
        and came before the client knew the session's id."""
        title = self.renderer.titles.get(str(self.session_id))
        self.status.titled(title if isinstance(title, str) else None)

    def _warn(self, text: str) -> None:
        self.err.write(f"ama acp-client: {text}\n")

    def policy(self) -> PermissionPolicy:
        if self.args.auto_approve:
            return "allow_once"
        if self.args.reject:
            return "reject_once"
        if self.term is not None:
            self.person_answers = True
            return terminal_permission(self.term, self.renderer, self.status, self.desk)
        self.person_answers = self.stdin is not None and self.stdin.isatty()
        return ask_person if self.person_answers else "reject_once"

    def on_permission(self, params: JSONObject, outcome: JSONObject) -> None:
        self.renderer.permission(params, outcome)
        if self.person_answers:
            self.grants.permitted(params, outcome)

    def lines(self) -> AsyncIterator[str]:
        if self.args.prompt:
            return _given(self.args.prompt)
        if self.term is not None:
            return typed_lines(self.term, self.renderer, self.desk)
        return _piped_lines(self.stdin) if self.stdin is not None else _given([])

    async def run(self, command: list[str]) -> int:
        # The agent's stderr comes through a pipe, each line shown with its controls made visible (never raw).
        stderr = AgentStderr(_flushing_writer(self.err)) if os.name == "posix" else None
        code = EXIT_ERROR
        try:
            async with anyio.create_task_group() as tg:
                if stderr is not None:
                    tg.start_soon(stderr.pump)
                try:
                    code = await self._run(command, stderr)
                finally:
                    if stderr is not None:
                        stderr.spawned()  # the agent's copy is all that can keep the pipe open now
                        with anyio.move_on_after(STDERR_GRACE, shield=True):
                            await stderr.ended.wait()  # its last lines, unless a child of it holds the pipe
                    tg.cancel_scope.cancel()
        finally:
            if stderr is not None:
                stderr.close()
        return code

    async def _run(self, command: list[str], stderr: AgentStderr | None) -> int:
        from ama_acp.client.terminal.access_prompt import access_policy, allow_all

        # Files outside the session's cwd, and every command unless --allow-terminals: the person decides. A
        # command the person has just allowed in a permission request is not asked about again (grants.py). A
        # command that runs, runs in the sandbox (the session's folder writable, no network unless allowed).
        ask = access_policy(self.term, self.renderer, self.status, self.stdin, self.err, self.desk)
        sandbox = None if self.args.no_terminal else configured_sandbox(self.args.config, self._warn)
        if self.args.allow_terminals and (why := unsandboxed(sandbox)):  # no question will say it
            self.err.write(f"ama acp-client: the agent's commands are not sandboxed: {why}\n")
        options = ClientOptions(
            fs=not self.args.no_fs,
            terminal=not self.args.no_terminal,
            permission=self.policy(),
            boolean_config=True,
            file_gate=ask,
            terminal_gate=allow_all if self.args.allow_terminals else self.grants.gate(ask),
            sandbox=sandbox,
        )
        conn = AgentProcess(
            command,
            options,
            stderr=stderr.child_fd if stderr is not None else None,
            on_update=self.on_update,
            on_permission=self.on_permission,
        )
        self.renderer.terminal_output = conn.terminal_output
        self.step = "start"
        try:
            async with conn:
                if stderr is not None:
                    stderr.spawned()
                code = await self._session(conn)
        except (Exception, KeyboardInterrupt) as exc:
            code = self._failed(exc)
        finally:
            self.status.clear()
        return self._checked(conn, code)

    async def _session(self, conn: AgentProcess) -> int:
        """Initialize, list the sessions or converse in one, and close the agent: the exit code."""
        self.step = "initialize"
        init = await conn.initialize(timeout=INIT_TIMEOUT)
        self._show_agent(init)
        code = EXIT_OK
        if self.args.list:
            self.step = "session/list"
            found = await sessions.list_sessions(conn, init, self.cwd)
            for text in sessions.session_lines(found, self.cwd, one_line):
                self.renderer.line(text)
        else:
            code = await self._converse(conn, init)
        self.step = "shutdown"
        self.renderer.end_stream()
        rc = await conn.close()
        if rc not in (0, None) and code == EXIT_OK:
            self.err.write(f"ama acp-client: the agent exited with code {rc} after stdin closed\n")
        return code

    def _failed(self, exc: BaseException) -> int:
        """Say what failed (Ctrl-C as an interruption): the exit code."""
        self.renderer.end_stream()
        if isinstance(exc, KeyboardInterrupt):
            exc = Interrupted("interrupted")
        code, message = describe_failure(exc, self.step)
        self.err.write(f"ama acp-client: {one_line(message)}\n")
        return code

    def _checked(self, conn: AgentProcess, code: int) -> int:
        """The exit code once the run's protocol violations and unreleased terminals are told."""
        if report_violations(conn, self.err) and code == EXIT_OK:
            code = EXIT_VIOLATIONS
        unreleased = conn.terminals.unreleased()
        if unreleased:
            self.err.write(f"ama acp-client: the agent never released terminal(s) {', '.join(unreleased)}\n")
        return code

    def _show_agent(self, init: JSONObject) -> None:
        info = terminal_safe(init.get("agentInfo"))
        if isinstance(info, dict):
            name = field(info.get("title") or info.get("name"))
            self.renderer.line(f"agent: {name} {field(info.get('version', ''))}".rstrip())
        version = init.get("protocolVersion")
        if version != 1:
            shown = field(repr(version))
            raise RpcError(INVALID_PARAMS, f"the agent speaks protocol version {shown}, this client speaks 1")

    async def _converse(self, conn: AgentProcess, init: JSONObject) -> int:
        # What the session opens with (its options) reads better before the updates that follow it; for a load,
        # the replay arrives before the answer and is shown after it.
        self.step = "session/load" if self.args.load else "session/resume" if self.args.resume else "session/new"
        self.renderer.hold()
        opened = await sessions.open_session(conn, init, self.cwd, load=self.args.load, resume=self.args.resume)
        self.session_id = opened.session_id
        self.renderer.line(self.renderer.style(DIM, f"session {field(opened.session_id)} ({opened.how})"))
        self.renderer.session_opened(opened.session_id, opened.result, quiet=opened.how == "new")
        await settle_session_open(conn, opened.session_id)
        self.renderer.release()  # the title among the held updates is shown here: `title: …` on open
        self._take_title()
        self.renderer.show_meter(opened.session_id)  # from the open on: `ctx ?` if the agent reported nothing
        self.status.idle()
        code = EXIT_OK
        typed = self.term is not None and not self.args.prompt  # the terminal echoed the line as it was typed
        async for text in self.lines():
            self.step = "session/prompt"
            if not typed:
                self.renderer.line(f"» {text}")
            result = await run_line(conn, self.renderer, opened.session_id, text, self.err, self.status)
            if result is not None:
                self.desk.withdraw(opened.session_id)  # the turn is over: no question of it is waited for now
            if not typed and result is not None and result.get("stopReason") == "cancelled":
                code = EXIT_INTERRUPTED  # a script's prompt was cancelled (Ctrl-C): the rest is not sent
                break
        return code


async def _main(args: argparse.Namespace, command: list[str], out: Writer, err: Writer, stdin: IO[str] | None) -> int:
    mode = program_status_mode(args, err)
    write = _flushing_writer(out)
    tmux = tty_input.in_tmux(os.environ)
    async with AsyncExitStack() as stack:
        term = _terminal_input(stack, stdin, write)
        emitter = await _status_emitter(mode, term, out, write, tmux)
        client = _Client(args, out, err, term, stdin)
        client.use_status(emitter)
        code = EXIT_ERROR
        ended_by: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_end_on_signals, tg.cancel_scope, ended_by)
            try:
                code = await client.run(command)
            finally:
                tg.cancel_scope.cancel()
                if emitter is not None:
                    emitter.dispose()  # a report still held by the throttle is not written after the end
        if ended_by:
            err.write(f"ama acp-client: ended by {signal.Signals(ended_by[0]).name}\n")
            return 128 + ended_by[0]
        return code


def _terminal_input(
    stack: AsyncExitStack, stdin: IO[str] | None, write: Callable[[str], None]
) -> tty_input.TerminalInput | None:
    """The terminal the person types at, raw for the run (None when stdin is not one)."""
    if stdin is None or os.name != "posix" or not stdin.isatty():
        return None
    term = stack.enter_context(tty_input.TerminalInput(stdin.fileno(), write))
    term.set_signals(True)  # Ctrl-C is SIGINT except while a line is read (a hung agent can be left)
    return term


async def _status_emitter(
    mode: str, term: tty_input.TerminalInput | None, out: Writer, write: Callable[[str], None], tmux: bool
) -> Emitter | None:
    """Where program status goes: None when the mode, the terminals or the terminal's answer say not to send it."""
    isatty = getattr(out, "isatty", None)
    stdout_tty = bool(isatty and isatty())
    decision = tty_input.resolve_mode(mode, stdin_tty=term is not None, stdout_tty=stdout_tty, tmux=tmux)
    if decision == "on":
        return Emitter(write, tmux=tmux, app=APP)
    if decision == "detect" and term is not None and await term.detect_program_status():
        return Emitter(write, app=APP)
    return None


async def _end_on_signals(scope: anyio.CancelScope, ended_by: list[int]) -> None:
    """SIGTERM or SIGHUP (the terminal closed): unwind as on any other exit, so the agent is closed, the terminal
    told `clear` and the tty given back its mode. The default action would kill us with the tty left raw."""
    wanted = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None]
    try:
        receiver = anyio.open_signal_receiver(*wanted)
    except (ValueError, RuntimeError, NotImplementedError):
        return  # not the main thread, or no signals here
    with receiver as signals:
        async for signum in signals:
            ended_by.append(int(signum))
            scope.cancel()
            return


def run_acp_client(
    argv: list[str], out: Writer | None = None, err: Writer | None = None, stdin: IO[str] | None = None
) -> int:
    """`ama acp-client …` (argv without the program and subcommand names); returns the exit code. `stdin` is
    the terminal the person types at (default: sys.stdin when it is one)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    own, command = _split_command(list(argv))
    parser = _parser()
    try:
        args = parser.parse_args(own)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not command:
        err.write("ama acp-client: give the agent command after `--`, e.g. `ama acp-client -- ama --mode acp`\n")
        return EXIT_USAGE
    if stdin is None and out is sys.stdout:
        stdin = sys.stdin
    try:
        return anyio.run(_main, args, command, out, err, stdin)
    except ConfigError as exc:
        err.write(f"ama acp-client: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("ama acp-client: interrupted\n")
        return EXIT_INTERRUPTED
