"""Load tiers (docs/context.md "Load tiers"): the fill mapped to healthy / mid / high / warning / danger / unmeasured.

A tier is derived from the current figure only, so it falls again after a compaction and never rises on momentum.
`TierWatch` reports each upward crossing into high, warning or danger once, for the notice that tells the person
what to do (`notice_text`).
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
NOTIFIED = (HIGH, WARNING, DANGER)  # the tiers whose rise the person is told about
_RANK = {name: i for i, name in enumerate(TIERS)}
_RANK[UNMEASURED] = -1  # below every measured tier: a first measurement in danger is a crossing


def rank(tier: str) -> int:
    """The order of tiers, `unmeasured` (or anything unknown) below `healthy`."""
    return _RANK.get(tier, -1)


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
    """Remembers the last measured tier of one session and reports upward crossings into high, warning or
    danger: each rise once; staying does not repeat it, and a fall (after a compaction) followed by a new rise
    reports again. `unmeasured` is no measurement: it leaves the memory alone, so an untrustworthy reading
    between two readings in `high` does not make the second one a new rise."""

    def __init__(self, initial: str = UNMEASURED) -> None:
        self.tier = initial

    def update(self, tier: str) -> str | None:
        """Record `tier`; return it when this is a rise into a notified tier (send the notice), else None."""
        if tier == UNMEASURED:
            return None
        before, self.tier = self.tier, tier
        if tier in NOTIFIED and rank(tier) > rank(before):
            return tier
        return None


_ADVICE = {
    HIGH: "Finish the current thread of work, then wrap up.",
    WARNING: "Wrap up now, and start new work in a fresh session.",
    DANGER: "Stop and hand off: ask for a summary of where things stand, or run /compact.",
}


def notice_text(tier: str, percent: float | None, window: int | None, auto_compact_at: int | None) -> str:
    """The words of a tier notice: the fill, the window, what the person should do, and what ama will do."""
    fill = f"{percent:.1f} %" if percent is not None else "unknown"
    size = f"{window:,} tokens" if window else "an unknown window"
    if auto_compact_at is not None:
        nxt = f"ama will compact the conversation at {auto_compact_at:,} tokens."
    else:
        nxt = "Automatic compaction is off; run /compact to make room."
    advice = _ADVICE.get(tier, "")
    return " ".join(part for part in (f"{fill} of {size} used.", advice, nxt) if part)


def caps_text(caps: Sequence[float]) -> str:
    """The caps for a person (/context): `mid 50 % · high 60 % · warning 70 % · danger 74 %`."""
    return " · ".join(f"{name} {cap:g} %" for name, cap in zip(TIERS[1:], caps, strict=True))
