"""The prompt cache's ledger (context/cache_ledger.py) and the cache-aware pruning threshold (agent/pruning.py):
what the cache saved, never invented; warm, cold or unknown; pruning early only when known cold (C1–C4)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.agent.pruning import early_prune_at, prune_threshold
from ama_acp.config import Price
from ama_acp.context.cache_ledger import COLD, UNKNOWN, WARM, CacheLedger, CacheLedgerState, savings
from ama_acp.conversation.messages import Usage

SONNET = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_savings_against_uncached_prices() -> None:
    # 10,000 read at 0.3 instead of 3 saves 0.027; 1,000 written at 3.75 instead of 3 costs 0.00075 more.
    usage = Usage(input=500, output=20, cache_read=10_000, cache_write=1_000)
    assert savings(usage, SONNET) == pytest.approx((10_000 * 2.7 - 1_000 * 0.75) / 1e6)
    assert savings(Usage(input=500, output=20, cache_read=0, cache_write=0), None) == 0.0  # nothing cached
    assert savings(Usage(input=500, output=20, cache_read=10), None) is None  # no price: unknown
    assert savings(Usage(input=500, output=20, cache_write=10), Price(input=1.0, output=1.0, cache_read=0.1)) is None
    assert savings(None, SONNET) is None
    assert savings(Usage(input=-1, output=2, cache_read=3), SONNET) is None


def test_saved_becomes_unknown_for_good_after_a_request_whose_usage_never_came() -> None:
    ledger = CacheLedger(clock=Clock())
    ledger.record("a/m", Usage(input=10, output=1, cache_read=1_000), SONNET)
    assert ledger.saved == pytest.approx(1_000 * 2.7 / 1e6)
    ledger.record("a/m", None, SONNET, interrupted=True)
    assert ledger.saved is None
    ledger.record("a/m", Usage(input=10, output=1, cache_read=1_000), SONNET)
    assert ledger.saved is None  # a partial sum is never the total


def test_warm_then_cold_past_the_lifetime_and_unknown_without_one() -> None:
    clock = Clock()
    ledger = CacheLedger(clock=clock)
    assert ledger.state_of("a/m", 300) == COLD  # nothing of this session was ever sent to it
    assert ledger.seconds_since_write("a/m") is None
    ledger.record("a/m", Usage(input=10, output=1), SONNET)
    clock.now += 299
    assert ledger.state_of("a/m", 300) == WARM
    assert ledger.seconds_since_write("a/m") == 299
    clock.now += 2
    assert ledger.state_of("a/m", 300) == COLD
    assert ledger.state_of("a/m", None) == UNKNOWN  # lifetime unknown: never called cold
    clock.now -= 1_000  # the clock went back: the elapsed time is unknown
    assert ledger.state_of("a/m", 300) == UNKNOWN


def test_each_model_has_its_own_cache_and_an_interrupted_request_makes_its_write_unknown() -> None:
    clock = Clock()
    ledger = CacheLedger(clock=clock)
    ledger.record("a/m", Usage(input=10, output=1), SONNET)
    assert ledger.state_of("b/n", 300) == COLD  # a switch to another model: its cache holds nothing of ours
    ledger.record("a/m", None, SONNET, interrupted=True)
    assert ledger.state_of("a/m", 300) == UNKNOWN
    assert ledger.seconds_since_write("a/m") is None


def test_the_state_survives_storage_and_an_older_file_is_unknown() -> None:
    clock = Clock()
    ledger = CacheLedger(clock=clock)
    ledger.record("a/m", Usage(input=10, output=1, cache_read=100), SONNET)
    stored = msgspec.json.decode(msgspec.json.encode(ledger.state()), type=CacheLedgerState)
    again = CacheLedger(stored, clock=clock)
    clock.now += 10
    assert again.saved == ledger.saved and again.seconds_since_write("a/m") == 10
    older = CacheLedger(CacheLedgerState(saved=None, complete=False), clock=clock)
    assert older.state_of("a/m", 300) == UNKNOWN  # not cold: the file does not say


def test_pruning_runs_early_only_when_the_cache_is_known_cold() -> None:
    assert early_prune_at(10_000) == 5_000
    assert prune_threshold(7_000, 10_000, cold=True) == 5_000
    assert prune_threshold(7_000, 10_000, cold=False) == 7_000


@given(auto=st.integers(min_value=1, max_value=10**8), cold=st.booleans())
def test_the_threshold_is_never_above_prune_at(auto: int, cold: bool) -> None:
    prune_at = auto * 7 // 10
    threshold = prune_threshold(prune_at, auto, cold)
    assert threshold <= prune_at
    assert (threshold < prune_at) <= cold  # earlier only when cold


class _Session:
    model_id = "a/m"


@given(
    stored=st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=5),
        st.dictionaries(
            st.sampled_from(["saved", "last_write", "complete", "other"]),
            st.one_of(
                st.none(),
                st.floats(allow_nan=True, allow_infinity=True),
                st.booleans(),
                st.text(max_size=3),
                st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.floats(), st.text(max_size=2))),
            ),
        ),
    )
)
def test_a_stored_ledger_is_restored_or_unknown_never_an_exception_or_a_non_finite_figure(stored: object) -> None:
    """The session file is hostile input: whatever it holds where the ledger was, a load restores a ledger of
    finite figures or an unknown one (saved unknown, not complete)."""
    import math

    from ama_acp.session.accounting.prompt_cache import SessionCache

    cache = SessionCache(object(), _Session())
    cache.restore(stored)
    state = cache.ledger.state()
    assert state.saved is None or math.isfinite(state.saved)
    assert all(v is None or math.isfinite(v) for v in state.last_write.values())
    assert cache.state() in (COLD, WARM, UNKNOWN)
