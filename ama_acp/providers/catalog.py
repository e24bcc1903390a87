"""The model catalog: context window, output limit and prices of the models ama knows without being told.

Ids are `provider/model`. `[[models]]` entries in the config override the fields they set on a catalog model,
or add a model; a model without a known window gets no `usage_update` (rule D3, docs/rules.md), one without a
price gets no cost (U17). Every family carries a dated note of where its figures come from; a figure that could
not be checked says so. Prices are USD per million tokens.

Conventions:

- Long-context variants of Anthropic models that need a beta header are separate ids with a `[1m]` suffix,
  e.g. `anthropic/claude-sonnet-4-5[1m]` (Claude Code's spelling): same API model name, a 1,000,000 window and
  the header in `extra_headers`. Models whose 1M window is native (Opus/Sonnet 4.6) need no suffix.
- Prices that change with the size of a request (Anthropic's 1M beta above 200K input tokens, Gemini 2.5 Pro
  above 200K, Qwen's tiers) are `price_tiers`: the whole request is priced at the tier whose `above` its prompt
  exceeds, the prompt being input + cache reads + cache writes. `price_for(info, usage)` picks it; pass the
  result to `Billing.add`.
- `cache_write` is the 5-minute cache-write rate where a provider has one. A rate left None is unknown: a request
  that used those tokens is unpriced (and the session cost unknown) rather than priced wrongly.
- Dated snapshot ids (`anthropic/claude-sonnet-4-5-20250929`) resolve to their family's figures.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

import msgspec

from ama_acp.config import ModelEntry, Price
from ama_acp.conversation.messages import Usage
from ama_acp.providers.cache_facts import CacheFacts, builtin_cache_facts, with_overrides

log = logging.getLogger(__name__)


class PriceTier(msgspec.Struct, frozen=True):
    """The price of a request whose prompt (input + cache read + cache write) is above `above` tokens."""

    above: int
    price: Price


class ModelInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    id: str  # "provider/model"
    provider: str
    model: str  # the provider's own model name, sent on the wire
    name: str  # for people
    context_window: int | None = None
    max_output: int | None = None
    price: Price | None = None
    price_tiers: tuple[PriceTier, ...] = ()
    reasoning: bool = False
    extra_headers: dict[str, str] = {}
    source: str = ""  # where the figures come from, and when
    cache: CacheFacts | None = None  # the prompt cache's lifetime and minimum (providers/cache_facts.py)


def _m(
    mid: str,
    name: str,
    window: int | None,
    max_output: int | None,
    price: Price | None,
    source: str,
    *,
    reasoning: bool = False,
    tiers: tuple[PriceTier, ...] = (),
    model: str | None = None,
    headers: dict[str, str] | None = None,
) -> ModelInfo:
    provider, _, model_name = mid.partition("/")
    return ModelInfo(
        id=mid,
        provider=provider,
        model=model or model_name,
        name=name,
        context_window=window,
        max_output=max_output,
        price=price,
        price_tiers=tiers,
        reasoning=reasoning,
        extra_headers=headers or {},
        source=source,
        cache=builtin_cache_facts(mid),
    )


_OPENAI = (
    "OpenAI API pricing (standard tier) and model pages, read 2026 from stored copies of the pricing page and "
    "third-party quotes of it; cached input at 10% (GPT-5 family) / 25% (GPT-4.1, o3, o4-mini) / 50% (o3-mini, o1). "
    "OpenAI bills no cache writes. Windows: GPT-5 family 400K (128K output), GPT-4.1 1,047,576 (32,768 output), "
    "o-series 200K (100K output)."
)
_OPENAI_54 = (
    "GPT-5.4: $2.50 / $0.25 cached / $15 under 272K prompt tokens (OpenAI pricing page as quoted 2026); above that "
    "$5 / $22.50 per a reseller's copy of the long-context rates — the long-context cached rate could not be "
    "verified, so such requests that hit the cache are unpriced."
)
_ANTHROPIC = (
    "Anthropic pricing page (docs.anthropic.com/en/docs/about-claude/pricing) and model overview pages "
    "(platform.claude.com), read 2026 from stored copies. cache_write is the 5-minute rate (1.25x input); 1-hour "
    "writes (2x) are not distinguished."
)
_ANTHROPIC_1M = (
    " 1M window via beta header context-1m-2025-08-07 (usage tier 4); requests above 200K prompt tokens are billed "
    "entirely at $6 / $22.50 (cache read $0.60, write $7.50)."
)
_ANTHROPIC_46 = (
    " 1M window native; flat pricing across the window since the March 2026 GA (stored announcement copies)."
)
_DEEPSEEK = (
    "DeepSeek API docs (api-docs.deepseek.com pricing) as quoted by Roo-Code's provider table, updated 2025-12-09: "
    "V3.2 $0.28 input (cache miss) / $0.028 cache hit / $0.42 output, 128K window, chat 8K max output, reasoner 64K. "
    "The deepseek-chat/-reasoner aliases may serve a newer version by now (V4 was reported in 2026 with a larger "
    "window): override with [[models]] if so."
)
_QWEN = (
    "Alibaba Cloud Model Studio international price list, recalled from its 2025-09 state and NOT re-verified here "
    "(the stored copies only confirm the tier boundaries 32K/128K/256K/1M and the DASHSCOPE_API_KEY endpoint); "
    "cache hits assumed at 20% of the tier's input rate (implicit cache). Tier boundaries taken as 1K = 1,000. "
    "Verify before relying on the cost."
)
_MOONSHOT = (
    "Moonshot pay-as-you-go rates as quoted by OpenClaw's provider docs (2026): K2.6 $0.95 / $0.16 cache hit / $4.00, "
    "K2.5 $0.60 / $0.10 / $3.00; window 262,144. Max output not published separately. The original kimi-k2-* "
    "preview ids were retired in 2026."
)
_ZHIPU = (
    "Z.ai price list as quoted by LLM gateways (Bifrost, 2025-10): GLM-4.6 $0.60 / $2.20, 200K window (204,800), "
    "128K output; GLM-4.5 $0.60 / $2.20, 128K window, 96K output. Cached input $0.11 is from Z.ai's page as "
    "recalled, not re-verified."
)
_GEMINI = (
    "Gemini API pricing (ai.google.dev) as modelled by the gemini-cost and adk-gemini crates (2025–2026): 2.5 Pro "
    "$1.25 / $10 up to 200K prompt tokens, $2.50 / $15 above; 2.5 Flash $0.30 / $2.50. Context-cache read rates "
    "($0.125/$0.25 Pro, $0.03 Flash) recalled from the pricing page, not re-verified. Window 1,048,576, output 65,536."
)
_SCRIPTED = (
    "Not a real model: the bundled offline script. Window 200,000 so the meter shows a fill; a made-up small price "
    "($1 input, $5 output, $0.10 cache read, $1.25 cache write per million) so cost is demonstrable."
)

_SONNET_PRICE = Price(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)
_SONNET_LONG = (PriceTier(above=200_000, price=Price(input=6.0, output=22.5, cache_read=0.60, cache_write=7.50)),)
_OPUS_45_PRICE = Price(input=5.0, output=25.0, cache_read=0.50, cache_write=6.25)
_OPUS_4_PRICE = Price(input=15.0, output=75.0, cache_read=1.50, cache_write=18.75)
_BETA_1M = {"anthropic-beta": "context-1m-2025-08-07"}


def _qwen_tiers(rates: list[tuple[int, float, float]]) -> tuple[Price, tuple[PriceTier, ...]]:
    """Tiered Qwen prices from (above, input, output); cache hits at 20% of input."""
    prices = [(above, Price(input=i, output=o, cache_read=round(i * 0.2, 6))) for above, i, o in rates]
    return prices[0][1], tuple(PriceTier(above=a, price=p) for a, p in prices[1:])


_QC_BASE, _QC_TIERS = _qwen_tiers([(0, 1.0, 5.0), (32_000, 1.8, 9.0), (128_000, 3.0, 15.0), (256_000, 6.0, 60.0)])
_QM_BASE, _QM_TIERS = _qwen_tiers([(0, 1.2, 6.0), (32_000, 2.4, 12.0), (128_000, 3.0, 15.0)])

BUILTIN_MODELS: tuple[ModelInfo, ...] = (
    # OpenAI
    _m(
        "openai/gpt-5.4",
        "GPT-5.4",
        1_050_000,
        128_000,
        Price(input=2.5, output=15.0, cache_read=0.25),
        _OPENAI_54,
        reasoning=True,
        tiers=(PriceTier(above=272_000, price=Price(input=5.0, output=22.5)),),
    ),
    _m(
        "openai/gpt-5.2",
        "GPT-5.2",
        400_000,
        128_000,
        Price(input=1.75, output=14.0, cache_read=0.175),
        _OPENAI,
        reasoning=True,
    ),
    _m(
        "openai/gpt-5.1",
        "GPT-5.1",
        400_000,
        128_000,
        Price(input=1.25, output=10.0, cache_read=0.125),
        _OPENAI,
        reasoning=True,
    ),
    _m(
        "openai/gpt-5",
        "GPT-5",
        400_000,
        128_000,
        Price(input=1.25, output=10.0, cache_read=0.125),
        _OPENAI,
        reasoning=True,
    ),
    _m(
        "openai/gpt-5-mini",
        "GPT-5 mini",
        400_000,
        128_000,
        Price(input=0.25, output=2.0, cache_read=0.025),
        _OPENAI,
        reasoning=True,
    ),
    _m(
        "openai/gpt-5-nano",
        "GPT-5 nano",
        400_000,
        128_000,
        Price(input=0.05, output=0.40, cache_read=0.005),
        _OPENAI,
        reasoning=True,
    ),
    _m("openai/gpt-4.1", "GPT-4.1", 1_047_576, 32_768, Price(input=2.0, output=8.0, cache_read=0.50), _OPENAI),
    _m(
        "openai/gpt-4.1-mini",
        "GPT-4.1 mini",
        1_047_576,
        32_768,
        Price(input=0.40, output=1.60, cache_read=0.10),
        _OPENAI,
    ),
    _m(
        "openai/gpt-4.1-nano",
        "GPT-4.1 nano",
        1_047_576,
        32_768,
        Price(input=0.10, output=0.40, cache_read=0.025),
        _OPENAI,
    ),
    _m("openai/o3", "o3", 200_000, 100_000, Price(input=2.0, output=8.0, cache_read=0.50), _OPENAI, reasoning=True),
    _m(
        "openai/o4-mini",
        "o4-mini",
        200_000,
        100_000,
        Price(input=1.10, output=4.40, cache_read=0.275),
        _OPENAI,
        reasoning=True,
    ),
    _m(
        "openai/o3-mini",
        "o3-mini",
        200_000,
        100_000,
        Price(input=1.10, output=4.40, cache_read=0.55),
        _OPENAI,
        reasoning=True,
    ),
    _m("openai/o1", "o1", 200_000, 100_000, Price(input=15.0, output=60.0, cache_read=7.50), _OPENAI, reasoning=True),
    # Anthropic
    _m(
        "anthropic/claude-opus-4-6",
        "Claude Opus 4.6",
        1_000_000,
        128_000,
        _OPUS_45_PRICE,
        _ANTHROPIC + _ANTHROPIC_46,
        reasoning=True,
    ),
    _m(
        "anthropic/claude-sonnet-4-6",
        "Claude Sonnet 4.6",
        1_000_000,
        128_000,
        _SONNET_PRICE,
        _ANTHROPIC + _ANTHROPIC_46,
        reasoning=True,
    ),
    _m("anthropic/claude-opus-4-5", "Claude Opus 4.5", 200_000, 64_000, _OPUS_45_PRICE, _ANTHROPIC, reasoning=True),
    _m("anthropic/claude-opus-4-1", "Claude Opus 4.1", 200_000, 32_000, _OPUS_4_PRICE, _ANTHROPIC, reasoning=True),
    _m("anthropic/claude-opus-4-0", "Claude Opus 4", 200_000, 32_000, _OPUS_4_PRICE, _ANTHROPIC, reasoning=True),
    _m("anthropic/claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000, 64_000, _SONNET_PRICE, _ANTHROPIC, reasoning=True),
    _m(
        "anthropic/claude-sonnet-4-5[1m]",
        "Claude Sonnet 4.5 (1M)",
        1_000_000,
        64_000,
        _SONNET_PRICE,
        _ANTHROPIC + _ANTHROPIC_1M,
        reasoning=True,
        tiers=_SONNET_LONG,
        model="claude-sonnet-4-5",
        headers=_BETA_1M,
    ),
    _m("anthropic/claude-sonnet-4-0", "Claude Sonnet 4", 200_000, 64_000, _SONNET_PRICE, _ANTHROPIC, reasoning=True),
    _m(
        "anthropic/claude-sonnet-4-0[1m]",
        "Claude Sonnet 4 (1M)",
        1_000_000,
        64_000,
        _SONNET_PRICE,
        _ANTHROPIC + _ANTHROPIC_1M,
        reasoning=True,
        tiers=_SONNET_LONG,
        model="claude-sonnet-4-0",
        headers=_BETA_1M,
    ),
    _m(
        "anthropic/claude-haiku-4-5",
        "Claude Haiku 4.5",
        200_000,
        64_000,
        Price(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25),
        _ANTHROPIC,
        reasoning=True,
    ),
    # DeepSeek (OpenAI-compatible)
    _m(
        "deepseek/deepseek-chat",
        "DeepSeek V3.2 (chat)",
        128_000,
        8_192,
        Price(input=0.28, output=0.42, cache_read=0.028),
        _DEEPSEEK,
    ),
    _m(
        "deepseek/deepseek-reasoner",
        "DeepSeek V3.2 (reasoner)",
        128_000,
        65_536,
        Price(input=0.28, output=0.42, cache_read=0.028),
        _DEEPSEEK,
        reasoning=True,
    ),
    # Qwen (Alibaba Model Studio, OpenAI-compatible)
    _m("qwen/qwen3-coder-plus", "Qwen3 Coder Plus", 1_000_000, 65_536, _QC_BASE, _QWEN, tiers=_QC_TIERS),
    _m("qwen/qwen3-max", "Qwen3 Max", 262_144, 65_536, _QM_BASE, _QWEN, tiers=_QM_TIERS),
    # Moonshot (Kimi K2 family)
    _m(
        "moonshot/kimi-k2.6",
        "Kimi K2.6",
        262_144,
        None,
        Price(input=0.95, output=4.0, cache_read=0.16),
        _MOONSHOT,
        reasoning=True,
    ),
    _m(
        "moonshot/kimi-k2.5",
        "Kimi K2.5",
        262_144,
        None,
        Price(input=0.60, output=3.0, cache_read=0.10),
        _MOONSHOT,
        reasoning=True,
    ),
    # Zhipu / Z.ai
    _m(
        "zhipu/glm-4.6",
        "GLM-4.6",
        204_800,
        131_072,
        Price(input=0.60, output=2.20, cache_read=0.11),
        _ZHIPU,
        reasoning=True,
    ),
    _m(
        "zhipu/glm-4.5",
        "GLM-4.5",
        131_072,
        98_304,
        Price(input=0.60, output=2.20, cache_read=0.11),
        _ZHIPU,
        reasoning=True,
    ),
    # Gemini via its OpenAI-compatible endpoint
    _m(
        "gemini/gemini-2.5-pro",
        "Gemini 2.5 Pro",
        1_048_576,
        65_536,
        Price(input=1.25, output=10.0, cache_read=0.125),
        _GEMINI,
        reasoning=True,
        tiers=(PriceTier(above=200_000, price=Price(input=2.5, output=15.0, cache_read=0.25)),),
    ),
    _m(
        "gemini/gemini-2.5-flash",
        "Gemini 2.5 Flash",
        1_048_576,
        65_536,
        Price(input=0.30, output=2.50, cache_read=0.03),
        _GEMINI,
        reasoning=True,
    ),
    # The offline demo
    _m(
        "scripted/demo",
        "Scripted demo",
        200_000,
        8_192,
        Price(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25),
        _SCRIPTED,
    ),
)

_SNAPSHOT = re.compile(r"^(?P<base>.+?)-(?:\d{8}|\d{4}-\d{2}-\d{2})$")  # -20250929, -2025-04-14


def prompt_tokens(usage: Usage) -> int:
    """The size of a request's prompt for tier selection: input + cache reads + cache writes."""
    return (usage.input or 0) + (usage.cache_read or 0) + (usage.cache_write or 0)


