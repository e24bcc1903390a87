"""What a running server states of its window (providers/model_list.py readers, providers/window_probe.py):
each vendor's documented answer read, anything else — hostile, broken, absurd — leaving the window unknown,
never an exception; the requests asked in their order, only of the base URL's host, within a bound."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.config import Config, ModelEntry, Price, ProviderConfig
from ama_acp.providers import model_list as ml
from ama_acp.providers import window_probe as wp

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
# Bodies around each vendor's shape: the right keys with any value, and anything at all.
WINDOWS = st.one_of(st.integers(), st.floats(), st.text(max_size=12), st.booleans(), st.none(), JSON)
BODIES = st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda v: json.dumps(v).encode()),
    WINDOWS.map(lambda v: json.dumps({"default_generation_settings": {"n_ctx": v}}).encode()),
    WINDOWS.map(lambda v: json.dumps({"data": [{"id": "m", "max_model_len": v, "loaded_context_length": v}]}).encode()),
    WINDOWS.map(lambda v: json.dumps({"models": [{"model": "m", "context_length": v}]}).encode()),
    st.text(max_size=60).map(lambda t: json.dumps({"parameters": f"num_ctx {t}"}).encode()),
    JSON.map(lambda v: json.dumps({"data": [{"id": "m", "context_length": 8, "pricing": v}]}).encode()),
)
READERS: list[Callable[[bytes], object]] = [
    lambda b: ml.listed_window(b, "m"),
    lambda b: ml.listed_price(b, "m"),
    ml.props_window,
    lambda b: ml.lmstudio_window(b, "m"),
    ml.ollama_show_window,
    lambda b: ml.ollama_ps_window(b, "m"),
]


@given(BODIES)
def test_no_answer_raises_and_only_a_sane_int_is_a_window(body: bytes) -> None:
    for read in READERS:
        got = read(body)
        if isinstance(got, Price):
            assert 0 <= got.input <= 1000 and 0 <= got.output <= 1000
        else:
            assert got is None or (type(got) is int and 0 < got <= ml.MAX_CONTEXT_LENGTH)


@pytest.mark.parametrize("value", [0, -1, ml.MAX_CONTEXT_LENGTH + 1, 2**64, 8192.0, "8192", True, None, [8192]])
def test_nonsense_is_no_window(value: object) -> None:
    assert ml.props_window(json.dumps({"default_generation_settings": {"n_ctx": value}}).encode()) is None
    assert ml.listed_window(json.dumps({"data": [{"id": "m", "max_model_len": value}]}).encode(), "m") is None


def test_each_vendors_answer() -> None:
    assert (
        ml.listed_window(b'{"data": [{"id": "x", "max_model_len": 1}, {"id": "m", "max_model_len": 8192}]}', "m")
        == 8192
    )
    # llama.cpp's model list states the training window: not the one it runs with, so not read at run time
    assert ml.listed_window(b'{"data": [{"id": "m", "meta": {"n_ctx_train": 40960}}]}', "m") is None
    assert ml.props_window(b'{"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}') == 4096
    lms = b'{"data": [{"id": "m", "max_context_length": 131072, "loaded_context_length": 16384}]}'
    assert ml.lmstudio_window(lms, "m") == 16384
    assert (
        ml.lmstudio_window(b'{"data": [{"id": "m", "state": "not-loaded", "max_context_length": 131072}]}', "m") is None
    )
    show = {
        "parameters": 'stop "<|im_end|>"\nnum_ctx                        32768\n',
        "model_info": {"a.context_length": 1},
    }
    assert ml.ollama_show_window(json.dumps(show).encode()) == 32768
    # without num_ctx in its parameters, the model's maximum is not the window Ollama allocates
    assert ml.ollama_show_window(b'{"parameters": "", "model_info": {"qwen2.context_length": 32768}}') is None
    assert (
        ml.ollama_ps_window(b'{"models": [{"name": "m:latest", "model": "m:latest", "context_length": 4096}]}', "m")
        == 4096
    )
    assert ml.ollama_ps_window(b'{"models": [{"model": "m:7b", "context_length": 4096}]}', "m") is None


def test_openrouters_price_per_token_becomes_per_million() -> None:
    body = {"data": [{"id": "m", "context_length": 8, "pricing": {"prompt": "0.000003", "completion": "0.000015"}}]}
    assert ml.listed_price(json.dumps(body).encode(), "m") == Price(3.0, 15.0)
    body["data"][0]["pricing"] = {"prompt": "-1", "completion": "0"}
    assert ml.listed_price(json.dumps(body).encode(), "m") is None


def _config(base_url: str, key_env: str | None = None, window: int | None = None) -> Config:
    return Config(
        providers={"local": ProviderConfig(base_url=base_url, api_key_env=key_env)},
        models=[ModelEntry(id="local/m", context_window=window)],
    )


def test_the_target_is_the_providers_own_url_and_key() -> None:
    t = wp.target(_config("http://127.0.0.1:9/v1/", "K"), "local/m", {"K": "secret"})
    assert t == wp.Target("http://127.0.0.1:9/v1", "m", "secret")
    assert wp.target(_config("http://h/v1", "K"), "local/m", {}) is None  # no key: nothing asked
    assert wp.target(Config(), "anthropic/claude-x", {"ANTHROPIC_API_KEY": "k"}) is None  # not OpenAI-compatible
    assert wp.target(Config(), "scripted/demo", {}) is None and wp.target(Config(), "nonsense", {}) is None


def _learn(t: wp.Target, answers: dict[str, tuple[int, bytes] | Exception]) -> tuple[wp.Learnt, list[str]]:
    asked: list[str] = []

    async def fetch(method: str, url: str, payload: bytes | None) -> tuple[int, bytes]:
        asked.append(f"{method} {url}")
        answer = answers.get(url, (404, b""))
        if isinstance(answer, Exception):
            raise answer
        return answer

    return anyio.run(wp.learn, fetch, t), asked


def test_asked_in_order_of_the_base_urls_host_only() -> None:
    learnt, asked = _learn(wp.Target("http://h:1/v1", "m", None), {})
    assert asked == [
        "GET http://h:1/v1/models",
        "GET http://h:1/props",
        "GET http://h:1/api/v0/models",
        "POST http://h:1/api/show",
        "GET http://h:1/api/ps",
    ]
    assert learnt.window is None and learnt.text().startswith("unknown: /v1/models: HTTP 404; /props: HTTP 404")


def test_a_cloud_host_is_asked_its_model_list_only() -> None:
    body = json.dumps({"data": [{"id": "m", "context_length": 200000, "pricing": {"prompt": "0", "completion": "0"}}]})
    learnt, asked = _learn(wp.Target("https://openrouter.ai/api/v1", "m", "k"), {})
    assert asked == ["GET https://openrouter.ai/api/v1/models"] and learnt.window is None
    learnt, _ = _learn(
        wp.Target("https://openrouter.ai/api/v1", "m", "k"),
        {"https://openrouter.ai/api/v1/models": (200, body.encode())},
    )
    assert learnt == wp.Learnt(200000, "/api/v1/models", price=Price(0.0, 0.0))
    assert learnt.text() == "learnt from /api/v1/models: 200000"


def test_the_first_usable_answer_wins_and_a_failure_is_a_reason() -> None:
    answers: dict[str, tuple[int, bytes] | Exception] = {
        "http://h/v1/models": wp.ProbeFailed("no answer within 2 s"),
        "http://h/props": (200, b'{"default_generation_settings": {"n_ctx": 0}}'),
        "http://h/api/v0/models": (200, b'{"data": [{"id": "m", "loaded_context_length": 8192}]}'),
    }
    learnt, asked = _learn(wp.Target("http://h/v1", "m", None), answers)
    assert learnt.window == 8192 and learnt.source == "/api/v0/models" and len(asked) == 3


def test_all_of_it_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wp, "TOTAL_TIMEOUT", 0.05)

    async def fetch(method: str, url: str, payload: bytes | None) -> tuple[int, bytes]:
        await anyio.sleep_forever()
        raise AssertionError

    learnt = anyio.run(wp.learn, fetch, wp.Target("http://h/v1", "m", None))
    assert learnt.window is None and learnt.why == "no answer within 0.05 s"


def test_a_huge_body_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    monkeypatch.setattr(wp, "MAX_BODY", 1000)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=b'{"default_generation_settings": {"n_ctx": 8192}, "x": "' + b"y" * 5000 + b'"}'
        )

    learnt = anyio.run(wp.learn_window, wp.Target("http://h/v1", "m", None), httpx.MockTransport(handler))
    assert learnt.window is None and "/props: an answer over" in learnt.why


def test_the_doctors_line_for_a_configured_or_catalog_window() -> None:
    assert wp.describe_window(_config("http://h/v1", window=50000), "local/m", {}) == "50000 (configured)"
    assert wp.describe_window(Config(), "openai/gpt-4.1", {"OPENAI_API_KEY": "k"}) == "1047576 (the catalog)"
    assert wp.describe_window(_config("http://h/v1"), "local/m", {}, ask=False).startswith(
        "unknown: its server not asked"
    )


@given(st.lists(st.tuples(st.sampled_from([200, 200, 200, 301, 404, 500]), BODIES), min_size=5, max_size=5))
def test_whatever_the_server_answers_learn_returns_a_sane_window_or_a_reason(answers: list[tuple[int, bytes]]) -> None:
    urls = ["http://h/v1/models", "http://h/props", "http://h/api/v0/models", "http://h/api/show", "http://h/api/ps"]
    learnt, _ = _learn(wp.Target("http://h/v1", "m", None), dict(zip(urls, answers, strict=True)))
    if learnt.window is None:
        assert learnt.why and learnt.text().startswith("unknown: ")
    else:
        assert type(learnt.window) is int and 0 < learnt.window <= ml.MAX_CONTEXT_LENGTH and learnt.source
