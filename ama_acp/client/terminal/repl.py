"""The person at the terminal: prompts typed at `» `, the client's own /commands, permission answers by number.

Keys: Enter sends the line; Ctrl-D on an empty line ends the session; Ctrl-C at the prompt clears the line, a
second one in a row exits. During a turn Ctrl-C cancels it (a permission request waiting for an answer is
answered `cancelled`), a second one exits. Ctrl-Z suspends the client, at the prompt or during a turn. The terminal
is in the client's own mode (`tty_input`) for the whole session (given back while suspended), so a terminal's
late reply to a query never shows up as typed text.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from ama_acp.client.connection import AgentProcess
from ama_acp.client.display.render import RED, Renderer, Writer, as_list, field
from ama_acp.client.handlers import RpcError
from ama_acp.client.terminal import slash
from ama_acp.client.terminal.desk import Desk
from ama_acp.client.terminal.tty_input import LineInterrupted
from ama_acp.client.terminal.turn import run_turn
from ama_acp.client.terminal.turn_status import TurnStatus

PROMPT = "» "
CHOICE_PROMPT = "Choose a number (empty = cancel): "


class LineSource(Protocol):
    """Where lines come from: the terminal (`tty_input.TerminalInput`). Ctrl-C is a signal (SIGINT) except while
    a line is read, when `read_line` raises LineInterrupted."""

    async def read_line(self, prompt: str) -> str | None: ...


def terminal_permission(
    term: LineSource, renderer: Renderer, status: TurnStatus, desk: Desk | None = None
) -> Callable[[dict[str, Any]], Any]:
    """A permission policy that asks the person: the request with its diff or command and numbered options, then
    a number (empty, Ctrl-D, a cancelled turn or a withdrawn question = `cancelled`). The program status is
    blocked meanwhile. `desk` is the line shared with the client's other questions (default: one of its own)."""

    line = desk if desk is not None else Desk(renderer)  # an agent may ask two at once: one line to answer on

    async def ask(params: dict[str, Any]) -> str | None:
        status.permission_asked(f"Permission: {renderer.permission_title(params)}")
        sid = params.get("sessionId")
        try:
            return await line.ask(sid if isinstance(sid, str) else None, lambda: _ask(params))
        finally:
            status.permission_answered()

    async def _ask(params: dict[str, Any]) -> str | None:
        options = [o for o in as_list(params.get("options")) if isinstance(o, dict)]
        renderer.permission_request(params, numbered=True)
        while True:
            try:
                answer = await term.read_line(CHOICE_PROMPT)
            except LineInterrupted:
                # Ctrl-C at the question means what it means during the rest of the turn: cancel it (the
                # turn's SIGINT handler sends session/cancel; a second Ctrl-C exits).
                os.kill(os.getpid(), signal.SIGINT)
                return None
            if answer is None or not answer.strip():
                return None
            try:
                index = int(answer.strip()) - 1
                if not 0 <= index < len(options):
                    raise ValueError(answer)
            except ValueError:
                renderer.line(f"not one of 1–{len(options)}")
                continue
            option_id = options[index].get("optionId")
            return option_id if isinstance(option_id, str) else None

    return ask


async def typed_lines(term: LineSource, renderer: Renderer, desk: Desk | None = None) -> AsyncIterator[str]:
    """The person's lines, until Ctrl-D or a second Ctrl-C in a row. With `desk`, the prompt waits while a
    question of the agent's holds the line."""
    armed = False
    while True:
        renderer.end_stream()
        try:
            line = await term.read_line(PROMPT) if desk is None else await desk.typed(lambda: term.read_line(PROMPT))
        except LineInterrupted:
            if armed:
                return
            armed = True
            renderer.line(renderer.style(RED, "(Ctrl-C again or Ctrl-D to exit)"))
            continue
        armed = False
        if line is None:
            return
        if line.strip():
            yield line


async def run_line(
    conn: AgentProcess,
    renderer: Renderer,
    session_id: str,
    line: str,
    err: Writer,
    status: TurnStatus,
) -> dict[str, Any] | None:
    """One line: a client /command (its outcome shown, the session goes on whatever the agent answered), or a
    prompt turn (its result returned)."""
    try:
        command = slash.parse(line)
    except slash.CommandError as exc:
        renderer.line(renderer.style(RED, str(exc)))
        return None
    if command is not None:
        # A model change forgets the meter and the agent reports the new model's: shown once, when it has answered.
        renderer.command_started(session_id)
        with renderer.one_meter_line(session_id):
            try:
                call, result = await slash.run(command, session_id, renderer, conn)
            except (slash.CommandError, RpcError) as exc:  # the agent's refusal, or its names in ours: one line
                renderer.line(renderer.style(RED, field(exc)))
                return None
            if call is None:
                renderer.line(slash.HELP)
            elif call.method == "session/set_mode":
                renderer.mode_set(session_id, str(call.params["modeId"]))
            else:  # set_config_option answers with every option: the one set is shown from there
                options = result.get("configOptions") if isinstance(result, dict) else None
                renderer.option_set(session_id, str(call.params["configId"]), as_list(options))
        return None
    return await run_turn(conn, renderer, session_id, line, err, status)
