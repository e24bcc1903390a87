"""Which TLS context ama's HTTP clients are built with (providers/tls.py: a provider's stream, `ama setup`'s key
check, `ama doctor`'s provider check): an https URL's the verified one, made once per process; a plain http URL's
(a local model server) one that trusts nothing, made without loading the CA bundle — and a request that ever reached
TLS with it fails closed."""

from __future__ import annotations

import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from ama_acp.config import Config, ProviderConfig
from ama_acp.providers import tls
from ama_acp.providers.base import ProviderEvent
from ama_acp.providers.failures import KeyHint
from ama_acp.providers.retry import RetryPolicy
from ama_acp.providers.settings import ProviderSettings
from ama_acp.providers.sse import SSEEvent
from ama_acp.providers.stream import HttpStream
from ama_acp.providers.tls import plain_http, untrusting_context
from ama_acp.session.manager import prepare_first_prompt
from tests.support.tls_certs import tls_server
from tests.support.web_server import WebServer


@pytest.mark.parametrize(
    ("url", "plain"),
    [
        ("http://127.0.0.1:11434/v1", True),
        ("HTTP://localhost:8080", True),
        ("https://api.openai.com/v1", False),
        ("HTTPS://example.test", False),
        ("", False),  # not known to be plain http: the verified context
        ("httpx://odd", False),
    ],
)
def test_only_a_plain_http_url_goes_without_the_verified_context(url: str, plain: bool) -> None:
    assert plain_http(url) is plain


def test_the_untrusting_context_requires_a_certificate_and_trusts_none() -> None:
    ctx = untrusting_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname
    assert ctx.get_ca_certs() == []
    assert ctx.cert_store_stats()["x509_ca"] == 0


