"""The prompt cache of one session: what it saved, and whether the cached prefix is warm or cold
(docs/context.md "The prompt cache"; rules C1–C4 in docs/rules.md).

Tokens read and written are the billed totals' (context/billing.py); this adds what they do not hold:

- **saved**: what the cache saved against uncached prices, summed over the billed requests, each at the price of
  the model that served it: `cache_read × (input − cache_read rate) + cache_write × (input − cache_write rate)`
  (a write premium makes it negative). Unknown (None) for good once a request cannot be valued: no price, a
  cache rate that is unknown while the request used it, or no usage at all (unreported, cancelled, cut off) —
  a partial sum is never presented as the total (C2).
- **the last write** per model, as wall-clock time (it is stored with the session, and a loaded session may be
  opened days later): every request the provider answered with usage wrote or refreshed the cached prefix
  (an automatic cache stores each prompt; Anthropic refreshes an entry each time it is read). A request whose
  usage never came makes that model's last write unknown (C3).
- **warm / cold**: cold when this session never had a request answered by the model (nothing of this
  conversation is cached there), or when the last write is older than the model's cache lifetime; warm within
  it; unknown when the lifetime or the last write is (C3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import msgspec

from ama_acp.config import Price
from ama_acp.context.billing import billable
from ama_acp.conversation.messages import Usage

_PER = 1_000_000

CacheState = Literal["warm", "cold", "unknown"]
WARM: CacheState = "warm"
COLD: CacheState = "cold"
UNKNOWN: CacheState = "unknown"


def wall_clock() -> float:
    """Seconds since the epoch (a module function, so a test can move time without waiting)."""
    return time.time()


class CacheLedgerState(msgspec.Struct, frozen=True, omit_defaults=True):
    """Stored with the billing state, so a loaded session keeps what the cache saved and when it was written."""

    saved: float | None = 0.0
    last_write: dict[str, float | None] = {}  # model id → epoch seconds; None: unknown
    complete: bool = True  # whether the ledger saw every billed request of the session (not an older file)


def savings(usage: Usage | None, price: Price | None) -> float | None:
    """USD one request saved thanks to the cache, against its uncached input price; None when it cannot be told."""
    if not billable(usage):
        return None
    assert usage is not None
    read, write = usage.cache_read or 0, usage.cache_write or 0
    if read == 0 and write == 0:
        return 0.0
    if price is None:
        return None
    return _saved(read, write, price)


def _saved(read: int, write: int, price: Price) -> float | None:
    """USD the cache reads and writes saved against the input rate; None when a rate for tokens used is unknown."""
    total = 0.0
    for tokens, rate in ((read, price.cache_read), (write, price.cache_write)):
        if tokens:
            if rate is None:
                return None
            total += tokens * (price.input - rate)
    return total / _PER


class CacheLedger:
    def __init__(self, state: CacheLedgerState | None = None, clock: Callable[[], float] | None = None) -> None:
        state = state or CacheLedgerState()
        self._saved = state.saved
        self._last_write = dict(state.last_write)
        self._complete = state.complete
        self._clock = clock

    def _now(self) -> float:
        return self._clock() if self._clock is not None else wall_clock()

    def record(self, model: str, usage: Usage | None, price: Price | None, interrupted: bool = False) -> None:
        """One billed request of `model` (the model that served it)."""
        if interrupted or not billable(usage):
            # The provider may have written the prefix, or not: neither the saving nor the write time is known.
            self._saved = None
            self._last_write[model] = None
            return
        saved = savings(usage, price)
        self._saved = None if saved is None or self._saved is None else self._saved + saved
        self._last_write[model] = self._now()

    @property
    def saved(self) -> float | None:
        return self._saved

    def seconds_since_write(self, model: str) -> float | None:
        """Seconds since `model` last wrote this session's prefix; None when unknown or never."""
        at = self._last_write.get(model)
        if at is None:
            return None
        elapsed = self._now() - at
        return elapsed if elapsed >= 0 else None  # the clock went back: unknown

    def state_of(self, model: str, ttl_seconds: int | None) -> CacheState:
        if model not in self._last_write:
            return COLD if self._complete else UNKNOWN
        elapsed = self.seconds_since_write(model)
        if elapsed is None or ttl_seconds is None:
            return UNKNOWN
        return COLD if elapsed > ttl_seconds else WARM

    def state(self) -> CacheLedgerState:
        return CacheLedgerState(saved=self._saved, last_write=dict(self._last_write), complete=self._complete)
