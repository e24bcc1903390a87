"""The origin a fetch's permissions judge (tools/web/origin.py, issue 39 item 10): a host and a port, whatever the
spelling — upper case, a trailing dot, IPv6 with or without brackets and zeros, IPv4 as resolvers read it, the
default port written or not. Every spelling of one origin is that origin; another port is another origin."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.session.rules.rules import Call, judge, parse_rule
from ama_acp.tools.web.origin import origin_pattern, url_origin

_names = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True)
_v4 = st.integers(1, 2**32 - 1).map(ipaddress.IPv4Address)
_v6 = st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)
_ports = st.integers(1, 65535)


def _cases(text: str, draw: st.DrawFn) -> str:
    return "".join(c.upper() if c.isalpha() and draw(st.booleans()) else c for c in text)


@st.composite
def _host_spellings(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """(canonical host, spellings in a URL, spellings in a rule) of one host."""
    kind = draw(st.sampled_from(["name", "v4", "v6"]))
    if kind == "name":
        name = draw(_names)
        spelled = [name, name.upper(), name + ".", _cases(name, draw), _cases(name, draw) + "."]
        return name, spelled, spelled
    if kind == "v4":
        v4 = draw(_v4)
        hexed = "0x" + format(int(v4), "x")  # one 32-bit number, as inet_aton reads it
        mapped = f"[::ffff:{v4}]"
        return str(v4), [str(v4), str(int(v4)), hexed, mapped], [str(v4)]
    v6 = draw(_v6)
    forms = [v6.compressed, v6.exploded, v6.exploded.upper(), _cases(v6.compressed, draw)]
    canonical = str(v6.ipv4_mapped) if v6.ipv4_mapped else f"[{v6.compressed}]"  # ::ffff:a.b.c.d is a.b.c.d
    return canonical, [f"[{f}]" for f in forms], [f"[{f}]" for f in forms] + forms


@given(host=_host_spellings(), scheme=st.sampled_from(["http", "https", "HTTP", "Https"]), data=st.data())
def test_every_spelling_of_a_host_on_its_default_port_is_one_origin(host, scheme, data):
    canonical, in_url, in_rule = host
    default = 443 if scheme.lower() == "https" else 80
    spelled = data.draw(st.sampled_from(in_url))
    port = data.draw(st.sampled_from(["", f":{default}", f":0{default}"]))
    origin = url_origin(f"{scheme}://{spelled}{port}/a?b=c")
    assert origin is not None and origin.host == canonical and origin.port == default
    assert origin.default and origin.shown == canonical  # a leading zero is still the number
    pattern = origin_pattern(data.draw(st.sampled_from(in_rule)))
    assert pattern is not None and pattern.covers(origin)
    explicit = origin_pattern(f"{canonical}:{default}")
    assert explicit is not None and explicit.covers(origin)


@given(host=_host_spellings(), port=_ports, other=_ports, scheme=st.sampled_from(["http", "https"]), data=st.data())
def test_another_port_is_another_origin(host, port, other, scheme, data):
    canonical, in_url, in_rule = host
    default = 443 if scheme == "https" else 80
    origin = url_origin(f"{scheme}://{data.draw(st.sampled_from(in_url))}:{port}/")
    assert origin is not None and origin.port == port and origin.default == (port == default)
    bare = origin_pattern(data.draw(st.sampled_from(in_rule)))
    assert bare is not None and bare.covers(origin) == (port == default)
    with_port = origin_pattern(f"{canonical}:{other}")
    assert with_port is not None and with_port.covers(origin) == (port == other)


@given(url=st.text(max_size=60), pattern=st.text(max_size=60))
def test_any_text_is_an_origin_or_none_and_never_an_exception(url, pattern):
    origin = url_origin(url)
    found = origin_pattern(pattern)
    if origin is not None and found is not None:
        assert isinstance(found.covers(origin), bool)


@pytest.mark.parametrize(
    ("rule", "url", "covered"),
    [
        ("web_fetch(example.com)", "https://EXAMPLE.COM./", True),
        ("web_fetch(example.com)", "http://example.com:80/", True),
        ("web_fetch(example.com)", "http://example.com:8080/", False),
        ("web_fetch(EXAMPLE.com.)", "https://example.com/", True),
        ("web_fetch(example.com:8080)", "http://example.com:8080/", True),
        ("web_fetch(example.com:8080)", "http://example.com/", False),
        ("web_fetch(example.com:80)", "http://example.com/", True),
        ("web_fetch(example.com:80)", "https://example.com/", False),
        ("web_fetch([::1]:8080)", "http://[0:0:0:0:0:0:0:1]:8080/", True),
        ("web_fetch(::1)", "http://[::1]/", True),
        ("web_fetch(::1)", "http://[::1]:81/", False),
        ("web_fetch(127.0.0.1)", "http://127.1/", True),  # a deny must not be dodged by a resolver's spelling
        ("web_fetch(127.0.0.1)", "http://2130706433/", True),
        ("web_fetch(127.0.0.1)", "http://[::ffff:127.0.0.1]/", True),
        ("web_fetch(xn--bcher-kva.de)", "http://Bücher.de/", True),
        ("web_fetch(example.com)", "http://example.com.evil.test/", False),
    ],
)
def test_a_rule_covers_its_origin_in_every_spelling_and_no_other(rule, url, covered):
    parsed = parse_rule(rule, "deny", "test")
    assert not isinstance(parsed, str), parsed
    assert (judge([parsed], Call("web_fetch", url=url)) is not None) == covered
