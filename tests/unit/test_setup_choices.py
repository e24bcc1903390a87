"""`ama setup`'s checks of what a person types or a script passes: URLs, provider names, keys, model ids."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS
from ama_acp.setup import choices as c


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("  https://example.com/v1/  ", "https://example.com/v1"),
        ("http://[::1]:11434/v1", "http://[::1]:11434/v1"),
        ("http://localhost", "http://localhost"),
    ],
)
def test_a_base_url_is_accepted_and_normalised(text: str, expected: str) -> None:
    assert c.check_url(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("127.0.0.1:8080/v1", "http:// or https://"),
        ("ftp://example.com", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("http:///v1", "no host"),
        ("http://user:sk-secret@example.com/v1", "user or password"),
        ("http://example.com/v1?x=1", "query or fragment"),
        ("http://example.com/v1#frag", "query or fragment"),
        ("http://example.com:99999/v1", "not a URL"),
        ("http://example.com:port/v1", "not a URL"),
        ("http://exa mple.com/v1", "spaces"),
        ("http://example.com/\x1b[2J", "control"),
        ("http://" + "a" * 3000 + ".com", "too long"),
    ],
)
def test_a_bad_base_url_says_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(c.SetupError, match=re.escape(why)) as caught:
        c.check_url(text)
    assert "sk-secret" not in str(caught.value)


@given(st.text(max_size=200))
def test_any_text_is_a_url_or_a_setup_error(text: str) -> None:
    try:
        url = c.check_url(text)
    except c.SetupError:
        return
    parts = urlsplit(url)
    assert parts.scheme in ("http", "https") and parts.hostname
    assert parts.username is None and parts.password is None and not parts.query and not parts.fragment
    assert not url.endswith("/") and not any(ch.isspace() for ch in url)


@given(st.from_regex(r"https?://[a-z0-9.-]{1,30}(:[0-9]{1,4})?(/[a-zA-Z0-9._~-]{0,12}){0,4}", fullmatch=True))
def test_ordinary_base_urls_are_accepted(url: str) -> None:
    host = urlsplit(url).hostname
    if host:  # "http://./" style hosts are still hosts; only an empty one is refused
        assert c.check_url(url) == url.rstrip("/")


@pytest.mark.parametrize("name", ["local", "vllm-2", "my_server", "0llama", "a" * 32])
def test_a_provider_name(name: str) -> None:
    assert c.check_name(f" {name} ") == name


@pytest.mark.parametrize("name", ["", "Local", "my server", "a/b", "ü", "a" * 33, *BUILTIN_ENDPOINTS, "scripted"])
def test_a_bad_or_taken_provider_name(name: str) -> None:
    with pytest.raises(c.SetupError):
        c.check_name(name)


@given(st.text(max_size=40))
def test_any_name_is_accepted_only_in_the_pinned_form(text: str) -> None:
    try:
        name = c.check_name(text)
    except c.SetupError:
        return
    assert re.fullmatch(r"[a-z0-9_-]{1,32}", name) and name not in BUILTIN_ENDPOINTS
    # ...and its key variable is always an environment variable name.
    assert re.fullmatch(r"[A-Z_][A-Z0-9_]*_API_KEY", c.key_variable_for(name))


def test_key_variables_of_custom_providers() -> None:
    assert c.key_variable_for("local") == "LOCAL_API_KEY"
    assert c.key_variable_for("my-vllm") == "MY_VLLM_API_KEY"
    assert c.key_variable_for("8080") == "AMA_8080_API_KEY"


def test_a_key_is_trimmed_and_must_fit_a_header() -> None:
    assert c.check_key("  sk-abc123\n") == "sk-abc123"
    for bad in ("", "   ", "sk abc", "sk-\x00", "sk-é", "x" * (c.MAX_KEY + 1)):
        with pytest.raises(c.SetupError) as caught:
            c.check_key(bad)
        assert bad.strip() == "" or bad.strip() not in str(caught.value)  # never quoted back


@pytest.mark.parametrize(
    ("provider", "typed", "expected"),
    [
        ("openai", "gpt-4.1", "openai/gpt-4.1"),
        ("openai", "openai/gpt-4.1", "openai/gpt-4.1"),
        ("local", "Qwen/Qwen3-8B", "local/Qwen/Qwen3-8B"),
        ("local", "qwen2.5-coder:7b", "local/qwen2.5-coder:7b"),
        ("local", "local/x", "local/x"),
        ("local", "openai/gpt-4.1", "local/openai/gpt-4.1"),  # a custom server's names are its own
    ],
)
def test_model_ids(provider: str, typed: str, expected: str) -> None:
    option = (
        c.builtin_option(provider, {}) if provider in BUILTIN_ENDPOINTS else c.custom_option(provider, "http://h", None)
    )
    assert c.model_id(option, typed) == expected


def test_a_built_in_providers_model_named_after_another_provider_is_a_mistake() -> None:
    with pytest.raises(c.SetupError, match="model of anthropic"):
        c.model_id(c.builtin_option("openai", {}), "anthropic/claude-sonnet-4-5")
    for bad in ("", "a b", "x\ny", "x\x1b[2J", "x" * 300):
        with pytest.raises(c.SetupError):
            c.model_id(c.builtin_option("openai", {}), bad)


def test_the_builtin_list_starts_with_anthropic_and_openai_and_has_every_endpoint() -> None:
    names = c.builtin_names()
    assert names[:2] == ["anthropic", "openai"] and sorted(names) == sorted(BUILTIN_ENDPOINTS)


def test_a_builtin_provider_is_checked_where_ama_would_call_it() -> None:
    assert c.builtin_option("openai", {}).base_url == "https://api.openai.com/v1"
    assert c.builtin_option("openai", {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/"}).base_url == "http://127.0.0.1:9/v1"
    assert (
        c.builtin_option("deepseek", {"OPENAI_BASE_URL": "http://x"}).base_url == BUILTIN_ENDPOINTS["deepseek"].base_url
    )
    with pytest.raises(c.SetupError, match="OPENAI_BASE_URL"):
        c.builtin_option("openai", {"OPENAI_BASE_URL": "nonsense"})
    assert c.builtin_option("openai", {}).key_page and c.custom_option("x", "http://h", None).key_page is None


def test_undecodable_argv_in_a_url_is_refused() -> None:
    with pytest.raises(c.SetupError):
        c.check_url("http://h\udcff.example/v1")
