"""`ama models`: the model catalog with windows, prices, prompt-cache facts and whether credentials are present;
`ama models cache-probe MODEL`: checks the cache facts against the real provider (providers/cache_probe.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ama_acp.config import Config, Price

if TYPE_CHECKING:
    from ama_acp.providers.cache_facts import CacheFacts
    from ama_acp.providers.catalog import ModelInfo

_PRICE_KEYS = {"input": "input", "output": "output", "cacheRead": "cache_read", "cacheWrite": "cache_write"}


def print_models(cfg: Config, as_json: bool) -> int:
    from ama_acp.providers.catalog import Catalog
    from ama_acp.providers.resolve import has_credentials

    models = [(info, has_credentials(cfg, info.provider)) for info in Catalog(cfg.models).all()]
    if as_json:
        sys.stdout.write(json.dumps([_json_row(info, keyed) for info, keyed in models], indent=2) + "\n")
        return 0
    header = (
        f"{'model':<44} {'window':>10} {'max out':>8}  {'in / out / cache r / cache w  (USD per M)':<40} "
        f"{'cache life / min':<16} key"
    )
    lines = [header, "-" * len(header)]
    lines += [_text_row(info, keyed) for info, keyed in models]
    lines.append(
        "\nUnknown window (?) → no usage_update; unknown price → no cost; unknown cache lifetime (?) → the cache "
        "is never called cold. Add or override models with [[models]] in the config; check a model's cache with "
        "`ama models cache-probe MODEL`."
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _prices(price: Price) -> dict[str, float | None]:
    return {wire: getattr(price, field) for wire, field in _PRICE_KEYS.items()}


def _json_row(info: ModelInfo, credentials: bool) -> dict[str, object]:
    return {
        "id": info.id,
        "name": info.name,
        "contextWindow": info.context_window,
        "maxOutput": info.max_output,
        "price": None if info.price is None else _prices(info.price),
        "reasoning": info.reasoning,
        "credentials": credentials,
        "source": info.source,
        "cache": _cache_json(info.cache),
    }


def _cache_json(facts: CacheFacts | None) -> dict[str, object] | None:
    """The prompt cache's facts; null when the catalog knows nothing of the model's cache, null figures unknown."""
    if facts is None:
        return None
    return {"ttlSeconds": facts.ttl_seconds, "minTokens": facts.min_tokens, "mode": facts.mode, "source": facts.source}


def _cache_text(facts: CacheFacts | None) -> str:
    if facts is None:
        return "? / ?"
    ttl = facts.ttl_seconds
    if ttl is None:
        life = "?"
    elif ttl % 3600 == 0:
        life = f"{ttl // 3600}h"
    else:
        life = f"{ttl // 60}m" if ttl % 60 == 0 else f"{ttl}s"
    return f"{life} / {'?' if facts.min_tokens is None else f'{facts.min_tokens:,}'}"


def _text_row(info: ModelInfo, credentials: bool) -> str:
    def num(v: int | None) -> str:
        return f"{v:,}" if v else "?"

    def usd(v: float | None) -> str:
        return "?" if v is None else f"{v:g}"

    prices = "unknown" if info.price is None else " / ".join(usd(v) for v in _prices(info.price).values())
    return (
        f"{info.id:<44} {num(info.context_window):>10} {num(info.max_output):>8}  {prices:<40} "
        f"{_cache_text(info.cache):<16} {'yes' if credentials else '-'}"
    )


def run_cache_probe(argv: list[str], load_config: Callable[[argparse.Namespace], Config]) -> int:
    """`ama models cache-probe MODEL`. Exit 0: both requests answered (the report says whether the facts held);
    1: a request failed; 2: a bad command line or a model ama cannot reach."""
    p = argparse.ArgumentParser(
        prog="ama models cache-probe",
        description="send two identical requests to MODEL and report what the second read from the prompt cache",
    )
    p.add_argument("model")
    p.add_argument(
        "--tokens",
        type=_bounded(1, MAX_PROBE_TOKENS),
        help="the prompt's size in tokens (ama's estimate); by default twice the catalog's minimum",
    )
    p.add_argument(
        "--gap-ms",
        type=_bounded(0, MAX_GAP_MS),
        default=None,
        help="milliseconds between the two requests (default 1000)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--config")
    p.add_argument("--data-dir")
    args = p.parse_args(argv)
    cfg = load_config(args)
    import anyio

    from ama_acp.providers.cache_probe import report_lines, run_probe
    from ama_acp.providers.catalog import Catalog
    from ama_acp.providers.resolve import provider_for_model

    info = Catalog(cfg.models).get(args.model)
    if info is None:
        sys.stderr.write(f"ama: {args.model!r} is not in the catalog (ama models lists it; [[models]] adds one)\n")
        return 2
    if info.provider == "scripted":
        sys.stderr.write(f"ama: cannot probe {info.id}: the scripted model has no prompt cache\n")
        return 2
    # A provider that cannot be built (no key, unknown provider) fails the first request, which says why.
    provider = provider_for_model(cfg, info.id, info)
    report = anyio.run(partial(run_probe, provider, info, tokens=args.tokens, gap_ms=_gap(args.gap_ms)))
    if args.json:
        sys.stdout.write(json.dumps(_probe_json(report), indent=2) + "\n")
    else:
        sys.stdout.write("\n".join(report_lines(report, _usd)) + "\n")
    return 0 if report.ok else 1


MAX_PROBE_TOKENS = 1_000_000  # the largest windows; ≈ 4 MB of prompt
MAX_GAP_MS = 3_600_000  # an hour: past every catalog lifetime but the 24-hour retentions


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (anything else is a usage error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low:,}–{high:,}")
        return value

    return parse


def _gap(value: int | None) -> int:
    from ama_acp.providers.cache_probe import DEFAULT_GAP_MS

    return DEFAULT_GAP_MS if value is None else value


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.6f}"


def _probe_json(report: object) -> object:
    import msgspec

    def camel(key: str) -> str:
        head, *rest = key.split("_")
        return head + "".join(r.title() for r in rest)

    def walk(v: object) -> object:
        if isinstance(v, dict):
            return {camel(str(k)): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    out = walk(msgspec.to_builtins(report))
    assert isinstance(out, dict)
    out["ok"] = getattr(report, "ok", False)
    return out
