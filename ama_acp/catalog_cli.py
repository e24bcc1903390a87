"""`ama models`: the model catalog with windows, prices and whether credentials are present."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from ama_acp.config import Config, Price

if TYPE_CHECKING:
    from ama_acp.providers.catalog import ModelInfo

_PRICE_KEYS = {"input": "input", "output": "output", "cacheRead": "cache_read", "cacheWrite": "cache_write"}


def print_models(cfg: Config, as_json: bool) -> int:
    from ama_acp.providers.catalog import Catalog
    from ama_acp.providers.resolve import has_credentials

    models = [(info, has_credentials(cfg, info.provider)) for info in Catalog(cfg.models).all()]
    if as_json:
        sys.stdout.write(json.dumps([_json_row(info, keyed) for info, keyed in models], indent=2) + "\n")
        return 0
    header = f"{'model':<44} {'window':>10} {'max out':>8}  {'in / out / cache r / cache w  (USD per M)':<40} key"
    lines = [header, "-" * len(header)]
    lines += [_text_row(info, keyed) for info, keyed in models]
    lines.append(
        "\nUnknown window (?) → no usage_update; unknown price → no cost. Add or override models with "
        "[[models]] in the config."
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
    }


def _text_row(info: ModelInfo, credentials: bool) -> str:
    def num(v: int | None) -> str:
        return f"{v:,}" if v else "?"

    def usd(v: float | None) -> str:
        return "?" if v is None else f"{v:g}"

    prices = "unknown" if info.price is None else " / ".join(usd(v) for v in _prices(info.price).values())
    return (
        f"{info.id:<44} {num(info.context_window):>10} {num(info.max_output):>8}  {prices:<40} "
        f"{'yes' if credentials else '-'}"
    )