def _client_context(url: str, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext | None:
    """The TLS context a model request to `url` is sent with: what HttpStream's POST gives httpcore's pool (the
    request itself fails: nothing listens there)."""
    import httpcore

    given: list[ssl.SSLContext] = []
    real = httpcore.AsyncConnectionPool.__init__

    def kept(self: httpcore.AsyncConnectionPool, *args: Any, **kw: Any) -> None:
        given.append(kw["ssl_context"])
        real(self, *args, **kw)

    monkeypatch.setattr(httpcore.AsyncConnectionPool, "__init__", kept)
    no_key = KeyHint(env=None, has_key=False)
    settings = ProviderSettings(name="p", base_url=url, timeout=2, retry=RetryPolicy(max_retries=0))
    http = HttpStream(settings, url=url + "/chat/completions", headers={}, key=no_key)

    async def send() -> None:
        async for _ in http.stream({}, _no_events):
            pass

    anyio.run(send)
    [context] = given
    return context


async def _no_events(batches: AsyncIterator[list[SSEEvent]]) -> AsyncGenerator[ProviderEvent, None]:
    none: tuple[ProviderEvent, ...] = ()
    async for _ in batches:
        pass
    for event in none:  # a parser that finds nothing: the request fails before it is read anyway
        yield event


def test_an_http_url_s_client_never_loads_the_ca_bundle_an_https_one_shares_the_verified_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verified = tls.ssl_context()
    made = _counting_verified(monkeypatch)
    plain = _client_context("http://127.0.0.1:9/v1", monkeypatch)
    assert made == [] and plain is None  # httpcore makes a context for an https connection only: none is made
    assert _client_context("https://127.0.0.1:9/v1", monkeypatch) is verified
    assert made == ["verified"]


@pytest.mark.parametrize(("base_url", "made"), [("http://127.0.0.1:9/v1", []), ("https://llm.example.test/v1", [1])])
def test_preparing_the_first_prompt_makes_the_verified_context_for_https_only(
    monkeypatch: pytest.MonkeyPatch, base_url: str, made: list[int]
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(tls, "ssl_context", lambda: calls.append(1))
    config = Config(providers={"local": ProviderConfig(kind="openai", base_url=base_url)})
    prepare_first_prompt(config, "local/some-model")
    assert calls == made


async def _get(verify: ssl.SSLContext, url: str) -> httpx.Response:
    async with httpx.AsyncClient(verify=verify, follow_redirects=True, trust_env=False, timeout=10) as client:
        return await client.get(url)


def test_a_redirect_from_http_to_https_with_the_untrusting_context_fails_closed(tmp_path: Path) -> None:
    """Even a client that followed redirects (the providers' do not) could not reach an https server with the
    plain-http context: the handshake fails on the certificate, though the same server is trusted by a client
    that knows its CA."""
    server_tls, ca = tls_server(tmp_path, "localhost")
    with WebServer(tls=server_tls) as secure, WebServer() as plain:
        secure.route("/v1/models", body=b"{}", content_type="application/json")
        target = secure.url("/v1/models", "localhost", scheme="https")
        plain.route("/v1/models", status=302, headers={"Location": target})
        trusting = ssl.create_default_context(cadata=ca)
        assert anyio.run(_get, trusting, target).status_code == 200  # the server is sound
        assert len(secure.requests) == 1
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            anyio.run(_get, untrusting_context(), plain.url("/v1/models", "localhost"))
        assert plain.hits == ["/v1/models"]
        assert len(secure.requests) == 1  # the redirected request never reached the https server


def _counting_verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    verified = tls.ssl_context()

    def counted() -> ssl.SSLContext:
        made.append("verified")
        return verified

    monkeypatch.setattr(tls, "ssl_context", counted)
    return made


def test_setup_s_key_check_loads_the_ca_bundle_only_for_an_https_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from ama_acp.setup.choices import ProviderOption
    from ama_acp.setup.verify import verify

    made = _counting_verified(monkeypatch)
    with WebServer() as plain:
        plain.route("/v1/models", body=b'{"data": [{"id": "m"}]}', content_type="application/json")
        option = ProviderOption("local", "Local", "openai", plain.url("/v1"), None, builtin=False)
        assert verify(option, None).ok
        assert plain.hits == ["/v1/models"] and made == []
    closed = ProviderOption("far", "Far", "openai", "https://127.0.0.1:9/v1", None, builtin=False)
    assert not verify(closed, None, timeout=2).ok  # nothing listens there: the check says so
    assert made == ["verified"]


def test_doctor_s_provider_check_loads_the_ca_bundle_only_for_an_https_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from ama_acp import doctor

    made = _counting_verified(monkeypatch)
    with WebServer() as plain:
        plain.route("/v1/models", body=b'{"data": [{"id": "m"}]}', content_type="application/json")
        fact = doctor.check_provider("local", ProviderConfig(kind="openai", base_url=plain.url("/v1")), {})
        assert fact.result == "ok" and plain.hits == ["/v1/models"] and made == []
    far = doctor.check_provider("far", ProviderConfig(kind="openai", base_url="https://127.0.0.1:9/v1"), {}, timeout=2)
    assert far.result != "ok"
    assert made == ["verified"]


# --- a certificate that fails verification ---------------------------------------------------------------------
# Named as such, with what a person can do about it (SSL_CERT_FILE for a private CA), by the provider's stream, the
# setup's key check and the doctor alike; never retried (it would fail the same) and never mistaken for a network
# failure. The servers below are sound: a client that trusts their test CA gets its answer.


@pytest.fixture(name="untrusted")
def _untrusted(tmp_path: Path) -> tuple[ssl.SSLContext, str]:
    return tls_server(tmp_path, "localhost")


def _refusal(url: str) -> httpx.ConnectError:
    """The error the verified context's client raises for `url`, as httpx reports it."""
    with pytest.raises(httpx.ConnectError) as caught:
        anyio.run(_get, tls.ssl_context(), url)
    return caught.value


def test_why_a_certificate_failed_is_found_under_httpx_s_wrapping(untrusted: tuple[ssl.SSLContext, str]) -> None:
    server_tls, ca = untrusted
    with WebServer(tls=server_tls) as secure:
        secure.route("/v1/models", body=b"{}", content_type="application/json")
        url = secure.url("/v1/models", "localhost", scheme="https")
        assert anyio.run(_get, ssl.create_default_context(cadata=ca), url).status_code == 200  # a sound server
        unknown_ca = _refusal(url)
        assert tls.certificate_failure(unknown_ca) == "unable to get local issuer certificate"
        trusting = ssl.create_default_context(cadata=ca)
        with pytest.raises(httpx.ConnectError) as other_name:  # the CA is trusted, the name is not the cert's
            anyio.run(_get, trusting, secure.url("/v1/models", "127.0.0.1", scheme="https"))
        assert "mismatch" in (tls.certificate_failure(other_name.value) or "").lower()
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    assert tls.certificate_failure(refused) is None
    looped = httpx.ConnectError("a chain that loops")
    looped.__context__ = RuntimeError("back")
    looped.__context__.__context__ = looped
    assert tls.certificate_failure(looped) is None


def test_a_provider_whose_certificate_fails_says_so_and_is_not_retried(untrusted: tuple[ssl.SSLContext, str]) -> None:
    from ama_acp.conversation.messages import TextPart, UserMessage
    from ama_acp.providers.base import Failure, ModelRequest, Retrying
    from ama_acp.providers.registry import build_http_provider
    from ama_acp.providers.retry import RetryPolicy
    from tests.support.llm_server import TlsLLMServer, collect

    server_tls, _ = untrusted
    with TlsLLMServer(server_tls) as llm:
        llm.enqueue({"text": "never read"})
        retry = RetryPolicy(max_retries=3, backoff_base=0.01)
        settings = ProviderSettings(name="secure", base_url=llm.openai_url, api_key="sk-test-0123456789", retry=retry)
        provider = build_http_provider("openai", settings)
        request = ModelRequest(model="m", system="", messages=[UserMessage([TextPart("hi")])])
        events = collect(lambda: provider.stream(request))
        assert not [e for e in events if isinstance(e, Retrying)] and len(events) == 1
        failure = events[0]
        assert isinstance(failure, Failure) and failure.kind == "server"
        assert failure.message.startswith(f"Cannot trust secure ({llm.openai_url}/chat/completions): its TLS")
        assert "unable to get local issuer certificate" in failure.message and "SSL_CERT_FILE" in failure.message
        assert "network" not in failure.message
        assert llm.requests == [] and llm.pending == 1  # the handshake failed: no request was read


def test_setup_s_key_check_and_the_doctor_name_a_certificate_that_fails(
    untrusted: tuple[ssl.SSLContext, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ama_acp import doctor
    from ama_acp.setup.choices import ProviderOption
    from ama_acp.setup.verify import verify

    server_tls, _ = untrusted
    with WebServer(tls=server_tls) as secure:
        secure.route("/v1/models", body=b'{"data": [{"id": "m"}]}', content_type="application/json")
        base = secure.url("/v1", "localhost", scheme="https")
        verdict = verify(ProviderOption("own", "Own", "openai", base, None, builtin=False), None)
        assert not verdict.ok and verdict.message.startswith("cannot trust localhost:")
        assert "unable to get local issuer certificate" in verdict.message and "SSL_CERT_FILE" in verdict.message
        fact = doctor.check_provider("own", ProviderConfig(kind="openai", base_url=base), {})
        assert fact.result == "untrusted" and fact.detail == "unable to get local issuer certificate"
        assert "SSL_CERT_FILE" in doctor._provider_text(fact)
        config = tmp_path / "config.toml"
        config.write_text(f'model = "own/m"\n[providers.own]\nkind = "openai"\nbase_url = "{base}"\n')
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
        assert doctor.run_doctor(["--config", str(config)], env) == 1
        out = capsys.readouterr().out
        assert len([line for line in out.splitlines() if "SSL_CERT_FILE" in line]) == 1  # said on the provider's line
        assert "a prompt would not work: ama does not trust the TLS certificate of its provider 'own'" in out
        assert secure.hits == []


def test_the_verified_context_trusts_the_ca_a_person_names_as_httpx_s_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made without httpx now (a model request no longer imports it), the same way: SSL_CERT_FILE, else
    SSL_CERT_DIR, else certifi's bundle."""
    _, ca = tls_server(tmp_path, "localhost")
    pem = tmp_path / "ca.pem"
    pem.write_text(ca, encoding="utf-8")
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    named = tls.ssl_context.__wrapped__()
    assert len(named.get_ca_certs()) == 1 and named.verify_mode == ssl.CERT_REQUIRED and named.check_hostname
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    bundle = tls.ssl_context.__wrapped__()
    assert len(bundle.get_ca_certs()) > 50  # certifi's
    assert {c["serialNumber"] for c in bundle.get_ca_certs()} == {
        c["serialNumber"] for c in httpx.create_ssl_context().get_ca_certs()
    }
