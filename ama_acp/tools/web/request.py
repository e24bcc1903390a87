"""One GET of web_fetch, to an address that was checked (docs/tools.md "web_fetch").

The host is resolved once, here; every address it resolves to is judged (tools/web/netguard.py); and the connection
goes to one of those very addresses: the request's URL names the IP, the `Host` header and the TLS server name
(SNI, and the name the certificate is checked against: httpcore's `sni_hostname` extension) name the host. So
a DNS answer that changes between the check and the connect (DNS rebinding) changes nothing: the second answer
is never asked for. Redirects are not followed here: the caller checks each Location and calls again.

The body is read raw and decompressed here, with a bound on the decompressed bytes (a gzip bomb stops at the
cap like any body); only gzip and deflate are offered. No proxy, .netrc or environment setting is used
(`trust_env=False`): a proxy would connect to what it resolves, not to the checked address.
"""

from __future__ import annotations

import re
import socket
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from ama_acp.tools.base import ToolError
from ama_acp.tools.web.netguard import AllowList, IPAddress, check_addresses, literal_address, normal_host
from ama_acp.tools.web.page import SNIFF_BYTES

if TYPE_CHECKING:  # imported when a fetch runs (start-up time)
    import ssl

    import httpx

# Turns a host name and port into addresses. Tests give their own (no network); ama uses the system's.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

USER_AGENT = "ama-acp web_fetch"  # says what is asking, and no more
ACCEPT = (
    "text/markdown, text/html;q=0.9, application/xhtml+xml;q=0.9, text/plain;q=0.8, application/json;q=0.8, */*;q=0.1"
)
MAX_ADDRESSES = 4  # tried in order when a connection fails (an IPv6 address on a machine without IPv6)
_HOST = re.compile(r"(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.?")


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    import ipaddress

    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ToolError(f"{host} could not be resolved ({getattr(exc, 'strerror', None) or exc}).") from None
    out: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in out:
            out.append(ip)
    return out


def url_problem(url: httpx.URL) -> str | None:
    """Why web_fetch will not request this URL at all, before any DNS: the scheme, credentials, the host's
    spelling, the port. The model reads it, so it says what to do."""
    if url.scheme not in ("http", "https"):
        return f"only http and https URLs can be fetched, not {url.scheme or 'a URL without a scheme'}"
    if url.userinfo:
        return "the URL holds a user name or password; web_fetch sends no credentials (leave them out)"
    host = url.raw_host.decode("ascii", "replace")
    if not host:
        return "the URL has no host"
    if literal_address(host) is None and not (len(host) <= 253 and _HOST.fullmatch(host.lower())):
        return f"{host[:100]!r} is not a valid host name"
    if url.port is not None and not 0 < url.port < 65536:
        return f"port {url.port} is out of range"
    return None


async def addresses_for(url: httpx.URL, allow: AllowList, resolver: Resolver) -> list[IPAddress]:
    """The addresses this URL's host may be reached at, all checked; a ToolError saying why when refused."""
    host = normal_host(url.raw_host.decode("ascii"))
    literal = literal_address(host)
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = [literal] if literal is not None else await resolver(host, port)
    if not addresses:
        raise ToolError(f"{host} resolves to no address.")
    why = check_addresses(host, addresses, allow)
    if why is not None:
        raise ToolError(
            f"Refused to fetch {url}: {why}. web_fetch does not reach loopback, private, link-local or metadata "
            "addresses unless the person lists the host in [web] allow_hosts of ama's config."
        )
    return addresses


