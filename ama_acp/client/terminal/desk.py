"""The one line the person answers on: `ama acp-client`'s questions (a permission request, a command or a file
the agent wants) and its `» ` prompt take turns at it.

Two readers of the terminal at once is an error (anyio's BusyResourceError) and two questions on the screen at
once are unanswerable, so every question is asked inside `Desk.ask`: shown and answered whole, one at a time.

A question whose request goes away is withdrawn, and the person is told: the agent cancelled the request
(`$/cancel_request`, or the client's session/cancel for a permission request), or the turn it belongs to ended
with the question still open — an agent that gave up waiting and moved on without cancelling leaves it open, and
an open question would otherwise hold the line forever. A withdrawn question frees the line for the next one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from ama_acp.client.display.ansi import DIM
from ama_acp.client.display.render import Renderer

_T = TypeVar("_T")

WITHDRAWN = "(question withdrawn: the agent no longer waits for this answer)"


class Desk:
    """Where questions wait their turn. `renderer` tells the person when an open question is withdrawn."""

    def __init__(self, renderer: Renderer) -> None:
        self._renderer = renderer
        self._lock = anyio.Lock()
        self._open: dict[int, tuple[str | None, anyio.CancelScope]] = {}
        self._counter = 0

    async def ask(self, session_id: str | None, question: Callable[[], Awaitable[_T]]) -> _T | None:
        """`question()` (which shows the question and reads its answer) once the line is free: its answer, or
        None when it was withdrawn (`withdraw`). A cancellation from outside (the request's) withdraws it too,
        and goes on."""
        async with self._lock:
            self._counter += 1
            token = self._counter
            scope = anyio.CancelScope()
            self._open[token] = (session_id, scope)
            try:
                with scope:
                    return await question()
            except anyio.get_cancelled_exc_class():
                self._withdrawn()
                raise
            finally:
                self._open.pop(token, None)
            self._withdrawn()  # reached only when `scope` was cancelled: `withdraw`
            return None

    async def typed(self, read: Callable[[], Awaitable[_T]]) -> _T:
        """The person's own line (the `» ` prompt): it waits for the line as a question does, and is never
        withdrawn."""
        async with self._lock:
            return await read()

    def withdraw(self, session_id: str) -> None:
        """The session's turn ended: its question still open is withdrawn (one still waiting for the line is asked
        in its turn: its request may yet be answered)."""
        for sid, scope in list(self._open.values()):
            if sid == session_id:
                scope.cancel()

    def _withdrawn(self) -> None:
        # The question's prompt (and whatever was typed after it) ends the screen's last line: start a new one.
        self._renderer.line("")
        self._renderer.line(self._renderer.style(DIM, WITHDRAWN))
