"""Where a fetch goes, as its permissions see it: a host and a port (docs/tools.md "Permission rules").

A permission rule `web_fetch(HOST)` or `web_fetch(HOST:PORT)`, an "Always allow fetches from …" answer, and the
question web_fetch asks before following a redirect to somewhere new are all about an origin, not a host alone:
`example.com` is that host on the default port of the URL's scheme (80 for http, 443 for https), and a server on
another port of the same machine is another origin, asked about on its own.

A host is compared in one spelling, the one web_fetch connects to: lower case, IDNA (`xn--…`) for a name, without
a trailing dot; an IP literal as the address it names (`127.1`, `0x7f.0.0.1` and `[::ffff:127.0.0.1]` are
127.0.0.1; an IPv6 address compressed, in brackets). So no other spelling of a host escapes a rule written for it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from ama_acp.tools.web.netguard import literal_address, normal_host

DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"[a-z0-9_.-]{1,253}")
_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class Origin:
    """A URL's host and port: `default` when the port is its scheme's own (written or not)."""

    host: str
    port: int
    default: bool

    @property
    def shown(self) -> str:
        """As an option names it and as a rule is written: the host alone on its scheme's default port."""
        return self.host if self.default else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class OriginPattern:
    """What a rule names: a host, on the default port of the URL's scheme (`port` None) or on that port."""

    host: str
    port: int | None

    def covers(self, origin: Origin) -> bool:
        if origin.host != self.host:
            return False
        return origin.default if self.port is None else origin.port == self.port


def canonical_host(host: str) -> str:
    """`host` in the one spelling hosts are compared in (see the module's docstring)."""
    bare = normal_host(host)
    address = literal_address(bare)
    if address is None:
        return bare
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        return str(mapped) if mapped is not None else f"[{address.compressed}]"
    return str(address)


def url_origin(url: str) -> Origin | None:
    """The origin of a URL the model wrote or a server redirected to (any text); None when it has no http(s)
    host and port web_fetch would connect to (web_fetch refuses such a URL itself)."""
    import httpx

    try:
        parsed = httpx.URL(url.strip())
        scheme = parsed.scheme
        host = parsed.raw_host.decode("ascii")
        port = parsed.port
    except (httpx.InvalidURL, TypeError, ValueError, UnicodeError):
        return None
    if scheme not in DEFAULT_PORTS or not host:
        return None
    default = DEFAULT_PORTS[scheme]
    if port is None:
        port = default
    if not 0 < port < 65536:
        return None
    return Origin(canonical_host(host), port, port == default)


def origin_pattern(text: str) -> OriginPattern | None:
    """A rule's pattern: `host`, `host:port`, `[IPv6]`, `[IPv6]:port` or a bare IPv6 address; None when it is
    none of these."""
    text = text.strip()
    port_text = ""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
        if rest and not port_text:
            return None
        if not isinstance(literal_address(host), ipaddress.IPv6Address):
            return None
    elif text.count(":") > 1:  # an IPv6 address without brackets has no port
        host = text
        if not isinstance(literal_address(host), ipaddress.IPv6Address):
            return None
    else:
        host, colon, port_text = text.partition(":")
        if colon and not port_text:
            return None
        if not _NAME.fullmatch(host.lower()):
            return None
    port = None
    if port_text:
        if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    return OriginPattern(canonical_host(host), port)
