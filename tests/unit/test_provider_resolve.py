"""Model id + config + environment → provider (providers/resolve.py), over real HTTP to a local server.

The built-in providers' endpoints and key variables come from one table (providers/endpoints.py); these
tests check that every path that needs them (building, the start-up model, the credentials check, the hint
in a 401) reads the same names.
"""

from __future__ import annotations

import pytest

from ama_acp.config import Config, ProviderConfig, parse_config
from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.providers.base import Failure, Finished, ModelRequest, ProviderEvent, TextDelta
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS
from ama_acp.providers.resolve import FALLBACK_MODEL, choose_model, has_credentials, provider_for_model
from tests.support.llm_server import collect, llm_server_fixture

server = pytest.fixture(name="server")(llm_server_fixture)

REQUEST = ModelRequest(model="m", system="", messages=[UserMessage([TextPart("hi")])])
NO_RETRY = "max_retries = 0\ntimeout = 5.0\n"


def _stream(cfg: Config, model_id: str, env: dict[str, str]) -> list[ProviderEvent]:
    provider = provider_for_model(cfg, model_id, env=env)
    return collect(lambda: provider.stream(REQUEST))


def test_a_builtin_compat_provider_reads_its_own_key_variable(server):
    cfg = parse_config(f'[providers.deepseek]\nbase_url = "{server.openai_url}"\n{NO_RETRY}')
    server.enqueue({"text": "hello"})
    events = _stream(cfg, "deepseek/deepseek-chat", {"DEEPSEEK_API_KEY": "sk-deep-0123456789"})
    assert isinstance(events[-1], Finished)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello"
    assert server.requests[0].headers["authorization"] == "Bearer sk-deep-0123456789"


def test_the_base_url_variable_of_a_home_provider_overrides_its_public_endpoint(server):
    server.enqueue({"text": "local"})
    env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": "sk-open-0123456789"}
    events = _stream(Config(), "openai/gpt-5", env)  # no [providers.openai]: all from the table
    assert isinstance(events[-1], Finished)
    assert server.requests[0].headers["authorization"] == "Bearer sk-open-0123456789"


@pytest.mark.parametrize(("provider", "url_attr"), [("openai", "openai_url"), ("anthropic", "anthropic_url")])
def test_a_401_names_the_home_providers_variable_from_the_table(server, provider, url_attr):
    cfg = parse_config(
        f'[providers.{provider}]\nkind = "{provider}"\nbase_url = "{getattr(server, url_attr)}"\n{NO_RETRY}'
    )
    variable = BUILTIN_ENDPOINTS[provider].api_key_env
    server.enqueue({"status": 401})
    events = _stream(cfg, f"{provider}/m", {variable: "a-key-the-server-refuses"})
    assert isinstance(events[-1], Failure) and events[-1].kind == "auth"
    assert f"Set {variable} (or api_key_env in the config) and restart." in events[-1].message
    # With no key at all, no request is made: the turn says where the key goes.
    before = len(server.requests)
    events = _stream(cfg, f"{provider}/m", {})
    assert isinstance(events[-1], Failure) and events[-1].kind == "auth" and len(server.requests) == before
    assert variable in events[-1].message and "ama setup" in events[-1].message


def test_a_401_for_a_compat_provider_names_its_variable_without_the_config_hint(server):
    cfg = parse_config(f'[providers.gemini]\nbase_url = "{server.openai_url}"\n{NO_RETRY}')
    server.enqueue({"status": 401})
    events = _stream(cfg, "gemini/gemini-2.5-pro", {"GEMINI_API_KEY": "g-0123456789"})
    assert isinstance(events[-1], Failure) and "Set GEMINI_API_KEY and restart." in events[-1].message


def test_an_unknown_provider_fails_with_the_list_of_builtin_ones():
    events = _stream(Config(), "nowhere/m", {})
    assert len(events) == 1 and isinstance(events[0], Failure) and events[0].kind == "config"
    for name in [*BUILTIN_ENDPOINTS, "scripted"]:
        assert name in events[0].message
    assert "[providers.nowhere]" in events[0].message


def test_a_model_id_without_a_provider_is_a_config_failure():
    events = _stream(Config(), "gpt-5", {})
    assert isinstance(events[0], Failure) and events[0].kind == "config" and "provider/model" in events[0].message


@pytest.mark.parametrize(
    ("env", "model", "why"),
    [
        ({"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}, "anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY is set"),
        ({"OPENAI_API_KEY": "o"}, "openai/gpt-5", "OPENAI_API_KEY is set"),
        ({}, FALLBACK_MODEL, None),
    ],
)
def test_the_start_up_model_follows_the_key_variables_of_the_table(env, model, why):
    chosen, reason = choose_model(Config(), None, env)
    assert chosen == model
    if why:
        assert reason.startswith(why)


def test_has_credentials_reads_each_providers_variable():
    assert has_credentials(Config(), "deepseek", {"DEEPSEEK_API_KEY": "k"})
    assert not has_credentials(Config(), "deepseek", {"OPENAI_API_KEY": "k"})
    assert has_credentials(Config(), "anthropic", {"ANTHROPIC_API_KEY": "k"})
    assert has_credentials(Config(), "scripted", {})
    assert not has_credentials(Config(), "nowhere", {})
    local = Config(providers={"local": ProviderConfig(base_url="http://127.0.0.1:1/v1")})
    assert has_credentials(local, "local", {})  # a configured endpoint without a key needs none
