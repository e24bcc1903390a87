"""The tasks' figures as the person reads them: `/tasks` and `_ama/session_stats` `external.byAgent`.

Both read the figures a task's record gives (session/tasks/record.py `TaskRecord.figures`) or the journal kept
(session/store/task_journal.py `TaskFigures.figures`), so a task reads the same whatever carried it out, live or
kept from an earlier connection. A figure that is absent is unknown, and says so; it is never read as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ama_acp.client.display.meter import format_percent

Figures = Mapping[str, object]

NO_TASKS = "No tasks in this session yet. The model starts one with the `task` tool."


def describe(tasks: Sequence[Figures]) -> str:
    """`/tasks`: each task of the session, its state, tokens, context and cost."""
    if not tasks:
        return NO_TASKS
    lines = ["**Tasks of this session**", ""]
    for task in tasks:
        lines += task_lines(task)
    return "\n".join(lines)


def task_lines(task: Figures) -> list[str]:
    """A task's line in `/tasks`, and its error below it."""
    title = task.get("description") or "(no description)"
    cost = _amount(task)
    money = f"${cost:.4f}" if cost is not None else "cost unknown"
    if task.get("external") is True:
        who, counts = f"`{task.get('agent')}` (external)", _reported(task)
    else:
        who, counts = f"`{task.get('agent')}`", _measured(task)
    line = f"- {who} — {title}: {task.get('status')}; {counts}; {money} ({task.get('model')})"
    error = task.get("error")
    return [line, f"  {error}"] if error else [line]


def _measured(task: Figures) -> str:
    """ama's own loop counts its requests and measures its context."""
    tokens = _int(task, "tokens")
    billed = f"{tokens:,} tokens billed" if tokens is not None else "tokens unknown"
    return f"{task.get('requests')} requests, {billed}; {_context(task, 'context unknown')}"


def _reported(task: Figures) -> str:
    """An external agent's figures are what it reported."""
    tokens = _int(task, "tokens")
    said = f"{tokens:,} tokens" if tokens is not None else "tokens not reported"
    return f"{said}; {_context(task, 'context not reported')}"


def _context(task: Figures, unknown: str) -> str:
    """The task's context as the client's meter reads (seed 001_: `ctx NN%` per child): `ctx 34% (68,000 /
    200,000)`, the percent as the meter rounds it (client/display/meter.py); `context 940 tokens` without a window;
    `unknown` without a figure."""
    used, window, percent = _int(task, "contextTokens"), _int(task, "contextWindow"), task.get("contextPercent")
    if used is None:
        return unknown
    if window is None or not isinstance(percent, int | float) or isinstance(percent, bool):
        return f"context {used:,} tokens"
    return f"ctx {format_percent(float(percent))} ({used:,} / {window:,})"


# The context figures byAgent carries: those of the agent's fullest context (a context is a state, not a sum).
CONTEXT_FIGURES = ("contextTokens", "contextWindow", "contextPercent")


def by_agent(tasks: Sequence[Figures]) -> dict[str, dict[str, object]]:
    """`_ama/session_stats` `external.byAgent` from the stats' `tasks` (those kept from earlier connections
    included): per external agent, its tasks, the prompts sent, and the tokens and cost it reported — a sum left
    out when any of its tasks did not report that figure (unknown, never a partial sum) — and the context figures
    (`CONTEXT_FIGURES`) of the fullest context its tasks reported, left out when none reported one. The fullest,
    not the newest: `tasks` lists this connection's tasks in start order but the kept ones in end order, and the
    figure must read the same before and after a load."""
    groups: dict[str, list[Figures]] = {}
    for task in tasks:
        agent = task.get("agent")
        if task.get("external") is True and isinstance(agent, str):
            groups.setdefault(agent, []).append(task)
    return {agent: _sums(group) for agent, group in groups.items()}


def _sums(group: list[Figures]) -> dict[str, object]:
    out: dict[str, object] = {"tasks": len(group), "requests": sum(_int(t, "requests") or 0 for t in group)}
    tokens = [n for t in group if (n := _int(t, "tokens")) is not None]
    if len(tokens) == len(group):
        out["tokens"] = sum(tokens)
    amounts = [a for t in group if (a := _amount(t)) is not None]
    if len(amounts) == len(group):
        out["cost"] = {"amount": round(sum(amounts, 0.0), 6), "currency": "USD"}
    reported = [t for t in group if _int(t, "contextTokens") is not None]
    if reported:
        fullest = max(reported, key=_fullness)
        out.update((key, fullest[key]) for key in CONTEXT_FIGURES if _number(fullest.get(key)) is not None)
    return out


def _fullness(task: Figures) -> tuple[float, int]:
    """A context with a percent ranks above one without (a window known), then by the percent, then the tokens."""
    percent = _number(task.get("contextPercent"))
    return (percent if percent is not None else -1.0, _int(task, "contextTokens") or 0)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(task: Figures, key: str) -> int | None:
    value = task.get(key)
    return value if isinstance(value, int) else None


def _amount(task: Figures) -> float | None:
    money = task.get("cost")
    amount = money.get("amount") if isinstance(money, dict) else None
    return amount if isinstance(amount, int | float) else None
