"""`ama stats [SESSION_ID] [--json]`: a stored session's figures, read from its file without a model.

A session file stores, with every billed request, the cost tracker's and the context meter's state after it
(session/store/entries.py `UsageEntry`); a load resumes from them (session/conversation.py). This command reads
the same states the same way — the last good one stands, a damaged one is skipped (never a made-up 0), a
compaction voids the meter's, a rewind keeps the money spent but not the figure measured on the removed turns
(session/store/rewound_thread.py) — and prints the stats object's stored part (`_ama/session_stats`, docs/context.md
"The stats"): what was billed, the cost, the cache's share, and the context as the last request measured it. The
window and percent come from the model catalog (no request is sent); what is not stored is left out (U15).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import msgspec

from ama_acp.context.billing import BillingState
from ama_acp.context.meter import MeterState
from ama_acp.session.accounting.session_context import billed_stats
from ama_acp.session.store import entries as en
from ama_acp.session.store.repair import StoredState, stored_state

if TYPE_CHECKING:
    from ama_acp.config import Config

S = TypeVar("S", bound=msgspec.Struct)


class _Figures:
    """One pass over a session file's entries (rewinds applied by the reader), as a load reads the states."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.billing: BillingState | None = None
        self.meter: MeterState | None = None

    def apply(self, entry: en.Entry) -> None:
        match entry:
            case en.UsageEntry():
                if entry.purpose == "turn":  # a task's, a title's or a compaction's request may use another model
                    self.model = self.model or entry.model_id
                if (billing := _state(entry.billing, BillingState)) is not None:
                    self.billing = billing
                self._measured(entry.meter)
            case en.ContextEditEntry(action="prune"):
                self._measured(entry.meter)
            case en.CompactionEntry():
                self.meter = _state(entry.meter, MeterState)  # the context changed: the old state is void either way
            case en.ModelEntry():
                if entry.model_id != self.model:
                    self.meter = None  # measured with another model: not this one's figure
                self.model = entry.model_id

    def _measured(self, meter: StoredState | None) -> None:
        if (state := _state(meter, MeterState)) is not None:
            self.meter = state


def _state(value: StoredState | None, kind: type[S]) -> S | None:
    """The stored state as `kind` when it is whole and plausible (session/store/repair.py), else None."""
    checked = stored_state(value, kind)
    return msgspec.convert(checked, kind) if checked is not None else None


def stored_stats(
    session_id: str, entries: Sequence[en.Entry], window_of: Callable[[str], int | None]
) -> dict[str, object]:
    """The stats a stored session's `entries` hold; `window_of` gives a model's context window (None: unknown)."""
    f = _Figures()
    for entry in entries:
        f.apply(entry)
    billing = f.billing or BillingState()
    out: dict[str, object] = {"sessionId": session_id}
    if f.model is not None:
        out["model"] = f.model
    out["billed"] = billed_stats(billing.totals)
    if billing.cost is not None:
        out["cost"] = {"amount": round(billing.cost, 6), "currency": "USD"}
    if (rate := billing.totals.cache_read_share()) is not None:
        out["cacheHitRate"] = rate
    meter = f.meter
    if meter is None or meter.usage_tokens is None:
        return out  # no figure measured on the context as it stands: none is made up
    used = meter.usage_tokens + (meter.trailing_tokens or 0)
    out["contextTokens"] = used
    out["context"] = {
        "source": meter.source,
        "usageTokens": meter.usage_tokens,
        "trailingTokens": meter.trailing_tokens or 0,
    }
    window = window_of(f.model) if f.model is not None else None
    if window:
        out["contextWindow"] = window
        out["contextPercent"] = min(100.0, round(used * 100 / window, 1))
    return out


def run_stats(argv: list[str], load_config: Callable[[argparse.Namespace], Config]) -> int:
    p = argparse.ArgumentParser(
        prog="ama stats", description="a stored session's figures: billed tokens, cost, cache, context (no model)"
    )
    p.add_argument("session_id", nargs="?", help="default: the newest session of the current directory")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cwd", help="the directory whose newest session is meant (default: the current one)")
    p.add_argument("--config")
    p.add_argument("--data-dir")
    args = p.parse_args(argv)
    cfg = load_config(args)
    import os

    from ama_acp.providers.catalog import Catalog
    from ama_acp.session.store.session_store import SessionBusy, SessionFormatError, SessionNotFound, SessionStore
    from ama_acp.textsafe import one_line

    store = SessionStore(cfg.data_dir)
    session_id = args.session_id
    if session_id is None:
        page, _ = store.list(args.cwd or os.getcwd(), None, 1, spoken_only=True)
        if not page:
            sys.stderr.write("ama: no stored session in this directory (name one: ama stats SESSION_ID)\n")
            return 1
        session_id = page[0].session_id
    try:
        loaded = store.read(session_id)
    except SessionNotFound:  # InvalidSessionId too: not a session id
        sys.stderr.write(f"ama: no session {one_line(str(session_id))}\n")
        return 1
    except (SessionBusy, SessionFormatError) as exc:
        sys.stderr.write(f"ama: {one_line(str(exc))}\n")
        return 1
    catalog = Catalog(cfg.models)

    def window_of(model_id: str) -> int | None:
        info = catalog.get(model_id)
        return info.context_window if info is not None else None

    stats = stored_stats(loaded.header.session_id, loaded.entries, window_of)
    if args.json:
        sys.stdout.write(json.dumps(stats, indent=2) + "\n")
        return 0
    from ama_acp.client.demo import stats_lines

    sys.stdout.write("\n".join(one_line(line) for line in stats_lines(stats, 0)) + "\n")
    return 0
