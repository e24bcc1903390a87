"""The model catalog and `[[models]]` overrides (docs/configuration.md, docs/rules.md D3, U17)."""

from __future__ import annotations

import pytest

from ama_acp.config import ModelEntry, Price, parse_config
from ama_acp.context.billing import Billing
from ama_acp.conversation.messages import Usage
from ama_acp.providers.catalog import BUILTIN_MODELS, Catalog, ModelInfo, price_for
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS

BUILTIN_PROVIDERS = {"openai", "anthropic", "scripted"}
COMPAT = {name for name, e in BUILTIN_ENDPOINTS.items() if name != e.kind}


def known(catalog: Catalog, model_id: str) -> ModelInfo:
    info = catalog.get(model_id)
    assert info is not None, f"{model_id} is not in the catalog"
    return info


def test_catalog_has_the_pinned_and_requested_ids() -> None:
    c = Catalog()
    for mid in (
        "openai/gpt-4.1",
        "openai/gpt-4.1-mini",
        "openai/gpt-4.1-nano",
        "openai/gpt-5",
        "openai/gpt-5-mini",
        "openai/gpt-5-nano",
        "openai/o3",
        "openai/o4-mini",
        "openai/o3-mini",
        "openai/o1",
        "anthropic/claude-sonnet-4-5",
        "anthropic/claude-sonnet-4-0",
        "anthropic/claude-haiku-4-5",
        "anthropic/claude-opus-4-0",
        "anthropic/claude-opus-4-1",
        "anthropic/claude-opus-4-5",
        "anthropic/claude-sonnet-4-5[1m]",
        "deepseek/deepseek-chat",
        "deepseek/deepseek-reasoner",
        "qwen/qwen3-coder-plus",
        "qwen/qwen3-max",
        "zhipu/glm-4.6",
        "zhipu/glm-4.5",
        "gemini/gemini-2.5-pro",
        "gemini/gemini-2.5-flash",
        "scripted/demo",
    ):
        assert c.get(mid) is not None, mid
    assert any(m.provider == "moonshot" for m in c.all())


@pytest.mark.parametrize("info", BUILTIN_MODELS, ids=lambda m: m.id)
def test_every_builtin_model_is_well_formed(info: ModelInfo) -> None:
    assert info.id == f"{info.provider}/{info.id.partition('/')[2]}"
    assert info.provider in BUILTIN_PROVIDERS | COMPAT
    assert info.source, "every family says where its figures come from"
    assert info.context_window and info.context_window > 0
    if info.max_output is not None:
        assert info.max_output < info.context_window
    assert info.price is not None and info.price.input >= 0 and info.price.output >= 0
    assert list(info.price_tiers) == sorted(info.price_tiers, key=lambda t: t.above)


def test_builtin_endpoints_have_base_url_and_key_env() -> None:
    assert COMPAT == {"deepseek", "qwen", "moonshot", "zhipu", "gemini"}
    for name, endpoint in BUILTIN_ENDPOINTS.items():
        assert endpoint.kind in ("openai", "anthropic"), name
        assert endpoint.base_url.startswith("https://") and not endpoint.base_url.endswith("/")
        assert endpoint.api_key_env.isupper() and endpoint.api_key_env.endswith("_API_KEY")
    assert BUILTIN_ENDPOINTS["openai"].api_key_env == "OPENAI_API_KEY"
    assert BUILTIN_ENDPOINTS["anthropic"].api_key_env == "ANTHROPIC_API_KEY"


def test_long_context_variant_same_api_model_with_beta_header() -> None:
    c = Catalog()
    long, short = known(c, "anthropic/claude-sonnet-4-5[1m]"), known(c, "anthropic/claude-sonnet-4-5")
    assert long.model == short.model == "claude-sonnet-4-5"
    assert (short.context_window, long.context_window) == (200_000, 1_000_000)
    assert long.extra_headers == {"anthropic-beta": "context-1m-2025-08-07"}


def test_u17_long_context_requests_priced_at_the_long_tier() -> None:
    info = known(Catalog(), "anthropic/claude-sonnet-4-5[1m]")
    assert price_for(info, Usage(input=150_000, output=10)) == info.price
    # The prompt counts cache reads and writes: 1,000 + 180,000 + 20,000 = 201,000 > 200,000.
    long = price_for(info, Usage(input=1_000, cache_read=180_000, cache_write=20_000, output=10))
    assert long is not None
    assert (long.input, long.output, long.cache_read, long.cache_write) == (6.0, 22.5, 0.60, 7.50)
    b = Billing()
    u = Usage(input=250_000, output=1_000)
    b.add(u, price_for(info, u))
    assert b.cost == pytest.approx(250_000 * 6.0 / 1e6 + 1_000 * 22.5 / 1e6)


def test_price_for_unknown_is_none() -> None:
    assert price_for(None, Usage(input=1, output=1)) is None
    info = Catalog([ModelEntry(id="local/qwen3-coder", context_window=32768)]).get("local/qwen3-coder")
    assert price_for(info, Usage(input=1, output=1)) is None


def test_models_override_changes_only_the_fields_set() -> None:
    builtin = known(Catalog(), "openai/gpt-4.1")
    c = Catalog([ModelEntry(id="openai/gpt-4.1", context_window=500_000)])
    got = known(c, "openai/gpt-4.1")
    assert got.context_window == 500_000
    assert (got.price, got.max_output, got.model, got.name) == (builtin.price, builtin.max_output, "gpt-4.1", "GPT-4.1")
    assert "Overridden by config" in got.source


def test_models_price_override_replaces_tiers() -> None:
    c = Catalog([ModelEntry(id="gemini/gemini-2.5-pro", price=Price(input=1.0, output=2.0))])
    info = known(c, "gemini/gemini-2.5-pro")
    assert info.price_tiers == ()
    assert price_for(info, Usage(input=500_000, output=0)) == Price(input=1.0, output=2.0)


def test_d3_new_model_without_window_stays_unknown() -> None:
    cfg = parse_config(
        """
model = "local/qwen3-coder"
[[models]]
id = "local/qwen3-coder"
max_output = 8192
name = "Local Qwen"
"""
    )
    info = known(Catalog(cfg.models), "local/qwen3-coder")
    assert (info.provider, info.model, info.name) == ("local", "qwen3-coder", "Local Qwen")
    assert info.context_window is None and info.price is None and info.max_output == 8192


def test_models_entry_with_bad_id_is_ignored() -> None:
    c = Catalog([ModelEntry(id="no-slash", context_window=1000)])
    assert c.get("no-slash") is None


def test_dated_snapshot_ids_resolve_to_family_figures() -> None:
    c = Catalog()
    got = known(c, "anthropic/claude-sonnet-4-5-20250929")
    assert got.model == "claude-sonnet-4-5-20250929" and got.context_window == 200_000
    assert known(c, "anthropic/claude-opus-4-20250514").price == known(c, "anthropic/claude-opus-4-0").price
    assert known(c, "openai/gpt-4.1-2025-04-14").context_window == 1_047_576
    assert c.get("openai/unknown-model") is None


def test_scripted_demo_has_a_window_and_a_known_price() -> None:
    demo = known(Catalog(), "scripted/demo")
    assert demo.context_window == 200_000
    assert demo.price == Price(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25)
