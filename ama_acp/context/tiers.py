"""Load tiers (docs/context.md "Load tiers"): the fill mapped to healthy / mid / high / warning / danger / unmeasured.

A tier is derived from the current figure only, so it falls again after a compaction and never rises on momentum.
It is computed exactly, from `used` and the window in integers (`used × 100 ≥ cap × window`), never from the
percent rounded for display: 4,999 of 10,000 tokens reads 50.0 % but is still `healthy`. `TierWatch` reports each
upward crossing into mid, high, warning or danger once, for the notice that tells the person what to do
(`notice_text`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import msgspec

HEALTHY = "healthy"
MID = "mid"
HIGH = "high"
WARNING = "warning"
DANGER = "danger"
UNMEASURED = "unmeasured"

TIERS = (HEALTHY, MID, HIGH, WARNING, DANGER)  # in rising order
DEFAULT_CAPS = (50.0, 60.0, 70.0, 74.0)
NOTIFIED = (MID, HIGH, WARNING, DANGER)  # the tiers whose rise the person is told about
_RANK = {name: i for i, name in enumerate(TIERS)}
_RANK[UNMEASURED] = -1  # below every measured tier: a first measurement in danger is a crossing


def rank(tier: str) -> int:
    """The order of tiers, `unmeasured` (or anything unknown) below `healthy`."""
    return _RANK.get(tier, -1)


@lru_cache(maxsize=16)
def _exact_caps(caps: tuple[float, ...]) -> tuple[tuple[int, int] | float, ...]:
    """Each cap as the exact number the person wrote, a numerator and a denominator: TOML's `55.3` is the float
    nearest 55.3, whose shortest repr is `55.3` again, so the decimal is read back from it (the float itself is
    55.29999…, and comparing with it would put a fill of exactly 55.3 % below the cap). A cap that is not finite
    stays a float: it is compared as such (inf is never reached, -inf always, nan never)."""
    return tuple(decimal_ratio(repr(float(c))) if math.isfinite(c) else float(c) for c in caps)


def decimal_ratio(text: str) -> tuple[int, int]:
    """A finite float's repr (`55.3`, `-0.5`, `1e-05`, `1.5e+20`) as the exact decimal it shows, numerator and
    denominator: what `fractions.Fraction(text)` gives, without importing fractions (and decimal, numbers with it)
    on the first readout's path."""
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    numerator, denominator = int(whole + fraction), 10 ** len(fraction)
    power = int(exponent) if exponent else 0
    return (numerator * 10**power, denominator) if power >= 0 else (numerator, denominator * 10**-power)


def _reached(used: int, window: int, cap: tuple[int, int] | float) -> bool:
    """`used / window × 100 ≥ cap`, exactly: in integers, with the cap's numerator and denominator."""
    if isinstance(cap, float):  # not finite (see _exact_caps)
        return cap < 0
    numerator, denominator = cap
    return used * 100 * denominator >= numerator * window


def tier_for(used: int | None, window: int | None, caps: Sequence[float] = DEFAULT_CAPS) -> str:
    """The tier of `used` tokens in a window of `window` tokens; `unmeasured` when either is unknown (never
    reported as healthy). Exact: no rounding anywhere, so the tier changes at the very token where the fill
    reaches a cap. A figure above the window (a lower bound, U11) is compared as it is, not capped at 100 %."""
    if used is None or window is None or window <= 0:
        return UNMEASURED
    mid, high, warning, danger = _exact_caps(tuple(caps))
    if _reached(used, window, danger):
        return DANGER
    if _reached(used, window, warning):
        return WARNING
    if _reached(used, window, high):
        return HIGH
    if _reached(used, window, mid):
        return MID
    return HEALTHY


