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
        out: dict[str, object] = {"state": self.state()}
        if facts is not None and facts.ttl_seconds is not None:
            out["lifetimeSeconds"] = facts.ttl_seconds
        if facts is not None and facts.min_tokens is not None:
            out["minTokens"] = facts.min_tokens
        if totals.cache_read is not None:
            out["readTokens"] = totals.cache_read
        if totals.cache_write is not None:
            out["writeTokens"] = totals.cache_write
        rate = totals.cache_read_share()
        if rate is not None:
            out["cacheHitRate"] = rate
        saved = self.ledger.saved
        if saved is not None and (totals.cache_read is not None or totals.cache_write is not None):
            out["saved"] = {"amount": round(saved, 6), "currency": "USD"}
        since = self.ledger.seconds_since_write(model)
        if since is not None:
            out["secondsSinceLastWrite"] = int(since)
        if self.last_event is not None:
            e = self.last_event
            out["lastPruning"] = {"decision": e.kind, "tokens": e.used, "cache": e.state}
        return out

    def lines(self, totals: BilledTotals, thresholds: tuple[int | None, int | None]) -> list[str]:
        """/context's cache lines: the figures, the state of the current model's cache, and the pruning rule."""
        model = self._session.model_id
        facts = self.facts(model)
        out: list[str] = []
        if totals.cache_read is not None or totals.cache_write is not None:
            read = f"{totals.cache_read:,}" if totals.cache_read is not None else "no reads reported"
            write = f", {totals.cache_write:,} written" if totals.cache_write is not None else ""
            saved = self.ledger.saved
            worth = (
                f"saved ${saved:.4f} against uncached prices"
                if saved is not None
                else "what it saved is unknown (a request was unpriced, or its usage never came)"
            )
            out.append(f"**Cache:** {read} tokens read{write}; {worth}.")
        ttl = facts.ttl_seconds if facts is not None else None
        minimum = facts.min_tokens if facts is not None else None
        known = (
            f"lifetime {_duration(ttl) if ttl is not None else 'unknown'}, "
            f"minimum {f'{minimum:,} tokens' if minimum is not None else 'unknown'}"
        )
        state = self.state()
        since = self.ledger.seconds_since_write(model)
        if state == WARM and since is not None:
            why = f"warm: last written {_duration(since)} ago"
        elif state == COLD and since is not None:
            why = f"cold: idle {_duration(since)}, past its lifetime"
        elif state == COLD:
            why = "cold: this conversation has not been sent to this model yet"
        elif ttl is None:
            why = "warm or cold unknown: the lifetime of this model's cache is unknown"
        else:
            why = "warm or cold unknown: the last write is unknown (a request's usage never came, or an older session file)"
        out.append(f"Cache of {model} ({known}): {why}.")
        auto, prune_at = thresholds
        if auto is not None and prune_at is not None:
            early = early_prune_at(auto)
            if state == COLD and early < prune_at:
                out.append(
                    f"The cached prefix is lost anyway, so pruning runs early, from {early:,} tokens (pruneAt "
                    f"{prune_at:,})."
                )
            elif early < prune_at:
                out.append(
                    f"Pruning waits for pruneAt ({prune_at:,} tokens); it runs early, from {early:,}, only when the "
                    "cache is known to be cold."
                )
        e = self.last_event
        if e is not None:
            if e.kind == "early":
                out.append(f"Last pruning decision: pruned early at {e.used:,} tokens — the cache was cold.")
            else:
                reason = "warm" if e.state == WARM else "not known to be cold"
                out.append(
                    f"Last pruning decision: kept the context at {e.used:,} tokens, under pruneAt — the cache was "
                    f"{reason}."
                )
        return out


__all__ = ["COLD", "UNKNOWN", "WARM", "PruneEvent", "SessionCache"]
