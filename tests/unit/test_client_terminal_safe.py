"""What the agent sends, made safe for a terminal (`terminal_safe`, ama_acp/textsafe.py, as the renderer uses it),
and the context figures the meter and the program status read (`context_percent`, `is_estimated`)."""

from __future__ import annotations

import copy
import io
import math
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ama_acp.client.display import ansi, meter
from ama_acp.client.display.meter import context_percent, is_estimated
from ama_acp.client.display.render import Renderer
from ama_acp.textsafe import terminal_safe
from tests.support.hypothesis_profiles import examples

# Never shown as they are: C0 but tab and newline, DEL, C1, bidi controls, LS and PS, lone surrogates.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
CONTROLS = [chr(c) for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))]
# Controls often, and the characters just outside the ranges (NBSP, LS/PS, bidi marks) that must be kept.
piece = st.one_of(
    st.sampled_from(CONTROLS),
    st.sampled_from(
        ["\r\n", "\r\r\n", "\n\r", "\x1b]7501;state=done\x1b\\", "\x1b[2J", "\x9b31m", "\x1b]52;c;eA==\x07"]
    ),
    st.sampled_from(["\u00a0", "\u2028", "\u2029", "\u200e", "\u202e", "\u2066", "\ufeff", "é", " ", "~"]),
    st.characters(),
)
texts = st.lists(piece, max_size=12).map("".join)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | texts
json_like = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=20
)


