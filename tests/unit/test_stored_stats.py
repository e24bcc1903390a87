"""`ama stats` reads a stored session's states as a load does (session/accounting/stored_stats.py): the last good
state stands, a damaged one is skipped (never a made-up 0), a compaction or a model switch voids the context
figure, and only the session's own requests name its model."""

from __future__ import annotations

from typing import Any

import msgspec

from ama_acp.context.billing import BilledTotals, BillingState
from ama_acp.context.meter import MeterState
from ama_acp.conversation.messages import Usage
from ama_acp.session.accounting.stored_stats import stored_stats
from ama_acp.session.store import entries as en


def _usage(model: str, meter: Any, cost: float | None, purpose: str = "turn", requests: int = 1) -> en.UsageEntry:
    billing = BillingState(
        totals=BilledTotals(requests=requests, input=100 * requests, total=120 * requests), cost=cost
    )
    return en.UsageEntry(
        model_id=model, usage=Usage(), purpose=purpose, meter=meter, billing=msgspec.to_builtins(billing)
    )


def _meter(used: int, trailing: int = 0) -> dict[str, Any]:
    out = msgspec.to_builtins(MeterState(source="usage", usage_tokens=used, trailing_tokens=trailing))
    assert isinstance(out, dict)
    return out


def windows(model: str) -> int | None:
    return {"m/big": 100_000}.get(model)


def test_the_last_good_states_are_read_and_the_window_comes_from_the_catalog() -> None:
    entries = [
        _usage("m/big", _meter(20_000, 50), 0.01),
        _usage("m/small", _meter(1), 0.5, purpose="task", requests=2),  # a task's request: not the session's model
        _usage("m/big", {"source": "usage", "usage_tokens": -5}, 0.02, requests=3),  # a damaged meter: skipped
    ]
    stats = stored_stats("s1", entries, windows)
    billed = stats["billed"]
    assert stats["model"] == "m/big" and isinstance(billed, dict) and billed["requests"] == 3
    assert stats["cost"] == {"amount": 0.02, "currency": "USD"}
    assert (stats["contextTokens"], stats["contextWindow"], stats["contextPercent"]) == (1, 100_000, 0.0)


def test_a_compaction_or_a_switch_voids_the_figure_and_unknowns_are_left_out() -> None:
    compacted = stored_stats("s1", [_usage("m/big", _meter(20_000), None), en.CompactionEntry(1, "h.md", 3)], windows)
    assert "contextTokens" not in compacted and "cost" not in compacted  # unknown, never 0
    switched = stored_stats("s1", [_usage("m/big", _meter(20_000), 0.01), en.ModelEntry(model_id="m/other")], windows)
    assert switched["model"] == "m/other" and "contextTokens" not in switched
    unknown_window = stored_stats("s1", [_usage("m/else", _meter(500), 0.01)], windows)
    assert unknown_window["contextTokens"] == 500 and "contextPercent" not in unknown_window
    assert stored_stats("s1", [], windows) == {
        "sessionId": "s1",
        "billed": {"requests": 0, "sideRequests": 0, "unreported": 0, "input": 0, "output": 0, "total": 0},
        "cost": {"amount": 0.0, "currency": "USD"},
    }
