"""How providers fail: credentials, rate limits, server errors, timeouts, broken streams. What only needs a
canned answer (a status, a body, a header) runs over httpx.MockTransport (`llm`); timeouts, dropped connections
and refused connections run over real HTTP (`server`)."""

from __future__ import annotations

import logging
import socket
import time
from contextlib import aclosing
from email.utils import formatdate
from typing import Any

import anyio
import pytest

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.providers.base import Failure, Finished, ModelRequest, Provider, ProviderEvent, Retrying, TextDelta
from ama_acp.providers.registry import build_http_provider
from ama_acp.providers.retry import RetryPolicy, parse_retry_after
from ama_acp.providers.settings import ProviderSettings
from tests.support.llm_server import LLMServer, collect, llm_server_fixture
from tests.support.mock_llm import MockLLM

server = pytest.fixture(name="server")(llm_server_fixture)


@pytest.fixture(name="llm")
def _llm() -> MockLLM:
    return MockLLM()


KEY = "sk-secret-key-0123456789"
REQUEST = ModelRequest(model="m", system="", messages=[UserMessage([TextPart("hi")])])
KINDS = ["openai", "anthropic"]


def make(
    server: LLMServer | MockLLM, kind: str, *, retries: int = 2, timeout: float = 5.0, base: float = 0.01, **kw: Any
) -> Provider:
    url = server.openai_url if kind == "openai" else server.anthropic_url
    kw.setdefault("name", kind)
    retry = RetryPolicy(max_retries=retries, backoff_base=base)
    transport = getattr(server, "transport", None)  # a MockLLM's; LLMServer is real HTTP
    settings = ProviderSettings(base_url=url, api_key=KEY, timeout=timeout, retry=retry, transport=transport, **kw)
    return build_http_provider(kind, settings)


def run(server: LLMServer | MockLLM, kind: str, **kw: Any) -> list[ProviderEvent]:
    p = make(server, kind, **kw)
    return collect(lambda: p.stream(REQUEST))


