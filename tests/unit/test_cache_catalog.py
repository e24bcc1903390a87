"""The prompt-cache catalog (providers/cache_facts.py), its `[[models]] cache = {...}` override (config.py) and
its place in `ama models` (catalog_cli.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.catalog_cli import print_models
from ama_acp.config import MAX_CACHE_MIN_TOKENS, MAX_CACHE_TTL_SECONDS, parse_config
from ama_acp.errors import ConfigError
from ama_acp.providers.cache_facts import builtin_cache_facts
from ama_acp.providers.catalog import BUILTIN_MODELS, Catalog
from tests.support.hypothesis_profiles import examples


def test_the_catalog_knows_the_documented_facts() -> None:
    cat = Catalog()
    sonnet = cat.get("anthropic/claude-sonnet-4-5")
    assert sonnet is not None and sonnet.cache is not None
    assert (sonnet.cache.ttl_seconds, sonnet.cache.min_tokens, sonnet.cache.mode) == (300, 1024, "breakpoints")
    opus = cat.get("anthropic/claude-opus-4-6")
    assert opus is not None and opus.cache is not None and opus.cache.min_tokens == 4096
    long = cat.get("anthropic/claude-sonnet-4-5[1m]")
    assert long is not None and long.cache is not None and long.cache.min_tokens == 1024
    gpt = cat.get("openai/gpt-4.1")
    assert gpt is not None and gpt.cache is not None
    assert (gpt.cache.ttl_seconds, gpt.cache.min_tokens, gpt.cache.mode) == (3600, 1024, "automatic")
    # A dated snapshot keeps its family's facts.
    snap = cat.get("anthropic/claude-sonnet-4-5-20250929")
    assert snap is not None and snap.cache == sonnet.cache


def test_what_could_not_be_confirmed_is_unknown_and_the_source_says_so() -> None:
    deepseek = builtin_cache_facts("deepseek/deepseek-chat")
    assert deepseek is not None and deepseek.ttl_seconds is None and deepseek.min_tokens is None
    assert "could not be confirmed" in deepseek.source
    for mid in ("moonshot/kimi-k2.6", "zhipu/glm-4.6", "gemini/gemini-2.5-pro", "qwen/qwen3-max"):
        facts = builtin_cache_facts(mid)
        assert facts is not None and facts.ttl_seconds is None, mid
        assert "unknown" in facts.source, mid
    assert builtin_cache_facts("local/m") is None  # a provider the catalog does not know


def test_every_builtin_model_has_cache_facts_with_a_source() -> None:
    for info in BUILTIN_MODELS:
        assert info.cache is not None and info.cache.source, info.id


def test_config_overrides_only_the_figures_it_sets() -> None:
    cfg = parse_config('[[models]]\nid = "anthropic/claude-sonnet-4-5"\ncache = { ttl_seconds = 3600 }\n')
    info = Catalog(cfg.models).get("anthropic/claude-sonnet-4-5")
    assert info is not None and info.cache is not None
    assert (info.cache.ttl_seconds, info.cache.min_tokens) == (3600, 1024)
    assert "Overridden by config: ttl_seconds" in info.cache.source


def test_a_new_model_gets_only_what_the_config_says() -> None:
    cfg = parse_config('[[models]]\nid = "local/m"\ncache = { min_tokens = 512 }\n')
    info = Catalog(cfg.models).get("local/m")
    assert info is not None and info.cache is not None
    assert (info.cache.ttl_seconds, info.cache.min_tokens, info.cache.mode) == (None, 512, None)
    plain = Catalog(parse_config('[[models]]\nid = "local/n"\n').models).get("local/n")
    assert plain is not None and plain.cache is None


@pytest.mark.parametrize(
    "table",
    [
        "cache = { ttl_seconds = 0 }",
        "cache = { ttl_seconds = -300 }",
        f"cache = {{ ttl_seconds = {MAX_CACHE_TTL_SECONDS + 1} }}",
        "cache = { ttl_seconds = 1.5 }",
        "cache = { ttl_seconds = true }",
        "cache = { min_tokens = 0 }",
        f"cache = {{ min_tokens = {MAX_CACHE_MIN_TOKENS + 1} }}",
        "cache = { ttl = 300 }",
        "cache = 300",
        'cache = "5m"',
    ],
)
def test_a_bad_cache_table_is_a_config_error_naming_the_key(table: str) -> None:
    with pytest.raises(ConfigError, match=r"models\[0\]\.cache"):
        parse_config(f'[[models]]\nid = "local/m"\n{table}\n')


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return str(v)


_VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=8),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=examples(200))
@given(ttl=st.one_of(st.none(), _VALUES), minimum=st.one_of(st.none(), _VALUES), extra=st.booleans())
def test_any_cache_table_parses_to_bounded_figures_or_a_config_error(ttl: object, minimum: object, extra: bool) -> None:
    """Whatever the TOML holds, the config either carries whole numbers within the bounds, or is refused."""
    table: dict[str, object] = {}
    if ttl is not None:
        table["ttl_seconds"] = ttl
    if minimum is not None:
        table["min_tokens"] = minimum
    if extra:
        table["lifetime"] = 1
    inline = ", ".join(f"{k} = {_toml(v)}" for k, v in table.items())
    text = f'[[models]]\nid = "local/m"\ncache = {{ {inline} }}\n'
    try:
        cfg = parse_config(text)
    except ConfigError as exc:
        assert "models[0].cache" in str(exc)
        return
    assert not extra
    cache = cfg.models[0].cache
    assert cache is not None
    for value, top in ((cache.ttl_seconds, MAX_CACHE_TTL_SECONDS), (cache.min_tokens, MAX_CACHE_MIN_TOKENS)):
        assert value is None or (type(value) is int and 1 <= value <= top)


def test_ama_models_shows_the_cache_facts(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = parse_config('[[models]]\nid = "local/m"\ncache = { ttl_seconds = 90, min_tokens = 256 }\n')
    assert print_models(cfg, as_json=False) == 0
    out = capsys.readouterr().out
    assert "cache life / min" in out
    row = next(line for line in out.splitlines() if line.startswith("anthropic/claude-sonnet-4-5 "))
    assert "5m / 1,024" in row
    assert "1h / 1,024" in next(line for line in out.splitlines() if line.startswith("openai/gpt-4.1 "))
    assert "? / ?" in next(line for line in out.splitlines() if line.startswith("deepseek/deepseek-chat"))
    assert "90s / 256" in next(line for line in out.splitlines() if line.startswith("local/m"))
    assert print_models(cfg, as_json=True) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["anthropic/claude-sonnet-4-5"]["cache"]["ttlSeconds"] == 300
    assert rows["anthropic/claude-sonnet-4-5"]["cache"]["minTokens"] == 1024
    assert rows["deepseek/deepseek-chat"]["cache"]["ttlSeconds"] is None  # unknown, not 0
    assert rows["local/m"]["cache"] == {"ttlSeconds": 90, "minTokens": 256, "mode": None, "source": "config [[models]]"}
