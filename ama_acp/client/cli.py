"""`ama acp-client [--prompt TEXT]... [--cwd DIR] [--auto-approve|--reject] [--no-fs] [--no-terminal]
-- AGENT COMMAND…`: drive any ACP agent over stdio and print what an editor would show.

Exit codes: 0 success, 1 the agent answered with an error or did not answer in time, 2 bad usage,
3 the agent could not start or exited, 4 the conversation worked but the agent broke the protocol
(stdout that is not JSON-RPC, calls to methods the client did not advertise), 130 cancelled by Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

import anyio

from ama_acp.client.connection import AgentExited, AgentProcess, AgentStartError, ClientOptions
from ama_acp.client.handlers import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from ama_acp.client.render import Renderer, Writer, permission_details
from ama_acp.errors import ControlFlow

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_AGENT_DIED, EXIT_VIOLATIONS, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
INIT_TIMEOUT = 30.0


class Interrupted(ControlFlow):
    """Ctrl-C twice: stop waiting for the agent."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ama acp-client",
        description="Drive an ACP agent over stdio and print what an editor would show.",
        usage="ama acp-client [--prompt TEXT]... [--cwd DIR] [--auto-approve|--reject] [--no-fs] [--no-terminal] "
        "-- AGENT COMMAND...",
    )
    p.add_argument("--prompt", action="append", default=[], metavar="TEXT", help="a prompt to send (repeatable)")
    p.add_argument("--cwd", default=None, help="the session's working directory (default: the current one)")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--auto-approve", action="store_true", help="allow every permission request once")
    answer.add_argument("--reject", action="store_true", help="reject every permission request")
    p.add_argument("--no-fs", action="store_true", help="do not offer fs/read_text_file and fs/write_text_file")
    p.add_argument("--no-terminal", action="store_true", help="do not offer terminal/*")
    p.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    return p


def _split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1 :]


async def ask_person(params: dict[str, Any]) -> str | None:
    """Interactive permission policy: list the options on stderr and read a choice from stdin."""
    options = [o for o in params.get("options") or [] if isinstance(o, dict)]
    tool = call if isinstance(call := params.get("toolCall"), dict) else {}
    lines = [f"Permission requested: {tool.get('title') or tool.get('toolCallId')}"]
    lines += ["  │ " + detail for detail in permission_details(tool)]
    lines += [f"  {i}. {o.get('name')} ({o.get('kind')})" for i, o in enumerate(options, 1)]
    sys.stderr.write("\n".join(lines) + "\nChoose a number (empty = cancel): ")
    sys.stderr.flush()
    answer = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    try:
        return options[int(answer.strip()) - 1].get("optionId")
    except (ValueError, IndexError):
        return None


async def run_turn(conn: AgentProcess, renderer: Renderer, session_id: str, text: str, err: Writer) -> dict[str, Any]:
    """One session/prompt, rendering as it goes. The first Ctrl-C sends session/cancel (the turn then ends
    with `cancelled`); a second one stops waiting."""
    pending = await conn.start_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )
    result: Any = None
    error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_sigint, conn, session_id, pending, err)
        try:
            result = await pending.wait(None)
        except Exception as exc:  # re-raised below, outside the task group (no ExceptionGroup wrapping)
            error = exc
        tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if not isinstance(result, dict):
        raise RpcError(INTERNAL_ERROR, f"session/prompt returned {result!r}, not an object")
    renderer.turn_end(session_id, result.get("stopReason"))
    usage = result.get("usage")
    if isinstance(usage, dict):
        figures = [f"{k} {v:,}" for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)]
        if figures:
            renderer.line("turn usage: " + " · ".join(figures))
    return result


async def _cancel_on_sigint(conn: AgentProcess, session_id: str, pending: Any, err: Writer) -> None:
    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT)
    except (ValueError, RuntimeError, NotImplementedError):
        return  # not the main thread, or no signals here: Ctrl-C keeps its default meaning
    cancelled = False
    with receiver as signals:
        async for _ in signals:
            if not cancelled:
                cancelled = True
                err.write("\nama acp-client: cancelling the turn (Ctrl-C again to stop waiting)\n")
                try:
                    await conn.cancel(session_id)
                except AgentExited:
                    pass
            else:
                pending._resolve(error=Interrupted("interrupted"))
                return


async def settle_session_open(conn: AgentProcess, session_id: str, timeout: float = 1.0) -> None:  # noqa: ASYNC109
    """Give the updates an agent sends right after a session opens (commands, options, the first meter)
    a moment to arrive, so they are shown before the first prompt rather than in the middle of its answer.
    An agent that reports no usage costs `timeout` once."""
    try:
        await conn.wait_for(lambda: bool(conn.updates_for(session_id, "usage_update")), timeout)
    except TimeoutError:
        pass


