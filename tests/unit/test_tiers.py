"""Load tiers: docs/context.md "Load tiers" and "Notices"."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.context.tiers import TIERS, TierWatch, caps_text, fill_text, notice_text, tier_for
from tests.support.hypothesis_profiles import examples


@pytest.mark.parametrize(
    ("used", "tier"),
    [
        (0, "healthy"),
        (4_999, "healthy"),  # 49.99 %: reads 50.0 % rounded, but has not reached the cap
        (5_000, "mid"),
        (5_999, "mid"),
        (6_000, "high"),
        (6_999, "high"),
        (7_000, "warning"),
        (7_399, "warning"),  # 73.99 %: reads 74.0 % rounded
        (7_400, "danger"),
        (10_000, "danger"),
        (40_000, "danger"),  # above the window (a lower bound): never below danger
    ],
)
def test_tiers_default_caps_at_the_exact_token(used: int, tier: str) -> None:
    assert tier_for(used, 10_000) == tier


def test_tiers_configurable_caps() -> None:
    caps = [40, 55, 65, 80]
    assert [tier_for(n, 1_000, caps) for n in (399, 400, 550, 650, 799, 800)] == [
        "healthy",
        "mid",
        "high",
        "warning",
        "warning",
        "danger",
    ]


def test_a_decimal_cap_is_the_decimal_written_not_the_float_below_it() -> None:
    """55.3 as a float is 55.29999…: a fill of exactly 55.3 % reaches the cap, one token less does not."""
    caps = [55.3, 60.0, 70.0, 74.0]
    assert tier_for(553, 1_000, caps) == "mid"
    assert tier_for(552, 1_000, caps) == "healthy"
    assert tier_for(5_529_999, 10_000_000, caps) == "healthy"


@pytest.mark.parametrize(
    ("used", "window"),
    [(None, 10_000), (5_000, None), (5_000, 0), (None, None)],
)
def test_tiers_unmeasured_without_a_figure_is_never_healthy(used: int | None, window: int | None) -> None:
    assert tier_for(used, window) == "unmeasured"


def test_caps_that_are_not_finite_never_raise() -> None:
    """Config caps are floats: inf is never reached, -inf always, nan never."""
    inf, nan = float("inf"), float("nan")
    assert tier_for(10_000, 10_000, [50.0, 60.0, 70.0, inf]) == "warning"
    assert tier_for(0, 10_000, [-inf, 60.0, 70.0, 74.0]) == "mid"
    assert tier_for(10_000, 10_000, [nan, nan, nan, nan]) == "healthy"


# -- exact comparison: the property --------------------------------------------------------------------------

# Caps as a person writes them in TOML: whole or with up to two decimals, from 0 to 100.
_cap = st.decimals(min_value=0, max_value=100, places=2, allow_nan=False, allow_infinity=False)


def _oracle(used: int, window: int, caps: list[Decimal]) -> str:
    """The tier by exact rational comparison of used / window × 100 with each cap as written."""
    fill = Fraction(used * 100, window)
    reached = [fill >= Fraction(c) for c in caps]
    return TIERS[max((i + 1 for i, r in enumerate(reached) if r), default=0)]


@settings(max_examples=examples(500), deadline=None)
@given(
    window=st.integers(min_value=1, max_value=10**12),
    data=st.data(),
    caps=st.lists(_cap, min_size=4, max_size=4).map(sorted),
)
def test_property_tier_is_the_exact_rational_comparison(window: int, data: st.DataObject, caps: list[Decimal]) -> None:
    # Half the time the figure sits exactly on a cap, or one token either side of it: the boundaries are the
    # interesting places, and a uniform draw would rarely hit them.
    cap = data.draw(st.sampled_from(caps))
    at = math.ceil(Fraction(cap) * window / 100)  # the first token count that reaches the cap
    used = data.draw(
        st.one_of(
            st.integers(min_value=0, max_value=4 * window),
            st.sampled_from([max(0, at - 1), at, at + 1]),
        )
    )
    assert tier_for(used, window, [float(c) for c in caps]) == _oracle(used, window, caps)


# -- the watch -------------------------------------------------------------------------------------------------


def test_tier_notice_once_on_each_upward_crossing_into_mid_high_warning_or_danger() -> None:
    w = TierWatch()
    seen = [w.update(t) for t in ("healthy", "mid", "mid", "high", "high", "warning", "warning", "danger", "danger")]
    assert seen == [None, "mid", None, "high", None, "warning", None, "danger", None]
    # After a compaction the tier falls; a new rise notifies again (it is derived from the current figure only).
    assert w.update("healthy") is None
    assert w.update("mid") == "mid"
    assert w.update("danger") == "danger"
    assert w.update("warning") is None  # falling from danger to warning is not a crossing up
    assert w.update("mid") is None


def test_tier_notice_when_first_measurement_is_already_above_healthy() -> None:
    assert TierWatch().update("danger") == "danger"
    assert TierWatch().update("mid") == "mid"
    assert TierWatch().update("healthy") is None
    assert TierWatch(initial="danger").update("danger") is None


def test_unmeasured_is_no_fall_and_no_rise() -> None:
    w = TierWatch()
    assert w.update("high") == "high"
    assert w.update("unmeasured") is None
    assert w.update("high") is None  # an untrustworthy reading in between is not a fall
    assert w.update("mid") is None and w.update("high") == "high"  # a real fall and rise is


# -- the words ---------------------------------------------------------------------------------------------------


def test_tier_notice_text_says_fill_counts_window_and_next_step() -> None:
    text = notice_text("warning", 142_400, 200_000, 71.2, 183_616, estimated=False)
    assert text.startswith("71.2 % (142,400 of 200,000 tokens) used.")
    assert "183,616" in text and "≈" not in text and "estimated" not in text
    assert "/compact" in notice_text("danger", 160_000, 200_000, 80.0, None, estimated=False)


@pytest.mark.parametrize(
    ("tier", "advice"),
    [
        ("mid", "Finish the current piece of work soon; start new work in a fresh session."),
        ("high", "current thread"),
        ("warning", "fresh session"),
        ("danger", "hand off"),
    ],
)
def test_tier_notice_text_tells_what_to_do(tier: str, advice: str) -> None:
    text = notice_text(tier, 75_000, 100_000, 75.0, 83_616, estimated=False)
    assert advice in text and "75.0 % (75,000 of 100,000 tokens)" in text
    assert "compact the conversation at 83,616" in text


def test_an_estimated_fill_says_so_in_every_number() -> None:
    text = notice_text("mid", 5_200, 10_000, 52.0, 5_000, estimated=True)
    assert text.startswith("≈ 52.0 % (≈ 5,200 of 10,000 tokens, estimated) used.")
    assert fill_text(5_200, 10_000, 52.0, estimated=False) == "52.0 % (5,200 of 10,000 tokens)"
    assert fill_text(5_200, None, None, estimated=True) == "≈ 5,200 tokens of an unknown window (estimated)"


def test_caps_text_names_each_tier_cap() -> None:
    assert caps_text([50.0, 60.0, 70.0, 74.0]) == "mid 50 % · high 60 % · warning 70 % · danger 74 %"
    assert caps_text([40, 55.5, 65, 80]) == "mid 40 % · high 55.5 % · warning 65 % · danger 80 %"


def test_the_boot_cost_is_the_sum_of_the_prefix_parts_and_a_new_part_joins_the_list() -> None:
    """Issue 29 (seed 002): the prefix as a list of parts, so project instructions can join it."""
    from ama_acp.context.tiers import PrefixPart, boot_cost, boot_text

    parts = [PrefixPart("system prompt", 1_200), PrefixPart("ama's tools", 1_500), PrefixPart("MCP github", 0)]
    assert boot_cost(parts) == 2_700
    assert boot_text(parts) == "boot cost ≈ 2,700 tokens (system prompt 1,200 · ama's tools 1,500)"  # 0: not listed
    parts.append(PrefixPart("instructions", 300))
    assert boot_cost(parts) == 3_000 and boot_text(parts).endswith("· instructions 300)")
    text = notice_text("mid", 5_000, 10_000, 50.0, None, estimated=False, caps=[50, 60, 70, 74], boot=parts)
    assert text.endswith(
        "Tiers: mid 50 % · high 60 % · warning 70 % · danger 74 %. Boot cost: ≈ 3,000 tokens (system prompt 1,200 · "
        "ama's tools 1,500 · instructions 300), carried by every request before any message."
    )
    assert "Boot cost" not in notice_text("mid", 5_000, 10_000, 50.0, None, estimated=False, caps=[50, 60, 70, 74])
