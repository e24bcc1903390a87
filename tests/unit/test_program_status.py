"""OSC 7501 program status (issue 14, point 1): the encoding rules and limits, and the emitter's rules."""

from __future__ import annotations

import base64
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.client.program_status import (
    ELLIPSIS,
    MAX_MSG_BYTES,
    MAX_SEQUENCE_BYTES,
    MAX_TITLE_BYTES,
    Emitter,
    Report,
    clean_text,
    encode,
    valid_id,
    wrap_for_tmux,
)
from tests.support.hypothesis_profiles import examples

SEQ = re.compile(r"\x1b\]7501;(?P<body>[^\x1b]*)\x1b\\")


def parsed(seq: str) -> dict[str, str]:
    m = SEQ.fullmatch(seq)
    assert m, repr(seq)
    return dict(part.split("=", 1) for part in m["body"].split(":"))


def b64(value: str) -> str:
    return base64.b64decode(value).decode("utf-8")


def test_the_sequence_has_its_frame_and_fields_in_order() -> None:
    seq = encode(Report("working", id="ama/s1", progress=34, app="ama", title="fixing tests"))
    assert seq.startswith("\x1b]7501;state=working:id=ama/s1:progress=34:app=ama:title=") and seq.endswith("\x1b\\")
    assert b64(parsed(seq)["title"]) == "fixing tests"


def test_an_invalid_state_or_id_sends_nothing() -> None:
    assert encode(Report("sleeping")) == ""
    for bad in ("", "a//b", "/a", "a/", "sp ace", "x" * 33, "/".join(["a"] * 9), "é", ("a" * 32 + "/") * 4 + "a" * 32):
        assert encode(Report("idle", id=bad)) == "", bad
    assert valid_id("/".join(["a"] * 8)) and valid_id("A-z_0.9+/b")


def test_invalid_fields_are_dropped_and_the_rest_sent() -> None:
    fields = parsed(encode(Report("working", kind="permission", progress=101, app="bad app", id="a")))
    assert fields == {"state": "working", "id": "a"}  # kind only with blocked; progress 0-100; app one segment
    assert parsed(encode(Report("done", progress=50)))["state"] == "done" and "progress" not in parsed(
        encode(Report("done", progress=50))
    )
    assert parsed(encode(Report("blocked", kind="permission", progress=0))) == {
        "state": "blocked",
        "kind": "permission",
        "progress": "0",
    }
    assert "kind" not in parsed(encode(Report("blocked", kind="lunch")))
    assert "progress" not in parsed(encode(Report("working", progress=True)))  # a bool is no integer


def test_title_and_msg_are_one_clean_line_cut_at_a_character_boundary() -> None:
    assert clean_text("a\tb\nc\x1b[31md\x07", 100) == "a b c[31md"
    cut = clean_text("é" * 200, MAX_TITLE_BYTES)
    assert cut.endswith(ELLIPSIS) and len(cut.encode()) <= MAX_TITLE_BYTES
    cut.encode("utf-8").decode("utf-8")  # no split character
    assert len(clean_text("x" * 5000, MAX_MSG_BYTES).encode()) <= MAX_MSG_BYTES


@settings(max_examples=examples(300), deadline=None)
@given(st.text(), st.text(), st.integers(-5, 105), st.sampled_from(["idle", "working", "blocked", "done", "x"]))
def test_any_report_encodes_within_the_limits_with_no_control_characters_inside(title, msg, progress, state) -> None:
    seq = encode(Report(state, id="ama/s", title=title, msg=msg, progress=progress))
    if state == "x":
        assert seq == ""
        return
    assert len(seq.encode("utf-8")) <= MAX_SEQUENCE_BYTES
    fields = parsed(seq)
    for key in ("title", "msg"):
        if key in fields:
            text = b64(fields[key])
            assert "\n" not in text and not any(ord(c) < 32 or c == "\x7f" for c in text)


def test_a_too_long_sequence_drops_msg_then_title() -> None:
    # Each is cut to its own limit, so the sequence always fits; the rule still holds for the fields it builds.
    seq = encode(Report("working", id="a", title="t" * 1000, msg="m" * 10000))
    assert len(seq.encode()) <= MAX_SEQUENCE_BYTES and "title" in parsed(seq)


def test_tmux_passthrough_doubles_every_escape() -> None:
    seq = encode(Report("idle", id="a"))
    wrapped = encode(Report("idle", id="a"), tmux=True)
    assert wrapped == wrap_for_tmux(seq)
    assert wrapped.startswith("\x1bPtmux;\x1b\x1b]7501;") and wrapped.endswith("\x1b\x1b\\\x1b\\")


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_emitter_never_rewrites_the_same_report_and_throttles_text_only_changes() -> None:
    out: list[str] = []
    clock = Clock()
    e = Emitter(out.append, now=clock)
    assert e.report(Report("working", id="a", msg="one"))
    assert not e.report(Report("working", id="a", msg="one"))  # the same: nothing
    clock.t += 0.1
    assert not e.report(Report("working", id="a", msg="two"))  # only msg changed, within 500 ms: held
    assert not e.flush()
    clock.t += 0.5
    assert e.flush() and b64(parsed(out[-1])["msg"]) == "two"
    assert e.report(Report("done", id="a", msg="three"))  # a change of state goes at once
    assert len(out) == 3


def test_clear_forgets_an_id_and_its_descendants() -> None:
    out: list[str] = []
    e = Emitter(out.append)
    e.report(Report("working", id="ama"))
    e.report(Report("working", id="ama/s1"))
    e.report(Report("working", id="amanda"))
    assert e.report(Report("clear", id="ama"))
    assert parsed(out[-1]) == {"state": "clear", "id": "ama"}
    # Forgotten: the same report is sent again; "amanda" (not a descendant) is remembered.
    assert e.report(Report("working", id="ama/s1"))
    assert not e.report(Report("working", id="amanda"))