def price_for(info: ModelInfo | None, usage: Usage | None) -> Price | None:
    """The price of one request of `info` with `usage` (the right tier for its prompt size); None if unknown."""
    if info is None or info.price is None:
        return None
    chosen = info.price
    if usage is not None and info.price_tiers:
        size = prompt_tokens(usage)
        for tier in sorted(info.price_tiers, key=lambda t: t.above):
            if size > tier.above:
                chosen = tier.price
    return chosen


def _config_only(entry: ModelEntry) -> ModelInfo | None:
    """A model the catalog does not know, as a `[[models]]` entry defines it; None for an id that is not
    provider/model."""
    provider, sep, model = entry.id.partition("/")
    if not sep or not provider or not model:
        log.warning("[[models]] id %r is not provider/model; ignored", entry.id)
        return None
    return ModelInfo(id=entry.id, provider=provider, model=model, name=model, source="config [[models]]")


# The `[[models]]` fields that, when set, replace the catalog's figure as they are.
_TAKEN_AS_GIVEN = ("context_window", "max_output", "reasoning", "name")


def _overrides(entry: ModelEntry, base: ModelInfo) -> dict[str, object]:
    """The fields of `base` a `[[models]]` entry changes, with their new values."""
    changes: dict[str, object] = {name: getattr(entry, name) for name in _TAKEN_AS_GIVEN}
    changes = {name: value for name, value in changes.items() if value is not None}
    if entry.price is not None:
        # An explicit price is the whole truth for that model: the catalog's size tiers no longer apply.
        changes["price"] = entry.price
        changes["price_tiers"] = ()
    if entry.cache is not None:
        changes["cache"] = with_overrides(base.cache, entry.cache.ttl_seconds, entry.cache.min_tokens)
    return changes


