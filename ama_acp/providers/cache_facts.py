"""The prompt-cache catalog: per model, how long a cached prompt prefix lives and how long it must be.

Two facts matter to ama (docs/context.md "The prompt cache"):

- `ttl_seconds`: after this long without a request that reads or writes it, the cached prefix is gone — the
  cache is *cold*. It is the figure after which ama may call the cache cold, so where a provider gives a range
  it is the upper end (a cache that might still be warm is not cold).
- `min_tokens`: the shortest prefix the provider caches at all; a prompt below it is never cached.

A figure the provider does not document is None (unknown), never a guess: with an unknown lifetime the cache
is never called cold, so cache-aware pruning never runs early for that model. Each entry carries a dated
`source`; `[[models]] cache = {ttl_seconds, min_tokens}` overrides a figure per model (config.py).
"""

from __future__ import annotations

from typing import Literal

import msgspec

CacheMode = Literal["breakpoints", "automatic"]


class CacheFacts(msgspec.Struct, frozen=True, omit_defaults=True):
    ttl_seconds: int | None = None
    min_tokens: int | None = None
    # "breakpoints": the request marks what to cache (Anthropic's cache_control, which ama sends);
    # "automatic": the provider caches prompt prefixes by itself. None: not known whether it caches.
    mode: CacheMode | None = None
    source: str = ""


_ANTHROPIC = (
    "Anthropic prompt caching (cache_control breakpoints, which ama sends): the default 5-minute lifetime, "
    "refreshed each time the cached prefix is read; the 1-hour option is not used. Minimum cacheable prompt per "
    "model from the minimum-token table of Anthropic's prompt-caching page as copied by gateways' docs (orq.ai, "
    "truefoundry, read 2026-12): Opus 4.6 and 4.5, Haiku 4.5: 4,096; Sonnet 4.6: 2,048; Sonnet 4.5, Sonnet 4, "
    "Opus 4.1, Opus 4: 1,024."
)
_OPENAI = (
    "OpenAI prompt caching guide (developers.openai.com, read 2026-12): automatic for prompts of 1,024 tokens or "
    "more, cached in 128-token steps; a cached prefix stays for 5–10 minutes of inactivity, up to an hour off-peak "
    "(in-memory retention; ama does not ask for the 24-hour retention). The lifetime here is that hour: only "
    "after it is the cache surely cold."
)
_DEEPSEEK = (
    "DeepSeek context caching on disk (api-docs.deepseek.com/guides/kv_cache, read 2026-12): automatic, on by "
    "default, prefix units written at the end of each request's input and output. The current page gives no "
    "lifetime and no minimum: both unknown. (Earlier versions said a 64-token storage unit and clearing "
    "'within a few hours to a few days'; the 'about an hour' sometimes quoted could not be confirmed.)"
)
_QWEN = (
    "Alibaba Model Studio context cache (alibabacloud.com/help/en/model-studio/context-cache, updated 2026-06): "
    "over the OpenAI-compatible API without cache_control markers the implicit cache applies — automatic, at "
    "least 256 tokens, hits billed at 20 % of input; its validity is 'indeterminate' (old data is cleared "
    "periodically): lifetime unknown. (The explicit cache, 5 minutes and 1,024 tokens, is not used by ama.)"
)
_MOONSHOT = (
    "Moonshot (Kimi K2) bills automatic context-cache hits at a lower input rate (provider tables, 2026); neither "
    "a lifetime nor a minimum length is published for the automatic cache: both unknown."
)
_ZHIPU = (
    "Z.ai lists a cached-input rate for GLM-4.5/4.6, but no lifetime or minimum length of its cache could be "
    "found: both unknown, and whether caching is automatic was not confirmed."
)
_GEMINI = (
    "Gemini API implicit caching (ai.google.dev/gemini-api/docs/caching, updated 2026-10): automatic for 2.5 and "
    "newer; minimum 2,048 tokens for 2.5 Pro and 2.5 Flash on that page (earlier copies said 4,096 and 1,024). "
    "No lifetime is documented for the implicit cache: unknown."
)
_SCRIPTED = "Not a real model: the offline script reports no cache figures, so it has no cache facts."

_BY_PROVIDER: dict[str, CacheFacts] = {
    "anthropic": CacheFacts(ttl_seconds=300, min_tokens=1024, mode="breakpoints", source=_ANTHROPIC),
    "openai": CacheFacts(ttl_seconds=3600, min_tokens=1024, mode="automatic", source=_OPENAI),
    "deepseek": CacheFacts(mode="automatic", source=_DEEPSEEK),
    "qwen": CacheFacts(min_tokens=256, mode="automatic", source=_QWEN),
    "moonshot": CacheFacts(mode="automatic", source=_MOONSHOT),
    "zhipu": CacheFacts(source=_ZHIPU),
    "gemini": CacheFacts(min_tokens=2048, mode="automatic", source=_GEMINI),
    "scripted": CacheFacts(source=_SCRIPTED),
}

# Models whose minimum differs from their provider's (Anthropic's table).
_MIN_TOKENS: dict[str, int] = {
    "anthropic/claude-opus-4-6": 4096,
    "anthropic/claude-opus-4-5": 4096,
    "anthropic/claude-haiku-4-5": 4096,
    "anthropic/claude-sonnet-4-6": 2048,
}


def builtin_cache_facts(model_id: str) -> CacheFacts | None:
    """The catalog's cache facts of a built-in model (`provider/model`, a `[1m]` variant included); None for a
    provider the catalog does not know."""
    provider, _, _ = model_id.partition("/")
    facts = _BY_PROVIDER.get(provider)
    if facts is None:
        return None
    family = model_id.removesuffix("[1m]")
    if family in _MIN_TOKENS:
        return msgspec.structs.replace(facts, min_tokens=_MIN_TOKENS[family])
    return facts


def with_overrides(facts: CacheFacts | None, ttl_seconds: int | None, min_tokens: int | None) -> CacheFacts:
    """`facts` with the figures the config sets replaced (the source says which)."""
    base = facts or CacheFacts(source="config [[models]]")
    changes: dict[str, object] = {}
    if ttl_seconds is not None:
        changes["ttl_seconds"] = ttl_seconds
    if min_tokens is not None:
        changes["min_tokens"] = min_tokens
    if changes and facts is not None:
        changes["source"] = f"{facts.source} Overridden by config: {', '.join(sorted(changes))}."
    return msgspec.structs.replace(base, **changes)
