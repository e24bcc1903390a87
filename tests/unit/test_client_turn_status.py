"""The acp-client's program status as a turn goes (ama_acp/client/terminal/turn_status.py), through a real
`program_status.Emitter` writing into a list, decoded back into fields."""

from __future__ import annotations

import base64
import math
import re

import pytest

from ama_acp.client.terminal.program_status import THROTTLE_MS, Emitter
from ama_acp.client.terminal.turn_status import APP, TurnStatus
from tests.support.program_status_seed import FakeClock

SEQ = re.compile(r"\x1b\]7501;(?P<body>[^\x1b]*)\x1b\\")


def decode(seq: str) -> dict[str, str]:
    """The fields of one OSC 7501 sequence, title and msg decoded from base64."""
    m = SEQ.fullmatch(seq)
    assert m, repr(seq)
    out = dict(part.split("=", 1) for part in m["body"].split(":"))
    for key in ("title", "msg"):
        if key in out:
            out[key] = base64.b64decode(out[key], validate=True).decode("utf-8")
    return out


class Rig:
    """A TurnStatus with its emitter's output (the emitter built as cli.py builds it, with app=ama), a clock
    that moves only when told (firing the emitter's timers), and a settable percent."""

    def __init__(self, percent: float | None = None) -> None:
        self.out: list[str] = []
        self.clock = FakeClock(100_000.0)
        self.percent = percent
        self.emitter = Emitter(self.out.append, app=APP, clock=self.clock)
        self.status = TurnStatus(self.emitter, lambda: self.percent)

    def later(self) -> Rig:
        """Past the emitter's throttle, so a report in the same state is not held back (a held one goes now)."""
        self.clock.advance(THROTTLE_MS + 500)
        return self

    def written(self) -> list[dict[str, str]]:
        """What was written since the last call, decoded."""
        out, self.out[:] = [decode(s) for s in self.out], []
        return out

    def last(self) -> dict[str, str]:
        (report,) = self.written()
        return report


def rig(percent: float | None = None) -> Rig:
    return Rig(percent)


def test_idle() -> None:
    r = rig(50.0)
    r.status.idle()
    assert r.last() == {"state": "idle", "app": APP}  # no progress outside a turn
    assert r.status.state == "idle"


def test_working_reports_the_context_percent_rounded() -> None:
    r = rig(34.4)
    r.status.working()
    assert r.last() == {"state": "working", "progress": "34", "app": APP}
    r2 = rig(34.6)
    r2.status.working()
    assert r2.last()["progress"] == "35"


@pytest.mark.parametrize(
    ("percent", "progress"), [(-5.0, "0"), (-0.4, "0"), (0.0, "0"), (100.0, "100"), (150.0, "100"), (1e300, "100")]
)
def test_progress_is_clamped_to_0_100(percent: float, progress: str) -> None:
    r = rig(percent)
    r.status.working()
    assert r.last()["progress"] == progress


@pytest.mark.parametrize("percent", [None, math.nan, math.inf, -math.inf])
def test_no_progress_without_a_usable_percent(percent: float | None) -> None:
    r = rig(percent)
    r.status.working()
    assert r.last() == {"state": "working", "app": APP}


def test_a_permission_turn() -> None:
    r = rig(20.0)
    r.status.idle()
    r.status.working()
    r.status.permission_asked("run: ls -la")
    r.status.permission_answered()
    r.status.turn_ended("end_turn")
    assert r.written() == [
        {"state": "idle", "app": APP},
        {"state": "working", "progress": "20", "app": APP},
        {"state": "blocked", "kind": "permission", "progress": "20", "app": APP, "msg": "run: ls -la"},
        {"state": "working", "progress": "20", "app": APP},
        {"state": "done", "app": APP},
    ]
    assert r.status.state == "done"


def test_a_permission_without_a_description() -> None:
    r = rig(None)
    r.status.working()
    r.status.permission_asked(None)
    assert r.written()[-1] == {"state": "blocked", "kind": "permission", "app": APP}