@pytest.mark.parametrize(("kind", "env"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_401_names_the_env_var_and_never_the_key(llm, kind, env, caplog):
    caplog.set_level(logging.DEBUG)
    # Some servers echo the rejected key; it must not come through.
    llm.enqueue({"status": 401, "message": f"Incorrect API key provided: {KEY}"})
    events = run(llm, kind)
    assert len(events) == 1 and isinstance(events[0], Failure)
    failure = events[0]
    assert failure.kind == "auth" and failure.status == 401
    assert f"Set {env} (or api_key_env in the config) and restart." in failure.message
    assert KEY not in failure.message and KEY not in caplog.text
    assert "Incorrect API key provided" in failure.message
    assert len(llm.requests) == 1  # never retried


def test_401_for_a_configured_provider_names_its_variable(llm):
    llm.enqueue({"status": 403})
    events = run(llm, "openai", name="local", api_key_env="LOCAL_LLM_KEY")
    assert isinstance(events[0], Failure) and events[0].kind == "auth"
    assert "Set LOCAL_LLM_KEY and restart." in events[0].message
    assert "local" in events[0].message


def test_401_without_a_key_says_one_is_needed(llm):
    llm.enqueue({"status": 401})
    settings = ProviderSettings(name="openai", base_url=llm.openai_url, api_key=None, transport=llm.transport)
    p = build_http_provider("openai", settings)
    events = collect(lambda: p.stream(REQUEST))
    assert isinstance(events[0], Failure)
    assert "needs an API key" in events[0].message and "OPENAI_API_KEY" in events[0].message
    assert "authorization" not in llm.requests[0].headers


@pytest.mark.parametrize("kind", KINDS)
def test_400_is_a_bad_request_with_the_providers_text(llm, kind):
    llm.enqueue({"status": 400, "message": "model 'nope' does not exist"})
    events = run(llm, kind)
    assert events == [events[0]] and isinstance(events[0], Failure)
    assert events[0].kind == "bad_request" and events[0].status == 400
    assert "model 'nope' does not exist" in events[0].message


@pytest.mark.parametrize("kind", KINDS)
def test_429_with_retry_after_then_success(llm, kind):
    llm.enqueue({"status": 429, "retry_after": "0.3"}, {"text": "made it"})
    start = time.monotonic()
    events = run(llm, kind, base=5.0)  # the backoff would be 5 s: Retry-After must win
    assert isinstance(events[0], Retrying)
    assert [e for e in events if isinstance(e, Retrying)] == [Retrying(attempt=1, delay=0.3, reason=events[0].reason)]
    assert "429" in events[0].reason
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "made it"
    assert isinstance(events[-1], Finished)
    gap = llm.requests[1].time - llm.requests[0].time
    assert 0.3 <= gap < 2.0 and time.monotonic() - start < 3.0


def test_quota_429_is_not_retried(llm):
    body = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    llm.enqueue({"status": 429, "body": body})
    events = run(llm, "openai")
    assert (
        len(events) == 1
        and isinstance(events[0], Failure)
        and events[0].kind == "rate_limit"
        and "quota" in events[0].message
    )


@pytest.mark.parametrize(("kind", "status"), [("openai", 500), ("anthropic", 529), ("openai", 503)])
def test_server_errors_exhaust_retries(llm, kind, status):
    llm.enqueue(*[{"status": status}] * 3)
    events = run(llm, kind, retries=2)
    assert [e.attempt for e in events if isinstance(e, Retrying)] == [1, 2]
    failure = events[-1]
    assert isinstance(failure, Failure) and failure.kind == "server" and failure.status == status
    assert "Gave up after 2 retries" in failure.message
    assert len(llm.requests) == 3


def test_backoff_grows(llm):
    llm.enqueue(*[{"status": 502}] * 4)
    events = run(llm, "openai", retries=3, base=0.02)
    delays = [e.delay for e in events if isinstance(e, Retrying)]
    assert len(delays) == 3
    for n, delay in enumerate(delays):
        assert 0.75 * 0.02 * 2**n <= delay <= 0.02 * 2**n


@pytest.mark.parametrize("kind", KINDS)
def test_hanging_server_times_out_retries_then_fails(server, kind):
    server.enqueue({"hang": 5}, {"hang": 5})
    start = time.monotonic()
    events = run(server, kind, retries=1, timeout=0.3)
    assert time.monotonic() - start < 3.0
    assert isinstance(events[0], Retrying) and "timed out" in events[0].reason
    assert isinstance(events[-1], Failure) and events[-1].kind == "timeout"
    assert "Gave up after 1 retry." in events[-1].message


def test_slow_stream_mid_body_times_out(server):
    server.enqueue({"text": "slow", "chunk_size": 1, "delay": 1.0}, {"text": "fast"})
    events = run(server, "openai", retries=1, timeout=0.3)
    assert any(isinstance(e, Retrying) for e in events)
    assert isinstance(events[-1], Finished)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("clean", [False, True])
def test_broken_stream_is_retried(server, kind, clean):
    server.enqueue({"text": "first attempt text", "break_after": 3, "clean_eof": clean}, {"text": "complete"})
    events = run(server, kind)
    retry, retrying = next((i, e) for i, e in enumerate(events) if isinstance(e, Retrying))
    assert retrying.attempt == 1
    after = events[retry + 1 :]
    assert "".join(e.text for e in after if isinstance(e, TextDelta)) == "complete"
    assert isinstance(events[-1], Finished)


def test_broken_stream_every_time_fails_as_stream(server):
    server.enqueue(*[{"text": "abc", "break_after": 2}] * 3)
    events = run(server, "anthropic")
    assert isinstance(events[-1], Failure) and events[-1].kind == "stream" and "broke off" in events[-1].message


def test_connection_refused(server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    settings = ProviderSettings(
        name="openai",
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=KEY,
        retry=RetryPolicy(max_retries=1, backoff_base=0.01),
    )
    p = build_http_provider("openai", settings)
    events = collect(lambda: p.stream(REQUEST))
    assert isinstance(events[0], Retrying)
    assert isinstance(events[-1], Failure)
    assert events[-1].kind == "server" and "Cannot reach" in events[-1].message and KEY not in events[-1].message


def test_exhausted_script_says_so(llm):
    events = run(llm, "openai", retries=0)
    assert (
        isinstance(events[-1], Failure) and events[-1].kind == "server" and "ran out of replies" in events[-1].message
    )


def test_consumer_can_stop_early(server):
    server.enqueue({"text": "a long answer " * 50, "chunk_size": 3, "delay": 0.01}, {"text": "next"})
    p = make(server, "openai")

    async def main():
        with anyio.fail_after(5):
            async with aclosing(p.stream(REQUEST)) as stream:  # what the agent loop does on cancel
                async for event in stream:
                    if isinstance(event, TextDelta):
                        break
            # The provider stays usable after an abandoned stream.
            return [e async for e in p.stream(REQUEST)]

    events = anyio.run(main)
    assert isinstance(events[-1], Finished)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "next"


def test_retry_after_parsing():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "120"}) == 60.0  # capped
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    now = time.time()
    in_ten = parse_retry_after({"retry-after": formatdate(now + 10, usegmt=True)}, now=now)
    assert in_ten is not None and 9 <= in_ten <= 10
    assert parse_retry_after({"retry-after": formatdate(now - 100, usegmt=True)}, now=now) == 0.0


def test_unknown_kind():
    from ama_acp.config import ConfigError

    with pytest.raises(ConfigError, match="not one of"):
        build_http_provider("gemini", ProviderSettings(name="g"))


def test_importing_providers_does_not_import_httpx():
    import subprocess
    import sys

    code = (
        "import sys, ama_acp.providers.openai, ama_acp.providers.anthropic, ama_acp.providers.registry;"
        "print('httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- Accepted: the moment a provider bills a request (docs/context.md "Cancelled requests count") -------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_stream_is_marked_accepted_before_its_first_event_and_an_error_status_never(llm, kind):
    from ama_acp.providers.base import Accepted

    llm.enqueue({"text": "hi"})
    p = make(llm, kind)
    events = collect(lambda: p.stream(REQUEST), accepted=True)
    assert isinstance(events[0], Accepted) and isinstance(events[-1], Finished)
    assert sum(isinstance(e, Accepted) for e in events) == 1
    llm.enqueue({"status": 400, "message": "bad"})
    events = collect(lambda: make(llm, kind, retries=0).stream(REQUEST), accepted=True)
    assert [type(e) for e in events] == [Failure]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_each_attempt_that_streamed_is_accepted_once_a_retry_included(server, kind):
    from ama_acp.providers.base import Accepted

    server.enqueue({"text": "hello there", "break_after": 2}, {"status": 503}, {"text": "again"})
    events = collect(lambda: make(server, kind, retries=2).stream(REQUEST), accepted=True)
    kinds = [type(e).__name__ for e in events if not isinstance(e, TextDelta)]
    assert kinds == ["Accepted", "Retrying", "Retrying", "Accepted", "Finished"]
    assert sum(isinstance(e, Accepted) for e in events) == 2


def test_the_settings_never_show_the_key():
    settings = ProviderSettings(name="openai", api_key=KEY)
    assert KEY not in repr(settings) and KEY not in repr(settings.for_dialect("openai"))
