"""Load tiers: docs/context.md "Load tiers"."""

from __future__ import annotations

import pytest

from ama_acp.context.tiers import TierWatch, caps_text, notice_text, tier_for


@pytest.mark.parametrize(
    ("percent", "tier"),
    [
        (0.0, "healthy"),
        (49.9, "healthy"),
        (50.0, "mid"),
        (59.9, "mid"),
        (60.0, "high"),
        (69.9, "high"),
        (70.0, "warning"),
        (73.9, "warning"),
        (74.0, "danger"),
        (100.0, "danger"),
        (None, "unmeasured"),
    ],
)
def test_tiers_default_caps(percent: float | None, tier: str) -> None:
    assert tier_for(percent) == tier


def test_tiers_configurable_caps() -> None:
    caps = [40, 55, 65, 80]
    assert [tier_for(p, caps) for p in (39, 40, 55, 65, 79.9, 80)] == [
        "healthy",
        "mid",
        "high",
        "warning",
        "warning",
        "danger",
    ]


def test_tiers_unmeasured_is_never_healthy() -> None:
    assert tier_for(None) != "healthy"


def test_tier_notice_only_on_upward_crossing_into_high_warning_or_danger() -> None:
    w = TierWatch()
    seen = [w.update(t) for t in ("healthy", "mid", "high", "high", "warning", "warning", "danger", "danger")]
    assert seen == [None, None, "high", None, "warning", None, "danger", None]
    # After a compaction the tier falls; a new rise notifies again (it is derived from the current figure only).
    assert w.update("healthy") is None
    assert w.update("danger") == "danger"
    assert w.update("warning") is None  # falling from danger to warning is not a crossing up


def test_tier_notice_when_first_measurement_is_already_high() -> None:
    assert TierWatch().update("danger") == "danger"
    assert TierWatch(initial="danger").update("danger") is None


def test_unmeasured_is_no_fall_and_no_rise() -> None:
    w = TierWatch()
    assert w.update("high") == "high"
    assert w.update("unmeasured") is None
    assert w.update("high") is None  # an untrustworthy reading in between is not a fall
    assert w.update("mid") is None and w.update("high") == "high"  # a real fall and rise is


def test_tier_notice_text_says_fill_window_and_next_step() -> None:
    text = notice_text("warning", 71.2, 200_000, 183_616)
    assert "71.2 %" in text and "200,000" in text and "183,616" in text
    assert "/compact" in notice_text("danger", 80.0, 200_000, None)


@pytest.mark.parametrize(
    ("tier", "advice"),
    [("high", "current thread"), ("warning", "fresh session"), ("danger", "hand off")],
)
def test_tier_notice_text_tells_what_to_do(tier: str, advice: str) -> None:
    text = notice_text(tier, 75.0, 100_000, 83_616)
    assert advice in text and "75.0 % of 100,000 tokens" in text and "compact the conversation at 83,616" in text


def test_caps_text_names_each_tier_cap() -> None:
    assert caps_text([50.0, 60.0, 70.0, 74.0]) == "mid 50 % · high 60 % · warning 70 % · danger 74 %"
    assert caps_text([40, 55.5, 65, 80]) == "mid 40 % · high 55.5 % · warning 65 % · danger 80 %"
