"""`ama setup` writing the config: TOML out, the merge into an existing file (its other settings kept, its comments
too where the layout allows), a file that does not parse never overwritten."""

from __future__ import annotations

import math
import operator
import string
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.config import parse_config
from ama_acp.setup import toml_out
from ama_acp.setup.choices import SetupError
from ama_acp.setup.write import Existing, ProviderTable, merged, read_existing, render
from tests.support.hypothesis_profiles import examples

# --- TOML out -------------------------------------------------------------------------------------------------


def _word(first: str, rest: str, longest: int) -> st.SearchStrategy[str]:
    """The strings of the regex `[first][rest]{0,longest}`, as `st.from_regex` gives them, in two draws instead
    of several a character (measured: a third less generation time for the round trip below at CI's counts)."""
    return st.builds(operator.add, st.sampled_from(sorted(first)), st.text(rest, max_size=longest))


NO_FILE = Path("config.toml")  # render reads an Existing's text and data, never its file
Change = tuple[str, ProviderTable | None, bool]  # the model, its provider's table (None: kept), add a [[models]]
_LOWER = string.ascii_lowercase
_UPPER = string.ascii_uppercase
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
_scalar = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    _text,
    st.dates(),
    st.datetimes(),
)
_key = st.one_of(_word(_LOWER + "_", _LOWER + string.digits + "_-", 8), _text)  # [a-z_][a-z0-9_-]{0,8}


def _tables(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.dictionaries(_key, children, max_size=4)


_value = st.recursive(
    st.one_of(_scalar, st.lists(_scalar, max_size=3)),
    lambda inner: st.one_of(_tables(inner), st.lists(_tables(inner), min_size=1, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_key, _value, max_size=6))
def test_dumps_reads_back_as_the_same_data(data: dict[str, Any]) -> None:
    assert tomllib.loads(toml_out.dumps(data)) == data


def test_strings_escape_what_toml_wants_escaped() -> None:
    for text in ['a"b', "a\\b", "tab\tnl\ncr\r", "\x00\x1f\x7f", "ü €😀", ""]:
        assert tomllib.loads(f"k = {toml_out.string(text)}")["k"] == text
    with pytest.raises(ValueError):
        toml_out.string("\udcff")  # undecodable bytes from argv
    assert toml_out.value(math.inf) == "inf" and toml_out.value(-math.inf) == "-inf"
    assert math.isnan(tomllib.loads("x = " + toml_out.value(math.nan))["x"])


def test_a_table_of_tables_needs_no_header_of_its_own() -> None:
    text = toml_out.dumps({"providers": {"local": {"kind": "openai"}}, "empty": {}})
    assert "[providers]" not in text and "[providers.local]" in text and "[empty]" in text


# --- valid configs, as hypothesis writes them ----------------------------------------------------------------

_name = _word(_LOWER, _LOWER + string.digits + "_-", 10)  # [a-z][a-z0-9_-]{0,10}
_price = st.fixed_dictionaries(
    {"input": st.floats(0, 100), "output": st.floats(0, 100)},
    optional={"cache_read": st.floats(0, 10), "cache_write": st.floats(0, 10)},
)
_provider = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["openai", "anthropic"]),
        "base_url": st.sampled_from(["http://127.0.0.1:8080/v1", "https://example.com/v1"]),
        "api_key_env": _word(_UPPER, _UPPER + string.digits + "_", 12),  # [A-Z][A-Z0-9_]{0,12}
        "timeout": st.floats(1, 1000),
        "max_retries": st.integers(0, 10),
    },
)
_model_entry = st.fixed_dictionaries(
    {"id": st.builds(lambda p, m: f"{p}/{m}", _name, _name)},
    optional={
        "context_window": st.integers(1, 2_000_000),
        "max_output": st.integers(1, 200_000),
        "price": _price,
        "reasoning": st.booleans(),
        "name": _text,
    },
)
_config = st.fixed_dictionaries(
    {},
    optional={
        "model": st.builds(lambda p, m: f"{p}/{m}", _name, _name),
        "mode": st.sampled_from(["manual", "accept_edits", "read_only", "full_access"]),
        "max_turn_requests": st.integers(1, 500),
        "providers": st.dictionaries(_name, _provider, max_size=3),
        "models": st.lists(_model_entry, max_size=3),
        "scripts": st.dictionaries(_name, _text, max_size=2),
        "compaction": st.fixed_dictionaries(
            {}, optional={"enabled": st.booleans(), "reserve_tokens": st.integers(0, 10**6)}
        ),
        "context": st.fixed_dictionaries({}, optional={"estimator": st.sampled_from(["heuristic", "tiktoken"])}),
        "tiers": st.fixed_dictionaries(
            {}, optional={"caps": st.lists(st.floats(0, 100), min_size=4, max_size=4).map(sorted)}
        ),
        "mcp": st.fixed_dictionaries({}, optional={"start_timeout": st.floats(0, 3600)}),
    },
)
_change = st.tuples(
    st.builds(lambda p, m: f"{p}/{m}", _name, _name),
    st.one_of(
        st.none(),
        st.builds(
            ProviderTable,
            _name,
            st.just("openai"),
            st.sampled_from(["http://127.0.0.1:1/v1", "https://h.example/x"]),
            st.one_of(st.none(), _word(_UPPER, _UPPER, 7).map(lambda name: name + "_API_KEY")),  # [A-Z]{1,8}_API_KEY
        ),
    ),
    st.booleans(),
)


