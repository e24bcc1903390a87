"""A stop condition for tool work done in a worker thread.

`anyio.to_thread.run_sync(..., abandon_on_cancel=True)` lets the awaiting task go on a cancel, but the
thread itself runs on: a walk over a huge tree or a search through many files would keep a CPU busy, and a
thread still running when the process ends keeps the interpreter from exiting (anyio's workers are not
daemon threads). So the work takes a `Budget` and checks it often; `run_bounded` stops the budget as soon as
the caller is done with the result one way or another (returned, cancelled, timed out).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar, TypeVarTuple, Unpack

import anyio

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    @property
    def cancelled(self) -> bool:
        """The caller no longer wants the result."""
        return self._stopped.is_set()

    def exhausted(self) -> bool:
        """Out of time or cancelled: the work should return what it has."""
        return self._stopped.is_set() or time.monotonic() > self.deadline


async def run_bounded(seconds: float, fn: Callable[[Budget, Unpack[Ts]], T], *args: *Ts) -> T:
    """Run `fn(budget, *args)` in a worker thread; a cancel returns at once and tells the thread to stop."""
    budget = Budget(seconds)
    try:
        return await anyio.to_thread.run_sync(fn, budget, *args, abandon_on_cancel=True)
    finally:
        budget.stop()
