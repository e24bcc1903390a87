"""Load tiers (docs/context.md "Load tiers"): the fill mapped to healthy / mid / high / warning / danger / unmeasured.

A tier is derived from the current figure only, so it falls again after a compaction and never rises on momentum.
`TierWatch` reports an upward crossing into warning or danger once, for the one-time notice.
"""

from __future__ import annotations

from collections.abc import Sequence

HEALTHY = "healthy"
MID = "mid"
HIGH = "high"
WARNING = "warning"
DANGER = "danger"
UNMEASURED = "unmeasured"

TIERS = (HEALTHY, MID, HIGH, WARNING, DANGER)  # in rising order
DEFAULT_CAPS = (50.0, 60.0, 70.0, 74.0)
_RANK = {name: i for i, name in enumerate(TIERS)}
_RANK[UNMEASURED] = -1  # below every measured tier: a first measurement in danger is a crossing


def tier_for(percent: float | None, caps: Sequence[float] = DEFAULT_CAPS) -> str:
    """The tier of a fill percentage; `unmeasured` when there is no figure (never reported as healthy)."""
    if percent is None:
        return UNMEASURED
    mid, high, warning, danger = caps
    if percent >= danger:
        return DANGER
    if percent >= warning:
        return WARNING
    if percent >= high:
        return HIGH
    if percent >= mid:
        return MID
    return HEALTHY


class TierWatch:
    """Remembers the last tier of one session and reports upward crossings into warning or danger."""

    def __init__(self, initial: str = UNMEASURED) -> None:
        self.tier = initial

    def update(self, tier: str) -> str | None:
        """Record `tier`; return it when this is a rise into warning or danger (send the notice), else None."""
        before, self.tier = self.tier, tier
        if tier in (WARNING, DANGER) and _RANK[tier] > _RANK.get(before, -1):
            return tier
        return None


def notice_text(tier: str, percent: float | None, window: int | None, auto_compact_at: int | None) -> str:
    """The words of the one-time notice: the fill, the window, and what happens next."""
    fill = f"{percent:.1f} %" if percent is not None else "unknown"
    size = f"{window:,} tokens" if window else "an unknown window"
    if auto_compact_at is not None:
        nxt = f"ama will compact the conversation at {auto_compact_at:,} tokens."
    else:
        nxt = "automatic compaction is off; run /compact to make room."
    return f"Context {tier}: {fill} of {size} used. {nxt}"