def _commented(text: str) -> str:
    """The same config as a person might keep it: a comment on every other line."""
    lines = text.rstrip("\n").split("\n")  # TOML's line ends only: \x85 may sit inside a value
    return "# my ama config\n" + "".join(f"{line}\n# note {i}\n" for i, line in enumerate(lines))


def _expect_kept(before: dict[str, Any], after: dict[str, Any], change: Change) -> None:
    model, provider, add_model = change
    assert after["model"] == model
    for key, value in before.items():
        if key not in ("model", "providers", "models"):
            assert after[key] == value, key
    for name, table in before.get("providers", {}).items():
        if provider is None or name != provider.name:
            assert after["providers"][name] == table
        else:
            kept = {k: v for k, v in table.items() if k not in ("kind", "base_url", "api_key_env")}
            assert kept.items() <= after["providers"][name].items()
    old_models = before.get("models", [])
    assert after.get("models", [])[: len(old_models)] == old_models
    assert len(after.get("models", [])) == len(old_models) + add_model


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_config, _change, st.booleans(), st.booleans())
def test_any_valid_config_keeps_its_other_settings_after_a_write(
    data: dict[str, Any], change: Change, comments: bool, crlf: bool
) -> None:
    text = toml_out.dumps(data)
    if comments:
        text = _commented(text)
    if crlf:
        text = text.replace("\n", "\r\n")
    parse_config(text)  # the strategy writes configs ama accepts
    model, provider, add_model = change
    out = render(Existing(NO_FILE, text, tomllib.loads(text)), model, provider, add_model)
    after = tomllib.loads(out.text)
    assert after == merged(data, model, provider, add_model)
    _expect_kept(data, after, change)
    parse_config(out.text)  # still a config ama accepts
    if add_model and data.get("models") == []:  # `models = []`: no `[[models]]` can follow it
        return
    assert not out.comments_lost  # this layout is always edited in place...
    if comments:  # ...so every comment is still there
        for line in _commented(toml_out.dumps(data)).split("\n"):
            if line.startswith("#"):
                assert line in out.text.split("\n") or line + "\r" in out.text.split("\n")


