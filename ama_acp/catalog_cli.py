"""`ama models`: the model catalog with windows, prices and whether credentials are present."""

from __future__ import annotations

import json
import sys

from ama_acp.config import Config


def print_models(cfg: Config, as_json: bool) -> int:
    from ama_acp.providers.catalog import Catalog
    from ama_acp.providers.resolve import has_credentials

    rows = []
    for info in Catalog(cfg.models).all():
        price = info.price
        rows.append(
            {
                "id": info.id,
                "name": info.name,
                "contextWindow": info.context_window,
                "maxOutput": info.max_output,
                "price": None
                if price is None
                else {
                    "input": price.input,
                    "output": price.output,
                    "cacheRead": price.cache_read,
                    "cacheWrite": price.cache_write,
                },
                "reasoning": info.reasoning,
                "credentials": has_credentials(cfg, info.provider),
                "source": info.source,
            }
        )
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0

    def num(v: int | None) -> str:
        return f"{v:,}" if v else "?"

    def usd(v: float | None) -> str:
        return "?" if v is None else f"{v:g}"

    header = f"{'model':<44} {'window':>10} {'max out':>8}  {'in / out / cache r / cache w  (USD per M)':<40} key"
    lines = [header, "-" * len(header)]
    for r in rows:
        p = r["price"]
        prices = (
            "unknown" if p is None else " / ".join(usd(p[k]) for k in ("input", "output", "cacheRead", "cacheWrite"))
        )
        lines.append(
            f"{r['id']:<44} {num(r['contextWindow']):>10} {num(r['maxOutput']):>8}  {prices:<40} "
            f"{'yes' if r['credentials'] else '-'}"
        )
    lines.append(
        "\nUnknown window (?) → no usage_update; unknown price → no cost. Add or override models with "
        "[[models]] in the config."
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
