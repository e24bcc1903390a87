"""OSC 7501 program status (issue 14, point 1; issue 29: the seed's rules to the byte): the encoding rules and
limits, and the emitter's rules. tests/unit/test_program_status_seed.py compares both with the seed's own code."""

from __future__ import annotations

import base64
import re

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.client.terminal.program_status import (
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
from tests.support.program_status_seed import FakeClock

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
    # Issue 29: as the seed does, a control character becomes a space (it was deleted: "c[31md"), whitespace
    # runs fold to one space and the ends are trimmed.
    assert clean_text("a\tb\nc\x1b[31md\x07", 100) == "a b c [31md"
    assert clean_text("bell\x07here", 100) == "bell here"
    # Zero-width and format characters are kept (the seed keeps them); U+FEFF is whitespace to JavaScript.
    assert clean_text("zero\u200bwidth\ufeffbom", 100) == "zero\u200bwidth bom"
    # A cut keeps a space before the "…" (the seed does not trim it).
    assert clean_text("a" * 188 + " " + "é" * 3, MAX_TITLE_BYTES) == "a" * 188 + " " + ELLIPSIS
    cut = clean_text("é" * 200, MAX_TITLE_BYTES)
    assert cut.endswith(ELLIPSIS) and len(cut.encode()) <= MAX_TITLE_BYTES
    cut.encode("utf-8").decode("utf-8")  # no split character
    assert len(clean_text("x" * 5000, MAX_MSG_BYTES).encode()) <= MAX_MSG_BYTES


@settings(max_examples=examples(300), deadline=None)
@given(st.text(), st.text(), st.integers(-5, 105), st.sampled_from(["idle", "working", "blocked", "done", "x"]))
def test_any_report_encodes_within_the_limits_with_no_control_characters_inside(
    title: str, msg: str, progress: int, state: str
) -> None:
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


def test_clear_carries_no_title_or_msg() -> None:
    assert parsed(encode(Report("clear", app="ama", title="t", msg="m", progress=5))) == {
        "state": "clear",
        "app": "ama",
    }


def emitter(*, app: str | None = None) -> tuple[Emitter, FakeClock, list[str]]:
    out: list[str] = []
    clock = FakeClock(100_000.0)
    return Emitter(out.append, app=app, clock=clock), clock, out


def test_the_emitter_never_rewrites_the_same_report_and_throttles_changes_in_one_state() -> None:
    e, clock, out = emitter()
    e.report(Report("working", id="a", msg="one"))
    e.report(Report("working", id="a", msg="one"))  # the same: nothing
    assert len(out) == 1
    clock.advance(100)
    e.report(Report("working", id="a", msg="two"))  # same state, within 500 ms: held
    e.report(Report("working", id="a", msg="three", progress=7))  # a new progress too; the newest wins
    clock.advance(399)
    assert len(out) == 1
    clock.advance(1)  # 500 ms after the first: the emitter's own timer sends the newest
    assert len(out) == 2 and b64(parsed(out[-1])["msg"]) == "three" and parsed(out[-1])["progress"] == "7"
    e.report(Report("done", id="a", msg="four"))  # a change of state goes at once
    assert len(out) == 3


def test_a_held_report_taken_back_is_never_sent() -> None:
    e, clock, out = emitter()
    e.report(Report("working", msg="a"))
    clock.advance(100)
    e.report(Report("working", msg="b"))
    e.report(Report("working", msg="a"))  # back to what the terminal shows
    clock.advance(5_000)
    assert len(out) == 1


def test_every_report_carries_the_emitters_app_the_final_clear_too() -> None:
    e, clock, out = emitter(app="ama")
    e.report(Report("idle", app="other"))
    clock.advance(100)
    e.report(Report("working", title="t"))
    e.report(Report("clear"))
    assert [parsed(s).get("app") for s in out] == ["ama", "ama", "ama"]
    assert parsed(out[-1]) == {"state": "clear", "app": "ama"}


def test_a_clear_drops_a_held_report() -> None:
    e, clock, out = emitter(app="ama")
    e.report(Report("working", title="a"))
    clock.advance(100)
    e.report(Report("working", title="b"))
    e.report(Report("clear"))
    clock.advance(5_000)
    assert [parsed(s)["state"] for s in out] == ["working", "clear"] and not clock.pending


def test_clear_forgets_an_id_and_its_descendants() -> None:
    e, clock, out = emitter()
    e.report(Report("working", id="ama"))
    e.report(Report("working", id="ama/s1"))
    e.report(Report("working", id="amanda"))
    e.report(Report("clear", id="ama"))
    assert parsed(out[-1]) == {"state": "clear", "id": "ama"}
    # Forgotten: the same report is sent again; "amanda" (not a descendant) is remembered.
    e.report(Report("working", id="ama/s1"))
    assert parsed(out[-1]) == {"state": "working", "id": "ama/s1"}
    e.report(Report("working", id="amanda"))
    assert len(out) == 5


def test_dispose_cancels_the_held_reports() -> None:
    e, clock, out = emitter()
    e.report(Report("working", msg="a"))
    clock.advance(10)
    e.report(Report("working", msg="b"))
    e.dispose()
    clock.advance(5_000)
    assert len(out) == 1


@pytest.mark.anyio
async def test_on_the_real_clock_the_loops_timer_sends_the_held_report() -> None:
    # cli.py builds the emitter with the default clock: the running loop's timer sends what the throttle held,
    # with no tick to call (a short throttle keeps the test fast).
    out: list[str] = []
    second = anyio.Event()

    def write(seq: str) -> None:
        out.append(seq)
        if len(out) == 2:
            second.set()

    e = Emitter(write, app="ama", throttle_ms=30)
    e.report(Report("working", progress=1))
    e.report(Report("working", progress=2))
    assert len(out) == 1
    with anyio.fail_after(5):
        await second.wait()
    assert parsed(out[-1]) == {"state": "working", "progress": "2", "app": "ama"}
