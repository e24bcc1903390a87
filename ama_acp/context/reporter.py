"""The one gate every `usage_update` of a session passes through (docs/rules.md E1–E5, D1–D3, P1–P3).

Emission points (end of an assistant message, end of a turn, model change, session open, compaction) call
`update`; this module decides whether anything is sent. It builds plain dicts in the exact wire shape and
imports nothing from the protocol layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ama_acp.context.meter import ContextFigures
from ama_acp.context.tiers import caps_meta

COST_DECIMALS = 6  # a millionth of a dollar: enough for any display, coarse enough that float noise can't defeat D1


def usage_payload(
    figures: ContextFigures, cost: float | None, caps: Sequence[float] | None = None, bound: float | None = None
) -> dict[str, Any] | None:
    """The `usage_update` session update for these figures, or None when the window is unknown (D3). `caps`: the
    tier caps in force, carried as `_meta.ama.tierCaps` so a client reads the tier's bounds beside the tier (they
    change only with the configuration, so they never make an update of their own: D1 compares whole payloads).
    `cost` None: unknown, sent as `"cost": null` (P1) with `bound`, what is known to have been spent, as
    `_meta.ama.costLowerBound`."""
    if figures.window is None:
        return None
    ama: dict[str, Any] = {"source": figures.source}
    # U15: unknown figures are left out, never written as null or 0.
    for key, value in (
        ("usageTokens", figures.usage_tokens),
        ("trailingTokens", figures.trailing_tokens),
        ("percent", figures.percent),
        ("autoCompactAt", figures.auto_compact_at),
        ("pruneAt", figures.prune_at),
        ("tier", figures.tier),
    ):
        if value is not None:
            ama[key] = value
    if figures.over_window:
        # U11/U12: `used` is above `size` and `percent` is capped at 100: the figure is a lower bound.
        ama["overWindow"] = True
    if caps is not None:
        ama["tierCaps"] = caps_meta(caps)
    if cost is None and bound is not None:
        ama["costLowerBound"] = _usd(bound)
    payload: dict[str, Any] = {
        "sessionUpdate": "usage_update",
        "used": max(0, int(figures.used)),
        "size": int(figures.window),
    }
    # P1: an unknown cost is said (null), not left out: a client reads an absent field as "unchanged" and would
    # keep showing the last known figure (agent-shell, Zed), or $0.00 in a resumed session.
    payload["cost"] = _usd(cost) if cost is not None else None
    payload["_meta"] = {"ama": ama}
    return payload


def _usd(amount: float) -> dict[str, Any]:
    return {"amount": round(max(0.0, amount), COST_DECIMALS), "currency": "USD"}


class UsageReporter:
    """One per session and connection: remembers the last payload sent and suppresses identical ones (D1)."""

    def __init__(self, caps: Sequence[float] | None = None) -> None:
        self._last: bytes | None = None  # the encoded payload: immune to callers mutating what they were given
        self._caps = tuple(caps) if caps is not None else None  # the session's tier caps (config: fixed)

    def payload(self, figures: ContextFigures, cost: float | None, bound: float | None = None) -> dict[str, Any] | None:
        return usage_payload(figures, cost, self._caps, bound)

    def offer(self, payload: dict[str, Any] | None, force: bool = False) -> dict[str, Any] | None:
        """The payload to send now, or None: unknown window (D3), or identical to the last sent (D1).

        `force=True` for a session open (D2): the client's view of the session starts afresh.
        """
        if payload is None:
            # D3: nothing is sent while the window is unknown, and the client's meter is void meanwhile (a switch to
            # a model without a window): the next figure is news, even if it reads as the last one sent.
            self._last = None
            return None
        encoded = msgspec.json.encode(payload, order="sorted")  # key order must not matter
        if not force and encoded == self._last:
            return None
        self._last = encoded
        return payload

    def update(
        self, figures: ContextFigures, cost: float | None, force: bool = False, bound: float | None = None
    ) -> dict[str, Any] | None:
        """`offer(payload(figures, cost, bound), force)`: what an emission point calls."""
        return self.offer(self.payload(figures, cost, bound), force)
