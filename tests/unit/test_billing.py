"""Billed totals and cost: docs/rules.md U16, U17, S1."""

from __future__ import annotations

import msgspec
import pytest

from ama_acp.config import Price
from ama_acp.context.billing import Billing, BillingState, request_cost
from ama_acp.conversation.messages import Usage
from ama_acp.session.accounting.session_context import billed_stats

SONNET = Price(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)
NO_CACHE_RATES = Price(input=1.0, output=2.0)


def test_u17_cost_with_cache_rates_against_a_hand_computed_figure() -> None:
    b = Billing()
    usage = Usage(input=1_000, output=500, cache_read=20_000, cache_write=4_000)
    # 1,000 x $3 + 500 x $15 + 20,000 x $0.30 + 4,000 x $3.75 = $31,500 per million = $0.0315
    assert b.add(usage, SONNET) == pytest.approx(0.0315)
    b.add(Usage(input=10, output=2, cache_read=1_000_000), SONNET)
    # + 10 x 3 + 2 x 15 + 1,000,000 x 0.30 = 300,060 per million = $0.30006
    assert b.cost == pytest.approx(0.0315 + 0.30006)


def test_u16_billed_totals_include_requests_outside_the_context() -> None:
    b = Billing()
    b.add(Usage(input=100, output=10, cache_read=50), SONNET)
    b.add(Usage(input=2_000, output=300), SONNET, enters_context=False)  # a compaction summary
    b.add(Usage(input=40, output=8, total=48, reasoning=5), SONNET, enters_context=False)  # a title
    t = b.totals()
    assert (t.requests, t.side_requests) == (3, 2)
    assert (t.input, t.output, t.cache_read, t.cache_write, t.reasoning) == (2140, 318, 50, None, 5)
    assert t.total == 160 + 2300 + 48


def test_u17_one_unpriced_request_makes_the_session_cost_unknown_for_good() -> None:
    b = Billing()
    b.add(Usage(input=100, output=10), SONNET)
    priced = b.cost  # read once: the checks below read it again after each add
    assert priced is not None
    assert b.add(Usage(input=100, output=10), None) is None
    assert b.cost is None
    b.add(Usage(input=100, output=10), SONNET)  # later priced requests do not bring a partial sum back
    assert b.cost is None


def test_u17_cache_tokens_at_an_unknown_rate_are_unpriced() -> None:
    assert request_cost(Usage(input=100, output=10, cache_read=5), NO_CACHE_RATES) is None
    assert request_cost(Usage(input=100, output=10, cache_write=5), NO_CACHE_RATES) is None
    # No cache tokens used: the unknown rate does not matter.
    assert request_cost(Usage(input=100, output=10, cache_read=0), NO_CACHE_RATES) == pytest.approx(120 / 1e6)


@pytest.mark.parametrize(
    "usage",
    [None, Usage(), Usage(total=500), Usage(input=-1, output=3), Usage(input=0, output=0, cache_read=0)],
    ids=["no-usage", "empty", "total-only", "negative", "zeros"],
)
def test_u17_request_without_usable_usage_is_unpriced(usage: Usage | None) -> None:
    b = Billing()
    b.add(usage, SONNET)
    assert b.cost is None
    assert b.totals().requests == 1
    if usage is None or usage.total is None:  # a total alone is reported (it counts) but cannot be priced
        assert b.totals().unreported == 1


def test_u17_a_request_without_usage_makes_the_cost_unknown_not_zero() -> None:
    b = Billing()
    nothing_yet = b.cost  # read once: the checks below read it again after each add
    assert nothing_yet == 0.0  # nothing billed yet: $0 is a measurement
    b.add(Usage(input=100, output=10), SONNET)
    b.add(None, SONNET)
    assert b.cost is None and b.state().cost is None
    t = b.totals()
    assert (t.requests, t.unreported, t.reported, t.input) == (2, 1, 1, 100)


def test_cache_read_share_where_known() -> None:
    b = Billing()
    assert b.totals().cache_read_share() is None  # nothing billed: unknown, not 0
    b.add(Usage(input=1_000, output=10), SONNET)
    assert b.totals().cache_read_share() is None  # no request reported a cache figure
    b.add(Usage(input=1_000, output=10, cache_read=6_000, cache_write=2_000), SONNET)
    assert b.totals().cache_read_share() == 0.6  # 6,000 / (2,000 + 6,000 + 2,000)


