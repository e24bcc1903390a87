"""A session's prompt cache, as the stats (`cache` in `_ama/session_stats`), `/context` and pruning see it
(docs/context.md "The prompt cache"; rules C1–C4).

`SessionContext` (accounting.py) owns one and feeds it every billed request; the figures come from the
billing totals (tokens read and written), the ledger (saved cost, last write; context/cache_ledger.py) and
the catalog's cache facts of the session's current model (providers/cache_facts.py). Pruning asks it for the
threshold of the moment (`prune_threshold`): earlier than pruneAt only while the cache is known to be cold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal, Protocol, runtime_checkable

import msgspec

from ama_acp.agent.pruning import early_prune_at, prune_threshold
from ama_acp.config import Price
from ama_acp.context.billing import BilledTotals
from ama_acp.context.cache_ledger import COLD, UNKNOWN, WARM, CacheLedger, CacheLedgerState, CacheState
from ama_acp.conversation.messages import Usage
from ama_acp.providers.cache_facts import CacheFacts
from ama_acp.providers.catalog import ModelInfo


@runtime_checkable
class ModelFacts(Protocol):
    """The runtime's catalog lookup (session/runtime.py); a runtime without it knows no cache facts."""

    def model_info(self, model_id: str) -> ModelInfo | None: ...


class CurrentModel(Protocol):
    @property
    def model_id(self) -> str: ...


class PruneEvent(msgspec.Struct, frozen=True):
    """What the latest pruning decision between the early threshold and pruneAt was, for `/context`."""

    kind: Literal["early", "kept"]
    used: int
    state: CacheState
    model: str


