"""Waiting for a condition the test cannot be told about (a file growing, a clock moving, another process or
thread doing something): poll it with a deadline, never sleep a fixed time and hope."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.01) -> T:
    """The first truthy value of ``predicate()``, checked every ``interval`` s; AssertionError naming ``what``
    once ``timeout`` s have passed without one (the predicate is checked once more at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def holds_within(condition: Callable[[], object], seconds: float, interval: float = 0.01) -> bool:
    """Whether ``condition()`` became true within ``seconds`` (checked once more at the deadline), for callers
    that assert on the outcome themselves (e.g. that something did *not* happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())