def report_violations(conn: AgentProcess, err: Writer) -> int:
    """Write the protocol violations seen to `err`; return how many there were."""
    for v in conn.violations:
        err.write(f"ama acp-client: protocol violation ({v.kind}): {v.detail}\n")
        if v.raw:
            err.write(f"    {v.raw[:200]}\n")
    return len(conn.violations)


def describe_failure(exc: BaseException, step: str) -> tuple[int, str]:
    """The exit code and the stderr message for a failure during `step`."""
    if isinstance(exc, AgentStartError):
        return EXIT_AGENT_DIED, f"cannot start the agent: {exc}"
    if isinstance(exc, AgentExited):
        code = f" with code {exc.returncode}" if exc.returncode is not None else ""
        return EXIT_AGENT_DIED, f"the agent exited{code} during {step}"
    if isinstance(exc, RpcError):
        data = f" {exc.data}" if exc.data is not None else ""
        return EXIT_ERROR, f"{step} failed: {exc.message} ({exc.code}){data}"
    if isinstance(exc, TimeoutError):
        return EXIT_ERROR, f"the agent did not answer {step} in time"
    if isinstance(exc, Interrupted):
        return EXIT_INTERRUPTED, f"interrupted during {step}"
    return EXIT_ERROR, f"{step} failed: {type(exc).__name__}: {exc}"


async def _main(args: argparse.Namespace, command: list[str], out: Writer, err: Writer) -> int:
    cwd = os.path.abspath(args.cwd or os.getcwd())  # noqa: ASYNC240 - once, before anything runs
    if args.auto_approve:
        policy: Any = "allow_once"
    elif args.reject or not sys.stdin.isatty():
        policy = "reject_once"
    else:
        policy = ask_person
    renderer = Renderer(out, colour=False if args.no_color else None, cwd=cwd)
    options = ClientOptions(fs=not args.no_fs, terminal=not args.no_terminal, permission=policy)
    conn = AgentProcess(command, options, on_update=renderer.update, on_permission=renderer.permission)
    renderer.terminal_output = conn.terminal_output
    step = "start"
    code = EXIT_OK
    try:
        async with conn:
            step = "initialize"
            init = await conn.initialize(timeout=INIT_TIMEOUT)
            info = init.get("agentInfo") if isinstance(init, dict) else None
            if isinstance(info, dict):
                renderer.line(f"agent: {info.get('title') or info.get('name')} {info.get('version', '')}".rstrip())
            version = init.get("protocolVersion") if isinstance(init, dict) else None
            if version != 1:
                raise RpcError(INVALID_PARAMS, f"the agent speaks protocol version {version!r}, this client speaks 1")
            step = "session/new"
            # What the session opens with (its options) reads better before the updates that follow it.
            renderer.hold()
            opened = await conn.new_session(cwd)
            session_id = opened["sessionId"]
            renderer.session_opened(session_id, opened)
            await settle_session_open(conn, session_id)
            renderer.release()
            for text in args.prompt:
                step = "session/prompt"
                renderer.line(f"» {text}")
                result = await run_turn(conn, renderer, session_id, text, err)
                if result.get("stopReason") == "cancelled":
                    code = EXIT_INTERRUPTED
                    break
            step = "shutdown"
            renderer.end_stream()
            rc = await conn.close()
            if rc not in (0, None) and code == EXIT_OK:
                err.write(f"ama acp-client: the agent exited with code {rc} after stdin closed\n")
    except (Exception, KeyboardInterrupt) as exc:
        renderer.end_stream()
        if isinstance(exc, KeyboardInterrupt):
            exc = Interrupted("interrupted")
        code, message = describe_failure(exc, step)
        err.write(f"ama acp-client: {message}\n")
    if report_violations(conn, err) and code == EXIT_OK:
        code = EXIT_VIOLATIONS
    unreleased = conn.terminals.unreleased()
    if unreleased:
        err.write(f"ama acp-client: the agent never released terminal(s) {', '.join(unreleased)}\n")
    return code


def run_acp_client(argv: list[str], out: Writer | None = None, err: Writer | None = None) -> int:
    """`ama acp-client …` (argv without the program and subcommand names); returns the exit code."""
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
    try:
        return anyio.run(_main, args, command, out, err)
    except KeyboardInterrupt:
        err.write("ama acp-client: interrupted\n")
        return EXIT_INTERRUPTED