def test_s2_billed_stats_show_requests_and_omit_sums_over_nothing() -> None:
    b = Billing()
    assert billed_stats(b.totals()) == {
        "requests": 0,
        "sideRequests": 0,
        "unreported": 0,
        "input": 0,
        "output": 0,
        "total": 0,
    }
    b.add(None, SONNET)
    assert billed_stats(b.totals()) == {"requests": 1, "sideRequests": 0, "unreported": 1}
    b.add(Usage(input=1_000, output=10, cache_read=3_000), SONNET, enters_context=False)
    assert billed_stats(b.totals()) == {
        "requests": 2,
        "sideRequests": 1,
        "unreported": 1,
        "input": 1_000,
        "output": 10,
        "total": 4_010,
        "cacheRead": 3_000,
        "cacheReadShare": 0.75,
    }


def test_u17_cost_never_repriced_on_model_switch() -> None:
    b = Billing()
    u = Usage(input=1_000_000, output=0)
    b.add(u, Price(input=3.0, output=15.0))  # model A
    b.add(u, Price(input=0.28, output=0.42))  # the user switched to model B
    assert b.cost == pytest.approx(3.28)


def test_free_model_costs_zero_not_unknown() -> None:
    b = Billing()
    b.add(Usage(input=100, output=10), Price(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0))
    assert b.cost == 0.0


def test_state_roundtrip_keeps_totals_and_cost() -> None:
    b = Billing()
    b.add(Usage(input=100, output=10, cache_read=7), SONNET)
    state = msgspec.json.decode(msgspec.json.encode(b.state()), type=BillingState)
    again = Billing(state)
    assert again.totals() == b.totals() and again.cost == pytest.approx(b.cost)
    unknown = Billing()
    unknown.add(None, SONNET)
    restored = Billing(msgspec.json.decode(msgspec.json.encode(unknown.state()), type=BillingState))
    assert restored.cost is None


def test_s1_turn_usage_is_the_difference_and_camel_case() -> None:
    b = Billing()
    b.add(Usage(input=100, output=10), SONNET)
    before = b.totals()
    b.add(Usage(input=200, output=20, cache_read=300, reasoning=4), SONNET)
    b.add(Usage(input=5, output=1), SONNET, enters_context=False)
    turn = b.totals().minus(before)
    assert turn.prompt_usage() == {
        "inputTokens": 205,
        "outputTokens": 21,
        "totalTokens": 526,
        "cachedReadTokens": 300,
        "thoughtTokens": 4,
    }
    assert Billing().totals().prompt_usage() == {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}


def test_u17_an_interrupted_request_counts_as_unreported_and_makes_the_cost_unknown() -> None:
    b = Billing()
    b.add(Usage(input=100, output=10), NO_CACHE_RATES)
    # Usage arrived for it or not, an interrupted request is never priced: the provider's count of it is unknown.
    assert b.add(Usage(input=100, output=10), NO_CACHE_RATES, interrupted=True) is None
    t = b.totals()
    assert (t.requests, t.unreported, t.interrupted, t.input) == (2, 1, 1, 100)
    assert b.cost is None
    stats = billed_stats(t)
    assert stats["interrupted"] == 1 and stats["unreported"] == 1
    assert Billing(msgspec.convert(msgspec.to_builtins(b.state()), BillingState)).totals().interrupted == 1
    assert "interrupted" not in billed_stats(Billing().totals())  # only when some request was


def test_u17_lower_bound_sums_what_was_priced_while_the_cost_is_unknown() -> None:
    b = Billing()
    b.add(Usage(input=1_000, output=100), NO_CACHE_RATES)  # $0.0012
    assert b.lower_bound is None  # known: the cost itself says it
    b.add(None, NO_CACHE_RATES, interrupted=True)  # a cancel: the total is unknown from now on
    assert b.cost is None and b.lower_bound == pytest.approx(0.0012)
    b.add(Usage(input=500, output=0), NO_CACHE_RATES)  # later priced requests raise the bound, never the total
    b.add_task_cost(0.25)
    assert b.cost is None and b.lower_bound == pytest.approx(0.0012 + 0.0005 + 0.25)
    again = Billing(msgspec.convert(msgspec.to_builtins(b.state()), BillingState))
    assert again.cost is None and again.lower_bound == pytest.approx(b.lower_bound)


def test_u17_a_state_stored_before_the_bound_starts_it_from_the_known_cost_or_zero() -> None:
    # Files written by an older ama have no `priced`: a known cost is the bound; an unknown one starts at 0.
    old_known = Billing(msgspec.convert({"cost": 0.5}, BillingState))
    old_known.add(None, SONNET)
    assert old_known.lower_bound == pytest.approx(0.5)
    old_unknown = Billing(msgspec.convert({"cost": None}, BillingState))
    assert old_unknown.lower_bound == 0.0
