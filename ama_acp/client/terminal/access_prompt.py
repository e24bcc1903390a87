"""`ama acp-client`'s answer to an agent that wants to touch the machine (see confine.py): it asks the person.

- A file outside the session's cwd: "The agent wants to read PATH outside the project. Allow? [y/N]".
- Every terminal/create, unless the client was started with `--allow-terminals` or the person has just allowed
  that very command in a permission request (grants.py): the command and its folder, and "not sandboxed" (and
  why) when the command would run unconfined though `[sandbox]` asks for a sandbox.

Only `y` or `yes` allows; anything else, Ctrl-C or Ctrl-D refuses. Without a terminal to ask (stdin piped) the
request is refused and the refusal said on stderr. Paths and commands are the agent's strings: shown on one line
with their control characters made visible, so they cannot forge lines of the question or drive the terminal.
A question waits its turn at the line the permission questions and the prompt share (desk.py); one the agent
withdraws, or whose turn ends while it is open, refuses.
"""

from __future__ import annotations

import sys
from typing import IO

import anyio

from ama_acp.client.confine import Access, Decide
from ama_acp.client.display.render import Renderer, Writer, field
from ama_acp.client.terminal.desk import Desk
from ama_acp.client.terminal.repl import LineSource
from ama_acp.client.terminal.tty_input import LineInterrupted
from ama_acp.client.terminal.turn_status import TurnStatus

YES = frozenset({"y", "yes"})


def question(access: Access) -> str:
    """What the person is asked, one line per part, every agent string made safe."""
    if access.method == "terminal/create":
        confined = f" (not sandboxed: {field(access.unsandboxed)})" if access.unsandboxed else ""
        return f"The agent wants to run: {field(access.command)}\n  in {field(access.path)}{confined}\nAllow? [y/N] "
    return f"The agent wants to {access.verb} {field(access.path)} outside the project. Allow? [y/N] "


def refusal(access: Access) -> str:
    what = f"run {field(access.command)} in" if access.method == "terminal/create" else access.verb
    return f"ama acp-client: refused the agent's request to {what} {field(access.path)} (no terminal to ask)\n"


def access_policy(
    term: LineSource | None,
    renderer: Renderer,
    status: TurnStatus,
    stdin: IO[str] | None,
    err: Writer,
    desk: Desk | None = None,
) -> Decide:
    """The policy: ask at the terminal (`term`), or at a plain console stdin (not POSIX), else refuse. `desk` is
    the line shared with the client's other questions (default: one of its own); a withdrawn question refuses."""
    line = desk if desk is not None else Desk(renderer)  # two requests at once: one line to answer on

    async def read(access: Access) -> str | None:
        renderer.end_stream()
        if term is not None:
            try:
                return await term.read_line(question(access))
            except LineInterrupted:
                return None
        sys.stderr.write(question(access))
        sys.stderr.flush()
        assert stdin is not None
        return await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)

    async def decide(access: Access) -> bool:
        if term is None and not (stdin is not None and stdin.isatty()):
            err.write(refusal(access))
            return False
        status.permission_asked(f"Allow the agent to {access.verb}?")
        try:
            answer = await line.ask(access.session_id, lambda: read(access))
        finally:
            status.permission_answered()
        return answer is not None and answer.strip().lower() in YES

    return decide


async def allow_all(_access: Access) -> bool:
    """--allow-terminals: every command runs without a question."""
    return True
