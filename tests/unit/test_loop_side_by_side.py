"""Calls the host runs side by side (agent/loop.py `ConcurrentCalls`: the session's `task` calls): a run of them
goes at once, their results enter the conversation in call order whichever finishes first, other calls still
go one after the other, and a cancel closes every one of them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from ama_acp.agent.loop import run_turn
from ama_acp.conversation.messages import TextPart, ToolResultMessage, UserMessage
from ama_acp.tools.base import ToolResult
from tests.support.conversation import paired_everywhere
from tests.support.fakes import FakeHost, calls, text

pytestmark = pytest.mark.anyio

PROMPT = UserMessage([TextPart("go")])


class SideBySide(FakeHost):
    def runs_concurrently(self, name: str) -> bool:
        return name == "task"


def recorder(
    log: list[str], name: str, wait: anyio.Event | None = None, done: anyio.Event | None = None
) -> Callable[[dict[str, Any]], Awaitable[ToolResult]]:
    async def run(args: dict[str, Any]) -> ToolResult:
        log.append(f"start {name}")
        if wait is not None:
            await wait.wait()  # finishes only once the other call has: proves both ran at once
        if done is not None:
            done.set()
        log.append(f"end {name}")
        return ToolResult(f"result of {name}")

    return run


def results(host: FakeHost) -> list[str]:
    return [m.tool_call_id for m in host.messages if isinstance(m, ToolResultMessage)]


async def test_task_calls_run_at_once_and_their_results_keep_call_order() -> None:
    log: list[str] = []
    second_done = anyio.Event()
    calls_ = calls(("a", "task", '{"n": 1}'), ("b", "task", '{"n": 2}'))
    host = SideBySide([calls_, text("ok")])
    # The first call waits for the second to finish: sequential running would deadlock (the fail_after below).
    first = recorder(log, "first", wait=second_done)
    second = recorder(log, "second", done=second_done)
    order = iter([first, second])

    async def task(args: dict[str, Any]) -> ToolResult:
        return await next(order)(args)

    host.tools = {"task": task}
    with anyio.fail_after(5):
        assert await run_turn(host, PROMPT) == "end_turn"
    assert log.index("end second") < log.index("end first")  # the second finished first…
    assert results(host) == ["a", "b"]  # …and still its result comes after the first's
    assert paired_everywhere(host.messages)


async def test_other_calls_still_run_one_after_the_other() -> None:
    log: list[str] = []
    host = SideBySide(
        [calls(("a", "read", "{}"), ("b", "read", "{}")), text("ok")],
    )
    host.tools = {"read": recorder(log, "read")}
    assert await run_turn(host, PROMPT) == "end_turn"
    assert log == ["start read", "end read", "start read", "end read"]
    assert results(host) == ["a", "b"]


async def test_a_cancel_during_side_by_side_calls_closes_every_one() -> None:
    started = 0
    all_started = anyio.Event()

    async def hang(args: dict[str, Any]) -> ToolResult:
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    host = SideBySide([calls(("a", "task", "{}"), ("b", "task", "{}"), ("c", "task", "{}"))], {"task": hang})
    with anyio.fail_after(5), anyio.CancelScope() as scope:

        async def cancel_when_all_started() -> None:
            await all_started.wait()  # all three at once: a sequential run would never get here
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_all_started)
            await run_turn(host, PROMPT)
    assert started == 3
    assert results(host) == ["a", "b", "c"]
    assert paired_everywhere(host.messages)
    counts = host.final_status_counts()
    assert len(counts) == 3 and all(n == 1 for n in counts.values())