def _duration(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


class SessionCache:
    def __init__(self, runtime: object, session: CurrentModel) -> None:
        self._rt = runtime if isinstance(runtime, ModelFacts) else None
        self._session = session
        self.ledger = CacheLedger()
        self.last_event: PruneEvent | None = None
        self._pending_early: PruneEvent | None = None

    # --- inputs -------------------------------------------------------------------------------------------

    def record(self, model_id: str, usage: Usage | None, price: Price | None, interrupted: bool) -> None:
        self.ledger.record(model_id, usage, price, interrupted)

    def restore(self, stored: object) -> None:
        """A load: the ledger stored with the billing state. A session stored without one (an older ama) keeps
        what it saved and when it was written unknown."""
        if isinstance(stored, Mapping):
            try:
                state = msgspec.convert(stored, CacheLedgerState)
            except (msgspec.ValidationError, TypeError, ValueError, RecursionError):
                state = None  # a damaged ledger is an unknown one, never a session that fails to load
            figures = [state.saved, *state.last_write.values()] if state is not None else []
            if state is not None and all(f is None or math.isfinite(f) for f in figures):
                self.ledger = CacheLedger(state)
                return
        self.ledger = CacheLedger(CacheLedgerState(saved=None, complete=False))

    def state_for_storage(self) -> dict[str, object]:
        state: dict[str, object] = msgspec.to_builtins(self.ledger.state())
        return state

    # --- the facts of now ---------------------------------------------------------------------------------

    def facts(self, model_id: str | None = None) -> CacheFacts | None:
        if self._rt is None:
            return None
        info = self._rt.model_info(model_id or self._session.model_id)
        return info.cache if info is not None else None

    def state(self) -> CacheState:
        model = self._session.model_id
        facts = self.facts(model)
        return self.ledger.state_of(model, facts.ttl_seconds if facts is not None else None)

    # --- pruning (rule C4) --------------------------------------------------------------------------------

    def prune_threshold(self, thresholds: tuple[int | None, int | None], used: int) -> int | None:
        """The fill at which pruning runs now; records the decision when the fill is between the early threshold
        and pruneAt, where the cache decides (`/context` tells it)."""
        auto, prune_at = thresholds
        if auto is None or prune_at is None:
            return None
        state = self.state()
        threshold = prune_threshold(prune_at, auto, state == COLD)
        self._pending_early = None
        if early_prune_at(auto) <= used < prune_at:
            event = PruneEvent("early" if state == COLD else "kept", used, state, self._session.model_id)
            if state == COLD:
                self._pending_early = event  # told once pruning actually changed the context
            else:
                self.last_event = event
        return threshold

    def pruned(self) -> None:
        """Pruning changed the context: if it ran below pruneAt, it was early, because the cache was cold."""
        if self._pending_early is not None:
            self.last_event, self._pending_early = self._pending_early, None

    # --- outputs ------------------------------------------------------------------------------------------

    def stats(self, totals: BilledTotals) -> dict[str, object]:
        """S2 `cache`: unknown figures are left out (U15); `state` always."""
        model = self._session.model_id
        facts = self.facts(model)
        saved = self.ledger.saved
        traffic = totals.cache_read is not None or totals.cache_write is not None
        since = self.ledger.seconds_since_write(model)
        e = self.last_event
        figures: dict[str, object | None] = {
            "lifetimeSeconds": facts.ttl_seconds if facts is not None else None,
            "minTokens": facts.min_tokens if facts is not None else None,
            "readTokens": totals.cache_read,
            "writeTokens": totals.cache_write,
            "cacheHitRate": totals.cache_read_share(),
            "saved": {"amount": round(saved, 6), "currency": "USD"} if saved is not None and traffic else None,
            "secondsSinceLastWrite": int(since) if since is not None else None,
            "lastPruning": {"decision": e.kind, "tokens": e.used, "cache": e.state} if e is not None else None,
        }
        return {"state": self.state()} | {k: v for k, v in figures.items() if v is not None}

    def lines(self, totals: BilledTotals, thresholds: tuple[int | None, int | None]) -> list[str]:
        """/context's cache lines: the figures, the state of the current model's cache, and the pruning rule."""
        state = self.state()
        lines = (
            self._figures_line(totals),
            self._state_line(state),
            _rule_line(state, thresholds),
            _decision_line(self.last_event),
        )
        return [line for line in lines if line is not None]

    def _figures_line(self, totals: BilledTotals) -> str | None:
        """What the cache read, wrote and saved; None when no request reported either."""
        if totals.cache_read is None and totals.cache_write is None:
            return None
        read = f"{totals.cache_read:,}" if totals.cache_read is not None else "no reads reported"
        write = f", {totals.cache_write:,} written" if totals.cache_write is not None else ""
        saved = self.ledger.saved
        worth = (
            f"saved ${saved:.4f} against uncached prices"
            if saved is not None
            else "what it saved is unknown (a request was unpriced, or its usage never came)"
        )
        return f"**Cache:** {read} tokens read{write}; {worth}."

    def _state_line(self, state: CacheState) -> str:
        """The current model's cache: its facts, and why it is warm, cold or unknown."""
        model = self._session.model_id
        facts = self.facts(model)
        ttl = facts.ttl_seconds if facts is not None else None
        minimum = facts.min_tokens if facts is not None else None
        known = (
            f"lifetime {_duration(ttl) if ttl is not None else 'unknown'}, "
            f"minimum {f'{minimum:,} tokens' if minimum is not None else 'unknown'}"
        )
        return f"Cache of {model} ({known}): {_why(state, self.ledger.seconds_since_write(model), ttl)}."


def _why(state: CacheState, since: float | None, ttl: int | None) -> str:
    """Why the cache is in `state`, given the seconds since its last write and its lifetime (None: unknown)."""
    if state == WARM and since is not None:
        return f"warm: last written {_duration(since)} ago"
    if state == COLD and since is not None:
        return f"cold: idle {_duration(since)}, past its lifetime"
    if state == COLD:
        return "cold: this conversation has not been sent to this model yet"
    if ttl is None:
        return "warm or cold unknown: the lifetime of this model's cache is unknown"
    return "warm or cold unknown: the last write is unknown (a request's usage never came, or an older session file)"


def _rule_line(state: CacheState, thresholds: tuple[int | None, int | None]) -> str | None:
    """When pruning runs, as the cache decides it; None without thresholds or without room for an early prune."""
    auto, prune_at = thresholds
    if auto is None or prune_at is None:
        return None
    early = early_prune_at(auto)
    if early >= prune_at:
        return None
    if state == COLD:
        return f"The cached prefix is lost anyway, so pruning runs early, from {early:,} tokens (pruneAt {prune_at:,})."
    return (
        f"Pruning waits for pruneAt ({prune_at:,} tokens); it runs early, from {early:,}, only when the "
        "cache is known to be cold."
    )


def _decision_line(e: PruneEvent | None) -> str | None:
    """The latest pruning decision between the early threshold and pruneAt, if there was one."""
    if e is None:
        return None
    if e.kind == "early":
        return f"Last pruning decision: pruned early at {e.used:,} tokens — the cache was cold."
    reason = "warm" if e.state == WARM else "not known to be cold"
    return f"Last pruning decision: kept the context at {e.used:,} tokens, under pruneAt — the cache was {reason}."


__all__ = ["COLD", "UNKNOWN", "WARM", "PruneEvent", "SessionCache"]
