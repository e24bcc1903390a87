"""Which addresses web_fetch may connect to (docs/tools.md "web_fetch").

A page the model asks for could be anything the machine can reach: the person's router, a database on
localhost, a cloud's metadata service that hands out credentials. So an address is refused unless it is
globally routable unicast — loopback, private, shared (carrier NAT), link-local, unspecified, multicast,
documentation, benchmarking and reserved blocks are refused, and so is the cloud metadata address — unless
the person listed the host (or the address) in `[web] allow_hosts`.

The classification is this module's own table rather than `ipaddress`'s `is_private`/`is_global`, whose
answers changed between Python patch releases; IPv6 forms that carry an IPv4 address (IPv4-mapped
`::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address inside. Hosts
are judged after DNS resolution (the caller resolves and passes every address), and a host written the way
resolvers read IPv4 (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) is read as that address here too.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The cloud metadata services (AWS, GCP, Azure, OpenStack: 169.254.169.254; AWS over IPv6: fd00:ec2::254).
# They hand out the machine's credentials to whoever asks, so even a host in allow_hosts may not resolve to
# one: only an allow_hosts entry naming the address itself lets it through.
METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})


def _nets(*pairs: tuple[str, str]) -> list[tuple[IPNetwork, str]]:
    return [(ipaddress.ip_network(net), why) for net, why in pairs]


# IPv4 blocks that are not the public internet (IANA special-purpose registry), with why, most specific first.
_V4 = _nets(
    ("0.0.0.0/8", 'unspecified ("this network")'),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "private (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
    ("192.0.2.0/24", "reserved (documentation)"),
    ("192.88.99.0/24", "reserved (6to4 relay)"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved (benchmarking)"),
    ("198.51.100.0/24", "reserved (documentation)"),
    ("203.0.113.0/24", "reserved (documentation)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # 255.255.255.255 (broadcast) included
)
_V6 = _nets(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "private (local NAT64)"),
    ("100::/64", "reserved (discard)"),
    ("2001::/32", "reserved (Teredo)"),
    ("2001:db8::/32", "reserved (documentation)"),
    ("2001::/23", "reserved (IETF protocol assignments)"),
    ("3fff::/20", "reserved (documentation)"),
    ("fc00::/7", "private (unique local)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private (site-local)"),
    ("ff00::/8", "multicast"),
)
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")  # the only IPv6 block handed out for the internet
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")


def embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, when it carries one a connection would reach."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return ip.sixtofour
    return None


def refusal(ip: IPAddress) -> str | None:
    """Why web_fetch may not connect to `ip` (a few words), or None for a globally routable unicast address."""
    inner = embedded_v4(ip)
    if inner is not None:
        why = refusal(inner)
        return None if why is None else f"{why}, as {ip} carries the IPv4 address {inner}"
    if ip in METADATA:
        return "the cloud metadata address"
    if isinstance(ip, ipaddress.IPv4Address):
        return next((why for net, why in _V4 if ip in net), None)
    for net, why in _V6:
        if ip in net:
            return why
    if ip not in _GLOBAL_UNICAST_V6:
        return "reserved (not global unicast)"
    return None


# A host made only of what inet_aton reads (digits, hex digits, `x`, dots): such a host is an IPv4 address to
# every resolver that uses inet_aton (glibc, musl, macOS), whatever a URL parser thinks it is.
_NUMERIC_V4 = re.compile(r"[0-9a-fA-FxX.]{1,64}")


def literal_address(host: str) -> IPAddress | None:
    """The address a host names by itself, with no DNS: an IP literal (`::1`, `[::1]`, `127.0.0.1`) or an IPv4
    address in a spelling resolvers accept (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    bare = bare.split("%", 1)[0]  # an IPv6 zone (`fe80::1%eth0`) changes the interface, not the address
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _NUMERIC_V4.fullmatch(bare) and bare[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


@dataclass(frozen=True)
class AllowList:
    """`[web] allow_hosts`: host names (`localhost`), wildcards for subdomains (`*.corp.example`), addresses
    (`127.0.0.1`, `::1`) and networks (`10.0.0.0/8`). A listed name lets its host reach any address but a
    metadata one; a listed address or network lets any host reach those addresses."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".corp.example" for "*.corp.example"
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: list[str]) -> AllowList:
        """From entries the config already checked (config.py `allow_host_problem`); others are skipped."""
        names: set[str] = set()
        suffixes: list[str] = []
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = normal_host(raw)
            addr = literal_address(entry)
            if addr is not None:
                networks.append(ipaddress.ip_network(addr))
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if entry.startswith("*."):
                suffixes.append(entry[1:])
            elif entry:
                names.add(entry)
        return cls(frozenset(names), tuple(suffixes), tuple(networks))

    def names_host(self, host: str) -> bool:
        h = normal_host(host)
        return h in self.names or any(h.endswith(s) and len(h) > len(s) for s in self.suffixes)

    def covers(self, ip: IPAddress, *, exact_only: bool = False) -> bool:
        forms = [ip] + ([inner] if (inner := embedded_v4(ip)) is not None else [])
        for net in self.networks:
            for form in forms:
                if form.version == net.version and form in net and (not exact_only or net.num_addresses == 1):
                    return True
        return False


def normal_host(host: str) -> str:
    """How a host is compared: lower case, no brackets around an IPv6 literal, no trailing dot."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    return h[:-1] if h.endswith(".") and not h.endswith("..") else h


def check_addresses(host: str, addresses: list[IPAddress], allow: AllowList) -> str | None:
    """Why the connection to `host`, which resolved to `addresses`, is refused; None when every address may be
    reached. All must pass, not one: a name that resolves to a public and a private address is not trusted to
    pick the public one."""
    listed = allow.names_host(host)
    for ip in addresses:
        why = refusal(ip)
        if why is None:
            continue
        if ip in METADATA or embedded_v4(ip) in METADATA:
            if allow.covers(ip, exact_only=True):
                continue
        elif listed or allow.covers(ip):
            continue
        via = "" if literal_address(host) is not None else f" ({host} resolves to it)"
        return f"{ip} is {why}{via}"
    return None
