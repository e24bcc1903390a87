"""Which addresses web_fetch may reach (tools/web/netguard.py), and `[web] allow_hosts` read at the config boundary:
properties over generated IPv4/IPv6 addresses and the spellings resolvers accept."""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.config import ConfigError, parse_config
from ama_acp.tools.web.netguard import AllowList, check_addresses, embedded_v4, literal_address, refusal
from ama_acp.tools.web.request import url_problem

ip = ipaddress.ip_address
v4s = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
v6s = st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.31.255.255", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("fd12::1", "private"),
        ("169.254.10.10", "link-local"),
        ("fe80::1", "link-local"),
        ("169.254.169.254", "the cloud metadata address"),
        ("fd00:ec2::254", "the cloud metadata address"),
        ("::ffff:169.254.169.254", "the cloud metadata address"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "documentation"),
        ("2001:db8::1", "documentation"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("::127.0.0.1", "reserved"),  # IPv4-compatible: deprecated, not global unicast
    ],
)
def test_refused_addresses_say_why(address, why):
    assert why in (refusal(ip(address)) or "")


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::6810:84e5", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    assert refusal(ip(address)) is None


@given(v4s)
def test_ipv6_forms_of_an_ipv4_address_are_judged_like_it(a):
    mapped = ipaddress.IPv6Address(0xFFFF << 32 | int(a))
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(a))
    six_to_four = ipaddress.IPv6Address(0x2002 << 112 | int(a) << 80)
    for form in (mapped, nat64, six_to_four):
        assert embedded_v4(form) == a
        assert (refusal(form) is None) == (refusal(a) is None), form


@given(st.one_of(v4s, v6s))
def test_never_looser_than_pythons_own_is_global(address):
    if embedded_v4(address) is not None:
        return  # judged by the IPv4 inside, which the property above covers
    if not address.is_global or address.is_multicast:
        assert refusal(address) is not None


def _spellings(n: int) -> st.SearchStrategy[str]:
    """IPv4 address `n` as resolvers that use inet_aton read it: 1 to 4 parts, each decimal, octal or hex."""
    b = n.to_bytes(4, "big")
    splits = [[n], [b[0], int.from_bytes(b[1:], "big")], [b[0], b[1], int.from_bytes(b[2:], "big")], list(b)]
    radix = st.sampled_from([str, lambda v: "0" + oct(v)[2:] if v else "0", hex, lambda v: "0X" + format(v, "X")])
    return st.sampled_from(splits).flatmap(lambda parts: st.tuples(*[radix for _ in parts]).map(
        lambda fs: ".".join(f(p) for f, p in zip(fs, parts, strict=True))))  # fmt: skip


@given(st.integers(0, 2**32 - 1).flatmap(lambda n: st.tuples(st.just(n), _spellings(n))))
def test_every_ipv4_spelling_is_read_as_the_resolver_reads_it(case):
    n, host = case
    assert literal_address(host) == ipaddress.IPv4Address(n)
    # The system's own parser (no DNS: AI_NUMERICHOST) agrees, so what is judged is what would be connected to.
    info = socket.getaddrinfo(host, 80, family=socket.AF_INET, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    assert info[0][4][0] == str(ipaddress.IPv4Address(n))


@given(st.text(max_size=40))
def test_any_host_text_is_read_or_left_to_dns_never_raises(host):
    literal_address(host)
    try:
        url = httpx.URL(f"http://{host}/")
    except (httpx.InvalidURL, ValueError, TypeError):
        return
    url_problem(url)


def test_allow_list_names_wildcards_addresses_and_networks():
    allow = AllowList.parse(["LocalHost.", "*.corp.example", "127.0.0.1", "10.0.0.0/8", "[::1]", "169.254.169.254"])
    assert allow.names_host("localhost") and allow.names_host("LOCALHOST.")
    assert allow.names_host("wiki.corp.example") and not allow.names_host("corp.example")
    assert not allow.names_host("evilcorp.example")
    assert check_addresses("intranet.test", [ip("10.9.8.7")], allow) is None
    assert check_addresses("x.test", [ip("::1")], allow) is None
    assert check_addresses("x.test", [ip("::ffff:127.0.0.1")], allow) is None  # the listed IPv4 address inside
    assert "172.16.0.1 is private" in (check_addresses("x.test", [ip("172.16.0.1")], allow) or "")
    # Every address must pass: a name resolving to a public and a private one is refused.
    assert check_addresses("mixed.test", [ip("8.8.8.8"), ip("192.168.1.1")], AllowList()) is not None


def test_a_listed_name_never_reaches_the_metadata_address_unless_it_is_listed_itself():
    by_name = AllowList.parse(["meta.test", "169.254.0.0/16"])
    for address in ("169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"):
        assert "metadata" in (check_addresses("meta.test", [ip(address)], by_name) or "")
    assert check_addresses("meta.test", [ip("169.254.1.1")], by_name) is None
    assert check_addresses("meta.test", [ip("169.254.169.254")], AllowList.parse(["169.254.169.254"])) is None


# --- [web] allow_hosts at the config boundary -------------------------------------------------------------


def test_allow_hosts_is_read_and_checked():
    cfg = parse_config('[web]\nallow_hosts = ["localhost", "*.corp.example", "127.0.0.1", "10.0.0.0/8", "::1"]\n')
    assert cfg.web.allow_hosts == ["localhost", "*.corp.example", "127.0.0.1", "10.0.0.0/8", "::1"]
    assert parse_config("").web.allow_hosts == []
    for bad in ['"http://localhost"', '"localhost:8080"', '"a/b"', '""', '"*"', '"exa mple"', '"x" , 5']:
        with pytest.raises(ConfigError, match=r"web\.allow_hosts"):
            parse_config(f"[web]\nallow_hosts = [{bad}]\n")
    with pytest.raises(ConfigError, match="web"):
        parse_config('[web]\nallow_host = ["x"]\n')  # a misspelt key is an error, not ignored


@given(st.lists(st.text(max_size=30), max_size=4))
def test_any_allow_hosts_value_is_read_or_refused_by_name(entries):
    toml = "[web]\nallow_hosts = [" + ", ".join(_toml_string(e) for e in entries) + "]\n"
    try:
        cfg = parse_config(toml)
    except ConfigError as exc:
        assert "web.allow_hosts" in str(exc) or "allow_hosts" in str(exc)
        return
    allow = AllowList.parse(cfg.web.allow_hosts)  # what the config accepts, the guard can use
    assert isinstance(allow, AllowList)


def _toml_string(s: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\U{ord(c):08x}" for c in s) + '"'