class TierWatch:
    """Remembers the last measured tier of one session and reports upward crossings into mid, high, warning
    or danger: each rise once; staying does not repeat it, and a fall (after a compaction) followed by a new
    rise reports again. `unmeasured` is no measurement: it leaves the memory alone, so an untrustworthy reading
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
    MID: "Finish the current piece of work soon; start new work in a fresh session.",
    HIGH: "Finish the current thread of work, then wrap up.",
    WARNING: "Wrap up now, and start new work in a fresh session.",
    DANGER: "Stop and hand off: ask for a summary of where things stand, or run /compact.",
}


def fill_text(used: int, window: int | None, percent: float | None, estimated: bool) -> str:
    """The fill for a person: `50.0 % (5,000 of 10,000 tokens)`; an estimate says so, in every number:
    `≈ 52.0 % (≈ 5,200 of 10,000 tokens, estimated)`."""
    approx = "≈ " if estimated else ""
    note = ", estimated" if estimated else ""
    if window is None:
        return f"{approx}{used:,} tokens of an unknown window{' (estimated)' if estimated else ''}"
    pct = f"{approx}{percent:.1f} % " if percent is not None else ""
    return f"{pct}({approx}{used:,} of {window:,} tokens{note})"


STALE = "stale"  # the readout's tier kind while the figure is an estimate since a model switch or a compaction


class Readout(msgspec.Struct, frozen=True):
    """What every readout carries beside the figure and the caps (seed 002's strain: `usage_update._meta.ama`, the
    tier notices, `/context`): the boot cost, the number of the session's last compaction, and whether the tier
    is `stale` — worked out from an estimate since a model switch or a compaction, before any response measured
    the context again."""

    boot_tokens: int
    compaction: int = 0  # the number of the last compaction (0: none yet)
    stale_after: str | None = None  # "a model switch" or "compaction #N": the tier is stale since then

    def meta(self) -> dict[str, object]:
        """`_meta.ama`'s part: `bootTokens` always, `compaction` after one, `tierKind: "stale"` while stale."""
        out: dict[str, object] = {"bootTokens": self.boot_tokens}
        if self.compaction > 0:
            out["compaction"] = self.compaction
        if self.stale_after is not None:
            out["tierKind"] = STALE
        return out

    def tier_words(self, tier: str) -> str:
        """`high`, or `high (stale)` while the tier rests on an estimate since a switch or a compaction."""
        return f"{tier} ({STALE})" if self.stale_after is not None else tier

    def words(self) -> str:
        """For a person, after the fill: why the tier is stale, and the compaction count ('' when neither)."""
        stale = (
            f"The tier is stale: estimated since {self.stale_after}; the next response measures it again."
            if self.stale_after is not None
            else ""
        )
        count = f"Compaction #{self.compaction} was the last one of this session." if self.compaction > 0 else ""
        return " ".join(part for part in (stale, count) if part)


def notice_text(
    tier: str,
    used: int,
    window: int | None,
    percent: float | None,
    auto_compact_at: int | None,
    estimated: bool,
    *,
    caps: Sequence[float] | None = None,
    boot: Sequence[PrefixPart] = (),
    readout: Readout | None = None,
) -> str:
    """The words of a tier notice: the fill (with the counts; `≈` and "estimated" when the figure is ama's
    estimate), what the person should do, what ama will do, then the caps in force (`caps`), the boot cost
    (`boot`: the prefix's parts, see `boot_text`) and the readout's stale tier and compaction count."""
    if auto_compact_at is not None:
        nxt = f"ama will compact the conversation at {auto_compact_at:,} tokens."
    else:
        nxt = "Automatic compaction is off; run /compact to make room."
    advice = _ADVICE.get(tier, "")
    tiers = f"Tiers: {caps_text(caps)}." if caps is not None else ""
    cost = f"Boot cost: {_boot_figure(boot)}, carried by every request before any message." if boot else ""
    extra = readout.words() if readout is not None else ""
    parts = (f"{fill_text(used, window, percent, estimated)} used.", advice, nxt, tiers, cost, extra)
    return " ".join(part for part in parts if part)


def caps_text(caps: Sequence[float]) -> str:
    """The caps for a person (/context): `mid 50 % · high 60 % · warning 70 % · danger 74 %`."""
    return " · ".join(f"{name} {cap:g} %" for name, cap in zip(TIERS[1:], caps, strict=True))


def caps_meta(caps: Sequence[float]) -> dict[str, float | int]:
    """The caps for a program (`_meta.ama.tierCaps`): `{"mid": 50, "high": 60, "warning": 70, "danger": 74}` —
    a whole cap as an integer, as the person wrote it; a cap that is not finite is left out (JSON has no inf)."""
    out: dict[str, float | int] = {}
    for name, cap in zip(TIERS[1:], caps, strict=True):
        value = float(cap)
        if math.isfinite(value):
            out[name] = int(value) if value.is_integer() and abs(value) < 2**53 else value
    return out


# --- the boot cost: what every request carries before the first message ------------------------------------


class PrefixPart(msgspec.Struct, frozen=True):
    """One part of the prefix every request carries (the system prompt, ama's tool declarations, one MCP
    server's declarations; project instructions when they join): its name for a person and its estimated
    tokens. The boot cost is their sum, so a new part only has to join the list."""

    name: str
    tokens: int


def boot_cost(parts: Sequence[PrefixPart]) -> int:
    """The tokens every request pays before the conversation's first message (estimated, as the meter counts)."""
    return sum(max(0, p.tokens) for p in parts)


def boot_text(parts: Sequence[PrefixPart]) -> str:
    """`boot cost ≈ 3,210 tokens (system prompt 1,200 · ama's tools 1,500 · MCP github 510)` (/context's
    headline): an estimate, hence the `≈`; parts of 0 tokens are left out of the list."""
    return f"boot cost {_boot_figure(parts)}"


def _boot_figure(parts: Sequence[PrefixPart]) -> str:
    shown = " · ".join(f"{p.name} {p.tokens:,}" for p in parts if p.tokens > 0)
    return f"≈ {boot_cost(parts):,} tokens" + (f" ({shown})" if shown else "")