@asynccontextmanager
async def pinned_get(
    url: httpx.URL, addresses: list[IPAddress], tls: ssl.SSLContext, timeout: float
) -> AsyncIterator[httpx.Response]:
    """GET `url` from the first of `addresses` that accepts a connection; the response's body unread."""
    import httpx

    host = url.raw_host.decode("ascii")
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": ACCEPT,
        "Accept-Encoding": "gzip, deflate",
    }
    last: Exception | None = None
    for ip in addresses[:MAX_ADDRESSES]:
        # The transport itself, not a client: a client parses a redirect's Location as it arrives (and fails
        # on garbage its own way); here the caller parses it. A transport a hop: a pooled connection made for
        # another host name (same address, other SNI) is never reused for this one.
        async with httpx.AsyncHTTPTransport(verify=tls, trust_env=False, retries=0) as transport:
            request = httpx.Request(
                "GET",
                url.copy_with(host=str(ip), fragment=None),
                headers=headers,
                extensions={"sni_hostname": host, "timeout": httpx.Timeout(timeout).as_dict()},
            )
            try:
                response = await transport.handle_async_request(request)
            except httpx.ConnectError as exc:
                last = exc
                continue
            try:
                yield response
            finally:
                await response.aclose()
            return
    raise ToolError(f"Could not connect to {host}: {_reason(last)}.")


def _reason(exc: BaseException | None) -> str:
    text = str(exc) if exc is not None else ""
    return text[:300] or (type(exc).__name__ if exc is not None else "no address to try")


class Body:
    """The bytes of a response, decompressed, at most `cap` of them."""

    def __init__(self, data: bytes, cut: bool) -> None:
        self.data = data
        self.cut = cut  # the cap was reached: the rest was not read


async def read_body(response: httpx.Response, cap: int, give_up: Callable[[bytes], bool] | None = None) -> Body:
    """The body, decompressed, up to `cap` bytes. `give_up` is asked once about the first SNIFF_BYTES (or the whole
    body, when shorter): True stops reading there (binary behind a vague type is not downloaded)."""
    decoder = _decoder(response.headers.get("content-encoding", ""))
    out = bytearray()
    async for chunk in response.aiter_raw():
        room = cap - len(out) + 1  # one byte more than fits tells a body at the cap from a longer one
        out += decoder.feed(chunk, room)
        if give_up is not None and len(out) >= SNIFF_BYTES:
            if give_up(bytes(out[:SNIFF_BYTES])):
                return Body(bytes(out[:SNIFF_BYTES]), True)
            give_up = None
        if len(out) > cap:
            return Body(bytes(out[:cap]), True)
        if decoder.done:  # the compressed stream ended; what follows is not part of it
            break
    out += decoder.flush(cap - len(out) + 1)
    if len(out) > cap:
        return Body(bytes(out[:cap]), True)
    return Body(bytes(out), False)


class _Identity:
    done = False

    def feed(self, data: bytes, room: int) -> bytes:
        return data[:room]

    def flush(self, room: int) -> bytes:
        return b""


class _Inflate:
    """gzip or deflate, never producing more than `room` bytes for a chunk (a bomb costs the cap, no more).
    Concatenated gzip members are read one after the other, as gzip itself does."""

    def __init__(self, wbits: int) -> None:
        self.wbits = wbits
        self.z = zlib.decompressobj(wbits)
        self.started = False
        self.done = False

    def feed(self, data: bytes, room: int) -> bytes:
        try:
            return self._feed(data, room)
        except zlib.error as exc:
            if self.wbits == zlib.MAX_WBITS and not self.started:  # "deflate" sent raw, without its zlib header
                self.wbits, self.z = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(data, room)
            raise ToolError(f"The response's compressed body is corrupt ({exc}).") from None

    def _feed(self, data: bytes, room: int) -> bytes:
        out = bytearray()
        while data and len(out) < room and not self.done:
            out += self.z.decompress(data, room - len(out))
            self.started = True
            data = self.z.unconsumed_tail
            if self.z.eof:  # a member ended: another gzip member may follow; anything else is ignored
                data = self.z.unused_data + data
                if not (self.wbits > zlib.MAX_WBITS and data.startswith(b"\x1f\x8b")):
                    self.done = True  # the caller stops reading
                    break
                self.z = zlib.decompressobj(self.wbits)
        return bytes(out)

    def flush(self, room: int) -> bytes:
        return self.z.flush()[:room] if self.started else b""


def _decoder(encoding: str) -> _Identity | _Inflate:
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Identity()
    if codings in (["gzip"], ["x-gzip"]):
        return _Inflate(16 + zlib.MAX_WBITS)
    if codings == ["deflate"]:
        return _Inflate(zlib.MAX_WBITS)
    raise ToolError(f"The response is compressed with {encoding[:60]!r}, which web_fetch does not read.")
