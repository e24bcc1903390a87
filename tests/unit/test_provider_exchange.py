"""providers/exchange.py: a model request's POST straight over httpcore, through httpx where httpx's rules must hold
(a test transport, a proxy in the environment, an international URL), against real servers on 127.0.0.1."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpcore
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.providers import exchange
from ama_acp.providers.exchange import Reply, _body, _joined, direct, proxied, send, transport_error
from ama_acp.providers.failures import StreamError
from tests.support.web_server import WebServer

SSE = b'data: {"a": 1}\n\ndata: [DONE]\n\n'


async def _all(url: str, headers: dict[str, str] | None = None, **kw: object) -> tuple[Reply, bytes]:
    async with send("POST", url, headers or {}, b'{"q": 1}', timeout=5, connect_timeout=5, **kw) as reply:  # type: ignore[arg-type]
        body = b"".join([chunk async for chunk in reply.chunks])
    return reply, body


@pytest.mark.parametrize(
    ("url", "transport", "environ", "straight"),
    [
        ("http://127.0.0.1:8000/v1/chat/completions", None, {}, True),
        ("https://api.openai.com/v1/chat/completions", None, {"NO_PROXY": "*"}, True),  # NO_PROXY alone: no proxy
        ("https://api.openai.com/v1", None, {"HTTPS_PROXY": "http://proxy:3128"}, False),
        ("https://api.openai.com/v1", None, {"http_proxy": "http://proxy:3128"}, False),
        ("https://api.openai.com/v1", None, {"All_Proxy": "socks5://proxy:1080"}, False),
        ("https://api.openai.com/v1", None, {"HTTPS_PROXY": ""}, True),  # set but empty: httpx ignores it too
        ("https://bücher.example/v1", None, {}, False),  # httpx encodes the international name
        ("http://127.0.0.1:8000/v1", httpx.MockTransport(lambda r: httpx.Response(200)), {}, False),
    ],
)
def test_straight_over_httpcore_unless_a_transport_a_proxy_or_an_international_url(
    url: str, transport: object, environ: dict[str, str], straight: bool
) -> None:
    assert direct(url, transport, environ) is straight
    assert proxied(environ) is any(
        v and k.lower().endswith("proxy") and k.lower() != "no_proxy" for k, v in environ.items()
    )


def test_a_post_straight_over_httpcore_sends_what_httpx_sent_and_reads_the_reply_as_it_comes() -> None:
    with WebServer() as web:
        web.route(
            "/v1/chat/completions",
            content_type="text/event-stream",
            headers={"Retry-After": "3", "X-Request-Id": "r1"},
            chunks=lambda: [SSE[:10], SSE[10:]],
        )
        reply, body = anyio.run(_all, web.url("/v1/chat/completions"), {"Authorization": "Bearer k-123"})
    assert (reply.status, body) == (200, SSE)
    assert reply.headers["content-type"] == "text/event-stream"
    assert reply.headers["retry-after"] == "3" and reply.headers["x-request-id"] == "r1"  # names lower-cased
    [hit] = web.requests
    assert (hit.method, hit.path, hit.body) == ("POST", "/v1/chat/completions", b'{"q": 1}')
    assert hit.headers["authorization"] == "Bearer k-123"
    assert hit.headers["host"] == f"127.0.0.1:{web.port}" and hit.headers["content-length"] == "8"
    assert hit.headers["accept-encoding"] == "gzip, deflate"


def test_repeated_headers_are_joined_as_httpx_joins_them() -> None:
    assert _joined([("x-a", "1"), ("x-b", "2"), ("x-a", "3")]) == {"x-a": "1, 3", "x-b": "2"}


@pytest.mark.parametrize(
    ("coding", "pack"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),  # the zlib wrapper, as the RFC has it
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # the raw stream some servers send
    ],
)
def test_a_compressed_reply_is_decoded_straight_or_through_httpx(coding: str, pack: object) -> None:
    packed = pack(SSE * 50)  # type: ignore[operator]
    with WebServer() as web:
        web.route("/v1/x", content_type="text/event-stream", headers={"Content-Encoding": coding}, body=packed)
        straight = anyio.run(_all, web.url("/v1/x"))
        through = anyio.run(lambda: _all(web.url("/v1/x"), transport=httpx.AsyncHTTPTransport()))
    assert straight[1] == through[1] == SSE * 50


def test_a_reply_in_an_encoding_ama_did_not_ask_for_or_corrupt_is_a_stream_error() -> None:
    with WebServer() as web:
        web.route("/br", content_type="text/event-stream", headers={"Content-Encoding": "br"}, body=b"\x0b\x02\x80")
        web.route("/bad", content_type="text/event-stream", headers={"Content-Encoding": "gzip"}, body=b"not gzip")
        with pytest.raises(StreamError, match="compressed with 'br', which ama did not ask for") as br:
            anyio.run(_all, web.url("/br"))
        with pytest.raises(StreamError, match="gzip body is corrupt") as bad:
            anyio.run(_all, web.url("/bad"))
    assert (br.value.retryable, bad.value.retryable) == (False, True)


def test_a_header_that_is_not_ascii_is_said_as_such_and_never_sent() -> None:
    with WebServer() as web:
        with pytest.raises(StreamError, match="'Authorization' has a character that is not ASCII") as caught:
            anyio.run(_all, web.url("/v1/x"), {"Authorization": "Bearer “k”"})
        assert web.requests == []
    assert caught.value.kind == "bad_request" and not caught.value.retryable


def _closed_port() -> str:
    with WebServer() as web:
        url = web.url("/v1/x")
    return url  # nothing listens there any more


@pytest.mark.parametrize("via", ["httpcore", "httpx"])
def test_both_ways_name_a_refused_connection_and_a_silent_server_alike(via: str) -> None:
    kw: dict[str, Any] = {} if via == "httpcore" else {"transport": httpx.AsyncHTTPTransport()}

    async def failure(url: str, timeout: float) -> BaseException:
        try:
            async with send("POST", url, {}, b"{}", timeout=timeout, connect_timeout=timeout, **kw) as reply:
                async for _ in reply.chunks:
                    pass
        except Exception as exc:
            return exc
        raise AssertionError("the request did not fail")

    refused = anyio.run(failure, _closed_port(), 5.0)
    with WebServer() as web:
        web.route("/slow", hold=threading.Event())
        silent = anyio.run(failure, web.url("/slow"), 0.3)
    assert transport_error(refused) == "connect", repr(refused)
    assert transport_error(silent) == "timeout", repr(silent)
    assert type(refused).__module__.split(".")[0] == via
    assert transport_error(ValueError("ours")) is None


def test_a_proxy_in_the_environment_carries_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx's proxy rules: the request goes to the proxy, in absolute form, and its reply is read as any."""
    target = "http://models.example.test/v1/chat/completions"
    with WebServer() as proxy:
        proxy.route(target, content_type="text/event-stream", chunks=lambda: [SSE])
        monkeypatch.setenv("HTTP_PROXY", proxy.url(""))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert not direct(target, None)
        reply, body = anyio.run(_all, target)
    assert (reply.status, body) == (200, SSE)
    assert proxy.hits == [target]


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=4000),
    coding=st.sampled_from(["gzip", "deflate-zlib", "deflate-raw", "identity", ""]),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=12),
)
def test_any_body_cut_anywhere_decodes_to_what_was_sent(data: bytes, coding: str, cuts: list[int]) -> None:
    packers: dict[str, Callable[[bytes], bytes]] = {
        "gzip": gzip.compress,
        "deflate-zlib": zlib.compress,
        "deflate-raw": lambda b: zlib.compress(b)[2:-4],
    }
    packed = packers.get(coding, bytes)(data)
    bounds = sorted({0, len(packed), *(c % (len(packed) + 1) for c in cuts)})
    parts = [packed[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    header = coding.split("-")[0]

    async def run() -> bytes:
        return b"".join([c async for c in _body(_chunks(parts), header)])

    assert anyio.run(run) == data


def test_the_module_names_its_proxy_variables_as_httpx_reads_them() -> None:
    assert exchange.PROXY_VARIABLES == {"http_proxy", "https_proxy", "all_proxy"}


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpcore.ConnectTimeout(), "connect_timeout"),
        (httpcore.PoolTimeout(), "connect_timeout"),
        (httpcore.ReadTimeout(), "timeout"),
        (httpcore.WriteTimeout(), "timeout"),
        (httpcore.ConnectError(), "connect"),
        (httpcore.ReadError(), "lost"),
        (httpcore.WriteError(), "lost"),
        (httpcore.RemoteProtocolError(), "lost"),
        (httpcore.LocalProtocolError(), "lost"),
        (httpcore.ProxyError(), "lost"),
        (httpcore.UnsupportedProtocol(), "lost"),
        (httpx.ConnectTimeout("c"), "connect_timeout"),
        (httpx.PoolTimeout("p"), "connect_timeout"),
        (httpx.ReadTimeout("r"), "timeout"),
        (httpx.ConnectError("c"), "connect"),
        (httpx.ReadError("r"), "lost"),
        (httpx.RemoteProtocolError("r"), "lost"),
        (httpx.ProxyError("p"), "lost"),
        (httpx.DecodingError("d"), "lost"),
        (ValueError("ours"), None),
        (OSError("a socket's"), None),
    ],
)
def test_each_error_of_either_library_is_named_as_the_other_names_it(exc: BaseException, kind: str | None) -> None:
    assert transport_error(exc) == kind