def strings_in(value: Any) -> list[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings_in(k) + strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


CARET = {chr(c): "^" + "@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_"[c] for c in range(0x20)} | {"\x7f": "^?"}


def expected_text(text: str) -> str:
    """The promise, spelled independently: CR LF is a newline, newline and tab stay, every other control is
    shown (C0 and DEL in caret notation, C1 and the bidi controls as <U+XXXX>), nothing is dropped."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if text[i : i + 2] == "\r\n":
            out.append("\n")
            i += 2
            continue
        if ch in "\n\t" or not UNSAFE.match(ch):
            out.append(ch)
        elif ch in CARET:
            out.append(CARET[ch])
        else:
            out.append(f"<U+{ord(ch):04X}>")
        i += 1
    return "".join(out)


def same_shape(before: Any, after: Any) -> None:
    """`after` is `before` with each string cleaned (keys too); every other scalar is the very same value."""
    if isinstance(before, str):
        assert after == expected_text(before)
    elif isinstance(before, dict):
        assert isinstance(after, dict) and after is not before
        cleaned: dict[str, Any] = {}
        for k, v in before.items():
            cleaned[expected_text(k)] = v  # keys that clean to the same one: the last wins, as in a dict literal
        assert list(after) == list(cleaned)
        for k, v in cleaned.items():
            same_shape(v, after[k])
    elif isinstance(before, list):
        assert isinstance(after, list) and after is not before and len(after) == len(before)
        for b, a in zip(before, after, strict=True):
            same_shape(b, a)
    else:
        assert after is before or (isinstance(before, float) and math.isnan(before) and math.isnan(after))


@settings(max_examples=examples(300), deadline=None)
@given(json_like)
def test_no_control_character_survives_anywhere(value: Any) -> None:
    for text in strings_in(terminal_safe(value)):
        assert not UNSAFE.search(text), repr(text)


@settings(max_examples=examples(300), deadline=None)
@given(json_like)
def test_strings_are_cleaned_and_everything_else_kept(value: Any) -> None:
    same_shape(value, terminal_safe(value))


@settings(max_examples=examples(300), deadline=None)
@given(texts)
def test_newlines_and_tabs_survive(text: str) -> None:
    out = terminal_safe(text)
    assert out.count("\t") == text.count("\t")
    assert out.count("\n") == text.count("\n")
    assert "\r" not in out


@settings(max_examples=examples(200), deadline=None)
@given(json_like)
def test_the_input_is_not_changed(value: Any) -> None:
    before = copy.deepcopy(value)
    terminal_safe(value)
    same_shape_exact(before, value)


def same_shape_exact(a: Any, b: Any) -> None:
    if isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same_shape_exact(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same_shape_exact(x, y)
    else:
        assert a == b and type(a) is type(b)


@pytest.mark.parametrize(
    ("text", "clean"),
    [
        ("plain", "plain"),
        ("a\r\nb", "a\nb"),
        ("a\rb", "a^Mb"),
        ("a\r\r\nb", "a^M\nb"),
        ("a\n\rb", "a\n^Mb"),
        ("tab\there\n", "tab\there\n"),
        ("\x1b]7501;state=done\x1b\\", "^[]7501;state=done^[\\"),
        ("\x1b]52;c;cm0gLXJmIH4=\x07", "^[]52;c;cm0gLXJmIH4=^G"),
        ("\x1b[6n", "^[[6n"),
        ("\x9b2J\x9d0;title\x9c", "<U+009B>2J<U+009D>0;title<U+009C>"),  # C1 CSI, OSC, ST
        ("\x85next line", "<U+0085>next line"),
        ("del\x7f", "del^?"),
        ("\x00\x08\x0b\x0c\x0e\x1f", "^@^H^K^L^N^_"),
        ("\u00a0nbsp\u00ff", "\u00a0nbsp\u00ff"),  # just past the C1 range: text
        ("\u2028\u202e", "<U+2028><U+202E>"),  # a line separator and a right-to-left override: shown
        ("\u200e\u200f", "\u200e\u200f"),  # the marks (LRM, RLM) belong to right-to-left text: kept
        ("\udfff", "<U+DFFF>"),  # a lone surrogate cannot even be encoded for the terminal
    ],
)
def test_examples(text: str, clean: str) -> None:
    assert terminal_safe(text) == clean


def test_a_clean_string_is_returned_as_is() -> None:
    text = "nothing to strip\n\tat all é"
    assert terminal_safe(text) is text


@pytest.mark.parametrize("value", [None, True, False, 0, -1, 10**40, 1.5, math.inf, -math.inf])
def test_non_string_scalars_are_unchanged(value: Any) -> None:
    assert terminal_safe(value) is value
    assert terminal_safe([value]) == [value] and terminal_safe({"k": value}) == {"k": value}


def test_nan_is_unchanged() -> None:
    assert math.isnan(terminal_safe(math.nan))


def test_keys_are_cleaned_too() -> None:
    assert terminal_safe({"\x1b[31mkey": {"in\x07ner": ["\x1bx"]}}) == {"^[[31mkey": {"in^Gner": ["^[x"]}}


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def test_64_levels_are_kept() -> None:
    out = terminal_safe(nested(64, "\x1bleaf"))
    assert out == nested(64, "^[leaf")


def test_nesting_deeper_than_64_levels_is_cut() -> None:
    out = terminal_safe(nested(65, "leaf"))
    assert depth_of(out) == 64
    assert "leaf" not in strings_in(out)


@pytest.mark.parametrize("depth", [100, 5_000, 100_000])
def test_very_deep_nesting_is_no_recursion_error(depth: int) -> None:
    out = terminal_safe(nested(depth, "\x1bleaf"))
    assert depth_of(out) == 64


# --- rendered: an agent's escape sequences never reach the terminal ----------------------------------------

EVIL = "done? \x1b]7501;state=done\x1b\\ \x9b2J \x1b]52;c;eA==\x07 \x1b[31mred\r\nnext\rover"
OWN_STYLING = re.compile(
    "|".join(re.escape(code) for code in (ansi.RESET, ansi.BOLD, ansi.DIM, ansi.RED, ansi.GREEN))
    + "|"
    + "|".join(re.escape(code) for code in (ansi.YELLOW, ansi.CYAN, ansi.MAGENTA, "\x1b[1A\r\x1b[2K"))
)


def rendered(colour: bool, *updates: dict[str, Any]) -> str:
    out = io.StringIO()
    r = Renderer(out, colour=colour)
    for update in updates:
        r.update({"sessionId": "s1", "update": update})
    return out.getvalue()


def chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_an_agent_message_with_an_osc_7501_writes_no_escape() -> None:
    text = rendered(False, chunk("agent_message_chunk", "before \x1b]7501;state=done\x1b\\ after"))
    assert "\x1b" not in text
    assert text == "before ^[]7501;state=done^[\\ after"


def test_an_agent_message_in_colour_writes_no_escape_of_its_own() -> None:
    text = rendered(True, chunk("agent_message_chunk", EVIL))
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text and "\r" not in text


HOSTILE_UPDATES: list[dict[str, Any]] = [
    chunk("agent_message_chunk", EVIL),
    chunk("agent_thought_chunk", EVIL),
    chunk("user_message_chunk", EVIL),
    {"sessionUpdate": "tool_call", "toolCallId": EVIL, "title": EVIL, "kind": EVIL, "status": "pending"},
    {
        "sessionUpdate": "tool_call_update",
        "toolCallId": EVIL,
        "status": "completed",
        "content": [
            {"type": "content", "content": {"type": "text", "text": EVIL}},
            {"type": "diff", "path": EVIL, "oldText": EVIL, "newText": EVIL + "\nmore"},
        ],
    },
    {"sessionUpdate": "plan", "entries": [{"content": EVIL, "status": EVIL}]},
    {"sessionUpdate": "session_info_update", "title": EVIL},
    {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": EVIL}]},
    {"sessionUpdate": "config_option_update", "configOptions": [{"id": EVIL, "name": EVIL, "currentValue": EVIL}]},
    {"sessionUpdate": "current_mode_update", "currentModeId": EVIL},
    {"sessionUpdate": "notice", "severity": EVIL, "title": EVIL, "description": EVIL},
    {"sessionUpdate": EVIL},
]


@pytest.mark.parametrize("colour", [False, True])
def test_hostile_updates_write_only_the_renderers_own_styling(colour: bool) -> None:
    text = rendered(colour, *HOSTILE_UPDATES)
    assert "done?" in text  # the text itself is shown
    rest = OWN_STYLING.sub("", text) if colour else text
    assert not UNSAFE.search(rest), repr(rest)


# --- context_percent and is_estimated ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "percent"),
    [
        ({"used": 50, "size": 200}, 25.0),
        ({"used": 0, "size": 200}, 0.0),
        ({"used": 300, "size": 200}, 150.0),  # past the window: reported as it is
        ({"used": 1, "size": 3, "cost": None}, 100 / 3),
    ],
)
def test_context_percent(usage: dict[str, Any], percent: float) -> None:
    assert context_percent(usage) == pytest.approx(percent)


@pytest.mark.parametrize(
    "usage",
    [
        None,
        {},
        {"used": 5},
        {"size": 5},
        {"used": 5, "size": 0},
        {"used": 5, "size": -10},
        {"used": -1, "size": 10},
        {"used": True, "size": 10},
        {"used": 1, "size": True},
        {"used": 1.0, "size": 10},
        {"used": 1, "size": 10.0},
        {"used": "1", "size": "10"},
        {"used": None, "size": 10},
        {"used": [1], "size": {"n": 10}},
    ],
)
def test_no_usable_window_is_none(usage: dict[str, Any] | None) -> None:
    assert context_percent(usage) is None


usage_values = st.one_of(st.integers(), st.integers(min_value=0, max_value=10**12), st.booleans(), st.floats(), scalars)


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from(["used", "size", "cost", "_meta"]), usage_values | json_like))
def test_context_percent_is_none_or_a_finite_non_negative_number(usage: dict[str, Any]) -> None:
    percent = context_percent(usage)
    assert percent is None or (isinstance(percent, float) and math.isfinite(percent) and percent >= 0)


@pytest.mark.parametrize("usage", [{"used": 10**400, "size": 1}, {"used": 2**1100, "size": 2**20}])
def test_a_huge_count_is_no_overflow(usage: dict[str, Any]) -> None:
    # JSON has no integer limit and msgspec decodes these as int: the agent can send them.
    percent = context_percent(usage)
    assert percent is None or math.isfinite(percent)


def test_a_huge_window_is_a_tiny_percent() -> None:
    assert context_percent({"used": 1, "size": 10**400}) == 0.0
    assert context_percent({"used": 10**400, "size": 10**399}) == pytest.approx(1000.0)


@pytest.mark.parametrize("source", ["estimate", "prefix"])
def test_ama_estimates_are_estimated(source: str) -> None:
    assert is_estimated({"used": 1, "size": 2, "_meta": {"ama": {"source": source}}})


@pytest.mark.parametrize(
    "usage",
    [
        {},
        {"used": 1, "size": 2},
        {"_meta": None},
        {"_meta": "estimate"},
        {"_meta": ["ama"]},
        {"_meta": {}},
        {"_meta": {"ama": None}},
        {"_meta": {"ama": "estimate"}},
        {"_meta": {"ama": {}}},
        {"_meta": {"ama": {"source": "usage"}}},
        {"_meta": {"ama": {"source": "provider"}}},
        {"_meta": {"ama": {"source": "Estimate"}}},
        {"_meta": {"other": {"source": "estimate"}}},
        {"source": "estimate"},
    ],
)
def test_anything_else_is_taken_at_its_word(usage: dict[str, Any]) -> None:
    assert not is_estimated(usage)


@pytest.mark.parametrize("source", [["estimate"], {"kind": "estimate"}, []])
def test_an_unhashable_source_is_not_an_estimate(source: Any) -> None:
    assert not is_estimated({"used": 1, "size": 2, "_meta": {"ama": {"source": source}}})


def usages(source: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    ama = st.fixed_dictionaries({}, optional={"source": source, "tier": json_like}) | json_like
    meta = st.fixed_dictionaries({}, optional={"ama": ama}) | json_like
    return st.fixed_dictionaries({}, optional={"_meta": meta, "used": json_like, "source": json_like})


@settings(max_examples=examples(150), deadline=None)
@given(usages(scalars | st.sampled_from(sorted(meter.ESTIMATED_SOURCES))))
def test_is_estimated_on_junk_is_a_boolean(usage: dict[str, Any]) -> None:
    assert isinstance(is_estimated(usage), bool)


@settings(max_examples=examples(300), deadline=None)
@given(usages(json_like))
@example({"_meta": {"ama": {"source": []}}})
@example({"_meta": {"ama": {"\ud800": None}}})  # a lone surrogate, as JSON's "\ud800" decodes: no UTF-8 holds it
@example({"_meta": {"ama": {"source": "\udfff"}}, "used": "\ud800"})
def test_is_estimated_on_any_junk_is_a_boolean(usage: dict[str, Any]) -> None:
    assert isinstance(is_estimated(usage), bool)