class Catalog:
    """The built-in models merged with the config's `[[models]]`."""

    def __init__(self, config_models: Iterable[ModelEntry] = (), builtin: Iterable[ModelInfo] = BUILTIN_MODELS):
        self._models: dict[str, ModelInfo] = {m.id: m for m in builtin}
        for entry in config_models:
            merged = self._merge(entry)
            if merged is not None:
                self._models[entry.id] = merged

    def _merge(self, entry: ModelEntry) -> ModelInfo | None:
        base = self.get(entry.id)
        if base is None:
            base = _config_only(entry)
        if base is None:
            return None
        changes = _overrides(entry, base)
        if changes and base.source != "config [[models]]":
            changes["source"] = f"{base.source} Overridden by config: {', '.join(sorted(changes))}."
        return msgspec.structs.replace(base, **changes)

    def get(self, model_id: str) -> ModelInfo | None:
        """The model with this id; a dated snapshot id resolves to its family's figures."""
        info = self._models.get(model_id)
        if info is not None:
            return info
        match = _SNAPSHOT.match(model_id)
        if match:
            base = match.group("base")
            # claude-opus-4-20250514 is the snapshot of the alias claude-opus-4-0
            family = self._models.get(base) or self._models.get(base + "-0")
            if family is not None and not family.extra_headers:
                return msgspec.structs.replace(family, id=model_id, model=model_id.partition("/")[2])
        return None

    def all(self) -> list[ModelInfo]:
        return list(self._models.values())

    def __contains__(self, model_id: str) -> bool:
        return self.get(model_id) is not None
