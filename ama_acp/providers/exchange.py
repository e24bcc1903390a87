"""One POST whose reply is read as it arrives: all the HTTP a model request needs (`send`).

Two ways to send it, one shape of reply (`Reply`: status, headers, body chunks):

- **Straight over httpcore** (httpx's own connection layer, the default): a model request is one POST with a few
  headers, and nothing of httpx's client layer (cookies, redirects, auth flows, its URL and header models) is of
  use to it, while importing that layer costs ~35 ms of CPU (http.cookiejar, the email parser, urllib.request,
  its models) in every cold start: a third of what a first answer waits for after `initialize`
  (docs/performance.md, "A cold first answer").
- **Through httpx**, which sends it the same way, when the settings carry a transport (the tests' in-process
  servers), when the environment names a proxy (httpx's proxy rules — `HTTP(S)_PROXY`, `ALL_PROXY`, `NO_PROXY` —
  are the ones people know, and are not written twice), or when the URL is not plain ASCII (httpx encodes an
  international host name; httpcore takes bytes as they are).

Either way: no redirect is followed (a 3xx is an answer), the timeouts are the same (connect, and each read or
write), the verified TLS context is ama's one per process (tls.py), and gzip or deflate bodies are decoded. httpx's
and httpcore's errors both reach `HttpStream._outcome_of`, which names them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import zlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ama_acp import __version__
from ama_acp.providers import tls
from ama_acp.providers.failures import StreamError

if TYPE_CHECKING:
    import httpx

USER_AGENT = f"ama/{__version__}"  # both ways alike (httpx would say python-httpx; some gateways refuse no name)
PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})
ACCEPTED_ENCODINGS = "gzip, deflate"  # what httpx asks for without brotli or zstd installed; both decoded below


class Reply(NamedTuple):
    """A response whose head has arrived: its status, its headers (names lower-cased, repeated ones joined with
    ", " as httpx's `Headers.get` does) and its body, read as it comes (decoded when the server compressed it)."""

    status: int
    headers: Mapping[str, str]
    chunks: AsyncIterator[bytes]


def proxied(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment names a proxy httpx would send requests through (any case, as httpx reads them)."""
    return any(value and name.lower() in PROXY_VARIABLES for name, value in environ.items())


def direct(url: str, transport: object | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `send` sends straight over httpcore (see the module's docstring for when httpx does)."""
    return transport is None and url.isascii() and not proxied(environ)


@contextlib.asynccontextmanager
async def send(
    method: str,
    url: str,
    headers: Mapping[str, str],
    payload: bytes | None,
    *,
    timeout: float,
    connect_timeout: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[Reply]:
    """Send `payload` (None: no body) to `url` with `method` (a model request's POST, the window probe's GETs); the
    reply once its head has arrived. Leaving the block closes the connection."""
    request = _Request(method, url, _named(headers), payload, timeout, connect_timeout)
    way = _over_httpcore(request) if direct(url, transport) else _over_httpx(request, transport)
    async with way as reply:
        yield reply


class _Request(NamedTuple):
    method: str
    url: str
    headers: dict[str, str]  # the caller's over ama's defaults (`_named`)
    payload: bytes | None
    timeout: float
    connect_timeout: float


@contextlib.asynccontextmanager
async def _over_httpcore(r: _Request) -> AsyncIterator[Reply]:
    import httpcore

    sent = [(_ascii(name, "name"), _ascii(value, name)) for name, value in r.headers.items()]
    limits = {"connect": r.connect_timeout, "read": r.timeout, "write": r.timeout, "pool": r.timeout}
    # A pool per request, as httpx's client per request: it binds to the running event loop, and a connection
    # kept for the next model call minutes later saves little. retries=0: a failed connect is HttpStream's to retry.
    # A plain http URL's pool gets no TLS context at all: httpcore makes one only for an https connection, and this
    # pool connects to `url` alone (no redirect is followed, no proxy is in the way).
    context = None if tls.plain_http(r.url) else tls.ssl_context()
    async with (
        httpcore.AsyncConnectionPool(ssl_context=context, http1=True, http2=False, retries=0) as pool,
        pool.stream(r.method, r.url, headers=sent, content=r.payload, extensions={"timeout": limits}) as resp,
    ):
        named = _joined((k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in resp.headers)
        yield Reply(resp.status, named, _body(resp.aiter_stream(), named.get("content-encoding", "")))


@contextlib.asynccontextmanager
async def _over_httpx(r: _Request, transport: httpx.AsyncBaseTransport | None) -> AsyncIterator[Reply]:
    import httpx

    limits = httpx.Timeout(r.timeout, connect=r.connect_timeout)
    client = (
        httpx.AsyncClient(timeout=limits, transport=transport)
        if transport is not None
        else httpx.AsyncClient(timeout=limits, verify=tls.tls_for(r.url))
    )
    async with client, client.stream(r.method, r.url, content=r.payload, headers=r.headers) as resp:
        yield Reply(resp.status_code, resp.headers, resp.aiter_bytes())


# What each library's errors say, most particular first (a ConnectTimeout is a TimeoutException too); the classes
# are looked up by name in the library when it is imported.
_KINDS = (("ConnectTimeout", "connect_timeout"), ("PoolTimeout", "connect_timeout"), ("TimeoutException", "timeout"))
_LOST = {
    "httpcore": ("NetworkError", "ProtocolError", "ProxyError", "UnsupportedProtocol"),
    "httpx": ("TransportError", "DecodingError"),
}


def transport_error(exc: BaseException) -> str | None:
    """What an httpcore or httpx error says happened: "connect_timeout", "timeout" (waiting for the server),
    "connect" (no connection: refused, a name not found, a certificate), "lost" (a connection that broke, a
    reply that broke HTTP, a proxy that failed); None for any other exception. Neither library is imported here:
    an error of one that was never imported cannot be raised."""
    for library, lost in _LOST.items():
        module = sys.modules.get(library)
        if module is None:
            continue
        for name, kind in _KINDS:
            if isinstance(exc, getattr(module, name)):
                return kind
        if isinstance(exc, module.ConnectError):  # before "lost": httpx's ConnectError is a TransportError
            return "connect"
        if isinstance(exc, tuple(getattr(module, name) for name in lost)):
            return "lost"
    return None


def _named(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers over ama's defaults (its User-Agent, what it accepts), names compared in any case: a
    provider's catalog entry may name its own User-Agent, the window probe asks for JSON."""
    given = {name.lower() for name in headers}
    defaults = {"User-Agent": USER_AGENT, "Accept": "*/*", "Accept-Encoding": ACCEPTED_ENCODINGS}
    return {**{k: v for k, v in defaults.items() if k.lower() not in given}, **headers}


def _ascii(text: str, what: str) -> bytes:
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        # An API key pasted with a typographic quote, say: said as such, never sent in some other encoding.
        raise StreamError(
            "bad_request", f"the request header {what!r} has a character that is not ASCII", retryable=False
        ) from None


def _zlib_header(data: bytes) -> bool:
    """Whether `data` starts as a zlib stream does (RFC 1950: method 8, a header that is a multiple of 31); some
    servers send deflate bodies raw, without it, and httpx reads both."""
    return data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


def _joined(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    named: dict[str, str] = {}
    for name, value in pairs:
        named[name] = f"{named[name]}, {value}" if name in named else value
    return named


def _body(chunks: AsyncIterator[bytes], encoding: str) -> AsyncIterator[bytes]:
    """The body's chunks as they come when the server sent it as it is (the usual case: no generator in between,
    so a streamed delta costs no extra hop), else decoded (`_decoded`)."""
    return chunks if encoding.strip().lower() in ("", "identity") else _decoded(chunks, encoding)


async def _decoded(chunks: AsyncIterator[bytes], encoding: str) -> AsyncIterator[bytes]:
    """The body as sent when the server compressed it with gzip or deflate (what ama asked for); an encoding it
    did not ask for is a reply it cannot read, said once the body starts."""
    coding = encoding.strip().lower()
    if coding not in ("gzip", "deflate", "x-gzip"):
        raise StreamError(
            "stream", f"the reply is compressed with {coding[:40]!r}, which ama did not ask for", retryable=False
        )
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16) if coding != "deflate" else None
    head = b""  # deflate: its first two bytes tell the zlib wrapper (as the RFC has it) from a raw stream
    async for chunk in chunks:
        if inflater is None:
            head += chunk
            if len(head) < 2:
                continue
            chunk, head = head, b""
            inflater = zlib.decompressobj(zlib.MAX_WBITS if _zlib_header(chunk) else -zlib.MAX_WBITS)
        try:
            out = inflater.decompress(chunk)
        except zlib.error:
            raise StreamError("stream", f"the reply's {coding} body is corrupt", retryable=True) from None
        if out:
            yield out
    if inflater is None:  # a deflate body of fewer than two bytes: no valid stream is that short
        if head:
            raise StreamError("stream", f"the reply's {coding} body is corrupt", retryable=True)
        return
    if rest := inflater.flush():
        yield rest
