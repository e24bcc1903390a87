"""`/tasks` and `external.byAgent` read a task's figures (session/tasks/figures.py): each child's context as the
client's meter shows it (`ctx NN%`, issue 42: the seed's), and byAgent carrying the fullest context its tasks
reported — the same in any order, never a figure made up."""

from __future__ import annotations

from ama_acp.session.tasks.figures import by_agent, task_lines

BASE: dict[str, object] = {"agent": "ext", "description": "Ask", "status": "completed", "model": "m", "external": True}


def test_each_child_shows_ctx_with_the_meters_rounding() -> None:
    big = {**BASE, "contextTokens": 69_000, "contextWindow": 200_000, "contextPercent": 34.5}
    assert "; ctx 35% (69,000 / 200,000); " in task_lines(big)[0]  # half up, as the meter rounds
    small = {**BASE, "contextTokens": 2_600, "contextWindow": 200_000, "contextPercent": 1.3}
    assert "; ctx 1.3% (2,600 / 200,000); " in task_lines(small)[0]  # one decimal under 10 %, as the meter
    no_window = {**BASE, "contextTokens": 940}
    assert "; context 940 tokens; " in task_lines(no_window)[0]  # no window: no percent invented
    own = {**BASE, "external": False, "requests": 2, "tokens": 970}
    assert "2 requests, 970 tokens billed; context unknown; " in task_lines(own)[0]


def test_by_agent_carries_the_fullest_context_its_tasks_reported_in_any_order() -> None:
    first = {**BASE, "requests": 1, "contextTokens": 1_200, "contextWindow": 200_000, "contextPercent": 0.6}
    second = {**BASE, "requests": 1, "contextTokens": 50_000, "contextWindow": 100_000, "contextPercent": 50.0}
    silent = {**BASE, "requests": 1}
    fullest = {"contextTokens": 50_000, "contextWindow": 100_000, "contextPercent": 50.0}
    for order in ([first, second, silent], [silent, second, first]):  # live: start order; kept: end order
        assert by_agent(order)["ext"] == {"tasks": 3, "requests": 3, **fullest}
    no_window = {**BASE, "requests": 1, "contextTokens": 90_000}
    assert by_agent([no_window, first])["ext"]["contextTokens"] == 1_200  # a percent ranks above a bare count
    assert by_agent([no_window])["ext"] == {"tasks": 1, "requests": 1, "contextTokens": 90_000}
    assert by_agent([silent])["ext"] == {"tasks": 1, "requests": 1}  # none reported: none made up
    own = {**BASE, "external": False, "contextTokens": 5}
    assert by_agent([own]) == {}  # ama's own tasks are not external agents