def test_blocked_until_every_waiting_request_is_answered() -> None:
    r = rig(10.0)
    r.status.working()
    r.status.permission_asked("first")
    r.later().status.permission_asked("second")
    assert [w.get("msg") for w in r.written()] == [None, "first", "second"]
    r.later().status.permission_answered()
    assert r.written() == [] and r.status.state == "blocked"
    r.later().status.permission_answered()
    assert r.last() == {"state": "working", "progress": "10", "app": APP}


def test_an_answer_with_nothing_waiting_changes_nothing() -> None:
    r = rig(10.0)
    r.status.working()
    r.written()
    r.status.permission_answered()
    assert r.written() == [] and r.status.state == "working"
    r.status.permission_asked("one")  # the extra answer did not count ahead
    r.later().status.permission_answered()
    assert [w["state"] for w in r.written()] == ["blocked", "working"]


def test_a_new_turn_forgets_requests_left_waiting() -> None:
    r = rig(10.0)
    r.status.working()
    r.status.permission_asked("a")
    r.status.permission_asked("b")
    r.status.turn_ended("cancelled")
    r.status.working()
    r.status.permission_asked("c")
    r.written()
    r.later().status.permission_answered()
    assert r.last()["state"] == "working"


def test_cancelled_is_idle() -> None:
    r = rig(40.0)
    r.status.working()
    r.status.turn_ended("cancelled")
    assert r.written()[-1] == {"state": "idle", "app": APP}


@pytest.mark.parametrize("reason", ["end_turn", "max_tokens", "max_turn_requests", "refusal", "something_new", None, 3])
def test_every_other_stop_reason_is_done(reason: object) -> None:
    r = rig(40.0)
    r.status.working()
    r.status.turn_ended(reason)
    assert r.written()[-1] == {"state": "done", "app": APP}
    assert r.status.state == "done"


def test_failed_is_an_error_with_the_message() -> None:
    r = rig(40.0)
    r.status.working()
    r.status.failed("the agent exited (code 1)")
    assert r.written()[-1] == {"state": "error", "app": APP, "msg": "the agent exited (code 1)"}


def test_meter_changed_reports_only_a_new_rounded_percent() -> None:
    r = rig(30.0)
    r.status.working()
    r.written()
    r.percent = 30.3
    r.later().status.meter_changed()
    assert r.written() == []
    r.percent = 31.2
    r.status.meter_changed()  # the last report went long enough ago: at once
    assert r.last() == {"state": "working", "progress": "31", "app": APP}
    r.percent = None
    r.status.meter_changed()
    # Issue 29: a new progress in the same state waits out the throttle like a new text (the seed's rule; it
    # used to go at once).
    assert r.written() == []
    r.clock.advance(THROTTLE_MS)
    assert r.last() == {"state": "working", "app": APP}


@pytest.mark.parametrize("end", ["idle", "done", "error"])
def test_meter_changed_outside_a_turn_writes_nothing(end: str) -> None:
    r = rig(30.0)
    r.status.working()
    if end == "error":
        r.status.failed("x")
    else:
        r.status.turn_ended("cancelled" if end == "idle" else "end_turn")
    assert r.status.state == end
    r.written()
    r.percent = 70.0
    r.later().status.meter_changed()
    assert r.written() == []


def test_meter_changed_while_blocked_moves_the_progress() -> None:
    r = rig(30.0)
    r.status.working()
    r.status.permission_asked(None)
    r.written()
    r.percent = 45.0
    r.later().status.meter_changed()  # (sooner, it waits out the throttle: test_meter_changed_reports_only…)
    assert r.last() == {"state": "blocked", "kind": "permission", "progress": "45", "app": APP}


def test_meter_changed_while_blocked_with_the_same_percent_writes_nothing() -> None:
    r = rig(30.0)
    r.status.working()
    r.status.permission_asked("run: rm -rf build")
    r.written()
    r.later().status.meter_changed()
    r.later()
    assert r.written() == []


def test_meter_changed_while_blocked_keeps_the_question() -> None:
    r = rig(30.0)
    r.status.working()
    r.status.permission_asked("run: rm -rf build")
    r.written()
    r.percent = 45.0
    r.later().status.meter_changed()  # (sooner, it waits out the throttle: test_meter_changed_reports_only…)
    assert r.last().get("msg") == "run: rm -rf build"


