"""The context meter line for a usage_update: `ctx 34% (68,000 / 200,000) $0.0451 [source usage] ███…`.

Each function takes the usage_update payload as the agent sent it (a JSON object, or None when none was
reported) and reads it as a lenient `agent_types.Usage`: a figure that is not a count is unknown, never 0.
"""

from __future__ import annotations

import math

from ama_acp.client.display.agent_types import AmaMeta, Cost, Usage, lenient
from ama_acp.client.display.ansi import BOLD, RED, RESET

BAR_WIDTH = 20
RED_ABOVE = 80.0  # percent: the meter turns red past this (where models start to degrade)
ESTIMATED_SOURCES = frozenset({"estimate", "prefix"})


def whole_percent(percent: float) -> int:
    """The percentage as the meter shows it at 10 % and above: half up (34.5 → 35), not Python's half to even."""
    return math.floor(percent + 0.5)


def format_percent(percent: float) -> str:
    """`34%`, or one decimal below 10 % (`1.3%`), so a fresh session never reads as 0 %."""
    tenths = math.floor(percent * 10 + 0.5) / 10
    if tenths < 10:
        return f"{tenths:.1f}%"
    return f"{whole_percent(percent)}%"


def format_cost(cost: object) -> str:
    """`$0.0451`, another currency by its code, or `$?` when the agent reported no cost: an unknown cost is
    never shown as free."""
    given = lenient(Cost, cost)
    if not isinstance(cost, dict) or given.amount is None or not math.isfinite(given.amount):
        return "$?"
    if given.currency == "USD":
        return f"${given.amount:.4f}"
    return f"{given.amount:.4f} {given.currency}"


def _cost(cost: object, ama: AmaMeta | None) -> str:
    """`format_cost`, and with an unknown cost the lower bound ama measured (`$? (≥ $0.0123)`)."""
    shown = format_cost(cost)
    if shown != "$?" or ama is None or not isinstance(ama.cost_lower_bound, dict):
        return shown
    bound = format_cost(ama.cost_lower_bound)
    return shown if bound == "$?" else f"$? (≥ {bound})"


def meter_bar(percent: float, colour: bool = False) -> str:
    """Twenty cells; coloured (red) only past 80 %, where a model starts to lose track."""
    filled = max(0, min(BAR_WIDTH, math.floor(percent / 100 * BAR_WIDTH + 0.5)))
    bar = "█" * filled + "░" * (BAR_WIDTH - filled)
    if colour and percent > RED_ABOVE:
        bar = RED + bar + RESET
    return bar


def _ama(usage: Usage) -> AmaMeta | None:
    """`_meta.ama`, when the agent sent one (an object)."""
    meta = usage.meta
    ama = meta.get("ama") if isinstance(meta, dict) else None
    return lenient(AmaMeta, ama) if isinstance(ama, dict) else None


def is_estimated(usage: object) -> bool:
    """Whether the figure is ama's estimate rather than a provider's reading: its `_meta.ama.source` says
    `estimate` or `prefix`. An agent that says nothing about provenance is taken at its word."""
    return _estimated(_ama(lenient(Usage, usage)))


def _estimated(ama: AmaMeta | None) -> bool:
    return ama is not None and ama.source in ESTIMATED_SOURCES


def _count(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def context_percent(usage: object) -> float | None:
    """used / size in percent, or None when the agent sent no usable window."""
    if not usage:
        return None
    figures = lenient(Usage, usage)
    used, size = _count(figures.used), _count(figures.size)
    if used is None or size is None:
        return None
    try:
        return used / size * 100 if size > 0 else None
    except OverflowError:  # JSON integers have no bound: 10**400 tokens is no figure at all
        return None


def format_ctx(usage: object, colour: bool = False) -> str:
    """The meter line for a usage_update payload: `ctx 34% (68,000 / 200,000) $0.0451 [source usage] ███…`.
    Estimated figures carry `≈` (`ctx ≈1.3% (≈2,500 / 200,000)`), an unknown cost is `$?` (with the lower bound
    ama sends beside it: `$? (≥ $0.0123)`), and without a
    window the line is `ctx ? $?` (with the tokens and the cost, when the agent sent those). No figure at all
    (`None`: never reported, or forgotten at a model change) is `ctx ? $?` too: the cost is always on the line,
    so a cost that became unknown never just vanishes from it."""
    if not usage:
        return "ctx ? $?"
    figures = lenient(Usage, usage)
    used = _count(figures.used)
    percent = context_percent(usage)
    ama = _ama(figures)
    approx = "≈" if _estimated(ama) else ""
    if percent is None or used is None:
        tokens = f" ({approx}{used:,} tokens)" if used is not None else ""
        return f"ctx ?{tokens} {_cost(figures.cost, ama)}"
    text = f"ctx {approx}{format_percent(percent)}"
    if colour and percent > RED_ABOVE:
        text = RED + BOLD + text + RESET
    shown = [text, f"({approx}{used:,} / {figures.size:,})", _cost(figures.cost, ama)]
    return " ".join([*shown, *_source(ama), meter_bar(percent, colour), *_tier(ama)])


def _source(ama: AmaMeta | None) -> list[str]:
    """`[source usage]`: where the figure came from, when the agent says."""
    if ama is None or ama.source is None:
        return []
    return [f"[source {ama.source}]"]


def _tier(ama: AmaMeta | None) -> list[str]:
    """`tier warning`: only the tiers that call for attention."""
    if ama is None or ama.tier not in ("warning", "danger"):
        return []
    return [f"tier {ama.tier}"]