def test_an_existing_file_is_edited_in_place() -> None:
    text = (
        "# my setup\n"
        'model = "openai/gpt-4.1"  # the old one\n'
        'mode = "accept_edits"\n'
        "\n"
        "# the local server\n"
        "[providers.local]\n"
        'kind = "openai"\n'
        'base_url = "http://old:1/v1"\n'
        'api_key_env = "OLD_KEY"\n'
        "timeout = 30.0  # slow box\n"
        "\n"
        "[compaction]\n"
        "enabled = false\n"
    )
    table = ProviderTable("local", "openai", "http://127.0.0.1:8080/v1", None)
    out = render(Existing(NO_FILE, text, tomllib.loads(text)), "local/qwen", table, True)
    assert out.text == (
        "# my setup\n"
        'model = "local/qwen"\n'
        'mode = "accept_edits"\n'
        "\n"
        "# the local server\n"
        "[providers.local]\n"
        'kind = "openai"\n'
        'base_url = "http://127.0.0.1:8080/v1"\n'
        "timeout = 30.0  # slow box\n"
        "\n"
        "[compaction]\n"
        "enabled = false\n"
        "\n"
        "[[models]]\n"
        'id = "local/qwen"\n'
    )


def test_a_new_model_line_goes_after_the_top_level_keys_and_a_new_table_at_the_end() -> None:
    text = '# header\nmode = "read_only"\n\n# about compaction\n[compaction]\nenabled = false'
    table = ProviderTable("box", "openai", "http://h/v1", "BOX_API_KEY")
    out = render(Existing(NO_FILE, text, tomllib.loads(text)), "box/m", table, False)
    assert out.text.startswith('# header\nmode = "read_only"\nmodel = "box/m"\n\n# about compaction\n[compaction]')
    assert out.text.endswith(
        'enabled = false\n\n[providers.box]\nkind = "openai"\nbase_url = "http://h/v1"\napi_key_env = "BOX_API_KEY"\n'
    )


def test_a_layout_that_cannot_be_edited_in_place_is_rewritten_from_its_data() -> None:
    text = '# inline\nproviders = { local = { kind = "openai", timeout = 5.0 } }\nmodels = [{ id = "local/a" }]\n'
    table = ProviderTable("local", "openai", "http://h/v1", None)
    out = render(Existing(NO_FILE, text, tomllib.loads(text)), "local/b", table, True)
    assert out.comments_lost
    assert tomllib.loads(out.text) == {
        "model": "local/b",
        "providers": {"local": {"kind": "openai", "timeout": 5.0, "base_url": "http://h/v1"}},
        "models": [{"id": "local/a"}, {"id": "local/b"}],
    }


def test_a_new_file_says_what_it_is_and_holds_no_key() -> None:
    out = render(
        Existing(NO_FILE, None), "local/m", ProviderTable("local", "openai", "http://h/v1", "LOCAL_API_KEY"), True
    )
    assert out.text.startswith("# ama's configuration") and not out.comments_lost
    assert tomllib.loads(out.text)["providers"]["local"]["api_key_env"] == "LOCAL_API_KEY"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'model = "a/b"\n[providers.x\nkind = "openai"\n', "line 2"),
        (b"mode = 'nope'\n", "mode must be one of"),
        (b"unknown_key = 1\n", "unknown_key"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_config_that_does_not_parse_is_an_error_naming_the_problem(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(content)
    with pytest.raises(SetupError, match=expected) as caught:
        read_existing(path)
    assert caught.value.code == 2 and "not changed" in str(caught.value)
    assert path.read_bytes() == content


def test_a_missing_config_or_a_directory(tmp_path: Path) -> None:
    assert read_existing(tmp_path / "none.toml").text is None
    with pytest.raises(SetupError, match="directory"):
        read_existing(tmp_path)


def test_a_value_holding_a_unicode_line_break_survives_a_write(tmp_path):
    """TOML lines end at \\n only: a NEL or LINE SEPARATOR inside a string (hypothesis found \\x85 in a model
    name) must not split the line it is on."""
    from ama_acp.config import parse_config

    text = 'model = "a/a"\n[[models]]\nid = "a/a"\ncontext_window = 1\nname = "x\u0085y\u2028z"\n'
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    from ama_acp.setup import write as setup_write

    patched = setup_write._patch(text, {}, "b/b", None, False)
    assert patched is not None and parse_config(patched).model == "b/b"
    assert 'name = "x\u0085y\u2028z"' in patched