def test_titled_resends_the_current_state_with_the_title() -> None:
    r = rig(12.0)
    r.status.working()
    r.written()
    r.later().status.titled("Fix the flaky test")
    assert r.last() == {"state": "working", "progress": "12", "app": APP, "title": "Fix the flaky test"}
    r.later().status.titled("Fix the flaky test")  # the same title: nothing new
    assert r.written() == []
    r.status.turn_ended("end_turn")  # later reports carry it
    assert r.last() == {"state": "done", "app": APP, "title": "Fix the flaky test"}


def test_titled_before_any_turn() -> None:
    r = rig(None)
    r.status.titled("hello")
    assert r.last() == {"state": "idle", "app": APP, "title": "hello"}


def test_a_title_change_soon_after_is_held_then_flushed() -> None:
    r = rig(None)
    r.status.working()
    r.status.titled("one")  # within the throttle of the working report: held back
    assert r.written() == [{"state": "working", "app": APP}]
    r.clock.advance(THROTTLE_MS - 1)
    assert r.written() == []
    r.clock.advance(1)  # the emitter's timer: no flush to call
    assert r.last() == {"state": "working", "app": APP, "title": "one"}


def test_a_title_removed() -> None:
    r = rig(None)
    r.status.titled("t")
    r.later().status.titled(None)
    assert r.written()[-1] == {"state": "idle", "app": APP}


def test_titled_while_blocked_keeps_the_permission() -> None:
    r = rig(30.0)
    r.status.working()
    r.status.permission_asked("run: make")
    r.written()
    r.later().status.titled("Build")
    assert r.last() == {
        "state": "blocked",
        "kind": "permission",
        "progress": "30",
        "app": APP,
        "title": "Build",
        "msg": "run: make",
    }


def test_titled_after_an_error_keeps_the_message() -> None:
    r = rig(None)
    r.status.failed("agent exited")
    r.written()
    r.later().status.titled("t")
    assert r.last() == {"state": "error", "app": APP, "title": "t", "msg": "agent exited"}


def test_clear_once() -> None:
    r = rig(30.0)
    r.status.working()
    r.written()
    r.status.clear()
    assert r.last() == {"state": "clear", "app": APP}  # issue 29: the final clear carries app=ama too
    assert r.status.state == "clear"
    r.later().status.clear()
    assert r.written() == []


def test_clear_is_sent_even_before_any_report() -> None:
    r = rig(None)
    r.status.clear()
    assert r.last() == {"state": "clear", "app": APP}


def test_no_title_after_clear() -> None:
    r = rig(None)
    r.status.idle()
    r.status.clear()
    r.written()
    r.later().status.titled("late")
    r.later()
    assert r.written() == [] and r.status.state == "clear"


def test_every_sequence_decodes() -> None:
    r = rig(99.9)
    evil = "ok\x1b]7501;state=done\x1b\\ \x07 \r\n: = /"
    r.status.titled(evil)
    r.status.working()
    r.status.permission_asked(evil)
    r.status.permission_answered()
    r.status.failed(evil)
    r.later()
    r.status.clear()
    for seq in r.out:
        assert seq.count("\x1b") == 2, repr(seq)  # only the frame's own ESC ] and ESC \
    reports = r.written()
    assert [w["state"] for w in reports] == ["idle", "working", "blocked", "working", "error", "clear"]
    assert reports[2]["msg"] == "ok ]7501;state=done \\ : = /"  # each control a space, as the seed does


def test_without_an_emitter_nothing_is_written_and_nothing_raises() -> None:
    status = TurnStatus(None, lambda: 50.0)
    assert not status.enabled
    status.idle()
    status.titled("t")
    status.working()
    status.meter_changed()
    status.permission_asked("x")
    status.meter_changed()
    status.permission_answered()
    status.permission_answered()
    status.turn_ended("end_turn")
    status.turn_ended("cancelled")
    status.failed("boom")
    status.clear()
    status.clear()
    status.titled("after")


def test_without_an_emitter_the_percent_is_never_read() -> None:
    def boom() -> float | None:
        raise AssertionError("read")

    status = TurnStatus(None, boom)
    status.working()
    status.permission_asked("x")
    status.meter_changed()


def test_enabled_with_an_emitter() -> None:
    assert rig().status.enabled
