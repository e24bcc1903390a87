"""One prompt turn as the terminal client runs it, and how a failure is told: shared by `ama acp-client` and
`ama demo`.

Exit codes: 0 success, 1 the agent answered with an error or did not answer in time, 2 bad usage, 3 the agent
could not start or exited, 4 the conversation worked but the agent broke the protocol (stdout that is not
JSON-RPC, calls to methods the client did not advertise), 130 cancelled by Ctrl-C.
"""

from __future__ import annotations

import signal

import anyio

from ama_acp.client.connection import AgentExited, AgentProcess, AgentStartError, PendingRequest
from ama_acp.client.display.render import Renderer, Writer
from ama_acp.client.errors import RpcError
from ama_acp.client.terminal.sessions import NotOffered
from ama_acp.client.terminal.turn_status import TurnStatus
from ama_acp.errors import ControlFlow
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.rpc.errors import INTERNAL_ERROR
from ama_acp.textsafe import one_line

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_AGENT_DIED, EXIT_VIOLATIONS, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class Interrupted(ControlFlow):
    """Ctrl-C twice: stop waiting for the agent."""


async def run_turn(
    conn: AgentProcess,
    renderer: Renderer,
    session_id: str,
    text: str,
    err: Writer,
    status: TurnStatus | None = None,
) -> JSONObject:
    """One session/prompt, rendering as it goes, with the program status following it. The first Ctrl-C sends
    session/cancel (which also answers a pending permission request `cancelled`; the turn then ends with
    `cancelled`); a second one stops waiting."""
    status = status or TurnStatus(None)
    status.working()
    pending = await conn.start_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )
    result: JSONValue = None
    error: BaseException | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_on_sigint, conn, session_id, pending, err)
        try:
            result = await pending.wait(None)
        except Exception as exc:  # re-raised below, outside the task group (no ExceptionGroup wrapping)
            error = exc
        tg.cancel_scope.cancel()
    if error is not None:
        if not isinstance(error, Interrupted):
            status.failed(str(error))
        raise error
    if not isinstance(result, dict):
        status.failed("the agent's answer to session/prompt is not an object")
        raise RpcError(INTERNAL_ERROR, f"session/prompt returned {result!r}, not an object")
    renderer.turn_end(session_id, result.get("stopReason"))
    status.turn_ended(result.get("stopReason"))
    summary = usage_line(result.get("usage"))
    if summary is not None:
        renderer.line(summary)
    return result


def usage_line(usage: object) -> str | None:
    """`turn usage: inputTokens 1,200 · outputTokens 80` for a prompt result's usage (the agent's keys, each one
    line with its controls visible), or None when it holds no count."""
    if not isinstance(usage, dict):
        return None
    figures = [f"{one_line(str(k))} {v:,}" for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)]
    return "turn usage: " + " · ".join(figures) if figures else None


async def _cancel_on_sigint(conn: AgentProcess, session_id: str, pending: PendingRequest, err: Writer) -> None:
    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT)
    except (ValueError, RuntimeError, NotImplementedError):
        return  # not the main thread, or no signals here: Ctrl-C keeps its default meaning
    cancelled = False
    with receiver as signals:
        async for _ in signals:
            if not cancelled:
                cancelled = True
                err.write("\nama acp-client: cancelling the turn (Ctrl-C again to exit)\n")
                try:
                    await conn.cancel(session_id)
                except AgentExited:
                    pass
            else:
                pending.resolve(error=Interrupted("interrupted"))
                return


async def settle_session_open(conn: AgentProcess, session_id: str, timeout: float = 1.0) -> None:
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
        err.write(f"ama acp-client: protocol violation ({one_line(v.kind)}): {one_line(v.detail)}\n")
        if v.raw:
            err.write(f"    {one_line(v.raw[:200])}\n")
    return len(conn.violations)


def describe_failure(exc: BaseException, step: str) -> tuple[int, str]:
    """The exit code and the stderr message for a failure during `step`: one line, its controls visible (an
    error's message and data are the agent's words)."""
    code, message = _failure(exc, step)
    return code, one_line(message)


def _failure(exc: BaseException, step: str) -> tuple[int, str]:
    if isinstance(exc, AgentStartError):
        return EXIT_AGENT_DIED, f"cannot start the agent: {exc}"
    if isinstance(exc, AgentExited):
        code = f" with code {exc.returncode}" if exc.returncode is not None else ""
        return EXIT_AGENT_DIED, f"the agent exited{code} during {step}"
    if isinstance(exc, RpcError):
        return EXIT_ERROR, f"{step} failed: {exc}"  # its sentences (errors.RpcError), never a dict of its data
    if isinstance(exc, TimeoutError):
        return EXIT_ERROR, f"the agent did not answer {step} in time"
    if isinstance(exc, Interrupted):
        return EXIT_INTERRUPTED, f"interrupted during {step}"
    if isinstance(exc, NotOffered):
        return EXIT_ERROR, str(exc)
    return EXIT_ERROR, f"{step} failed: {type(exc).__name__}: {exc}"
