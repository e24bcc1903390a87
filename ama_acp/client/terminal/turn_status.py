"""The client's program status (OSC 7501) as the conversation goes: what a person running several agents in
tabs or tmux panes needs to see — which one works, which one waits for them, which one finished or failed.

    idle      a session is open and nothing runs (before the first prompt, after a cancel)
    working   a prompt runs; progress = the context percent, when the agent reports a window (none while the
              meter is unknown: before the first usage_update, and after a model change until the next one)
    blocked   a permission request waits for the person (kind=permission)
    done      the turn ended with any stop reason but `cancelled`: a result to read
    error     the turn failed (the agent answered an error or exited)
    clear     on exit: the terminal forgets us

`TurnStatus` only decides the report; `program_status.Emitter` decides whether and when it is sent (never the
same one twice; a new progress, title or msg in the same state waits out the 500 ms throttle, on the emitter's own
timer) and how it is encoded, `app=ama` included (the emitter adds it to every report, the final `clear` too, as
the seed's does). With program status off there is no emitter and every method is a no-op.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ama_acp.client.display.meter import whole_percent
from ama_acp.client.terminal.program_status import Emitter, Report

APP = "ama"  # the emitter's `app` (cli.py builds it with this)


class TurnStatus:
    def __init__(self, emitter: Emitter | None, percent: Callable[[], float | None] = lambda: None) -> None:
        self._emitter = emitter
        self._percent = percent  # the current session's context percent (None when unknown)
        self._title: str | None = None
        self.state = "idle"
        self._blocked = 0  # permission requests waiting (a turn may ask several at once)
        self._kind: str | None = None  # what the current state was reported with, re-sent with it
        self._msg: str | None = None

    @property
    def enabled(self) -> bool:
        return self._emitter is not None

    def _progress(self) -> int | None:
        value = self._percent()
        if value is None or not math.isfinite(value):
            return None
        return max(0, min(100, whole_percent(value)))  # progress 35 beside "ctx 35%"

    def _send(self, state: str, *, kind: str | None = None, msg: str | None = None) -> None:
        self.state, self._kind, self._msg = state, kind, msg
        self._report()

    def _report(self) -> None:
        state, kind, msg = self.state, self._kind, self._msg
        if self._emitter is None:
            return
        progress = self._progress() if state in ("working", "blocked") else None
        self._emitter.report(Report(state, kind=kind, progress=progress, title=self._title, msg=msg))

    def titled(self, title: str | None) -> None:
        """The session's title (session_info_update): shown by terminals that show one."""
        if title != self._title:
            self._title = title
            if self.state != "clear":
                self._report()

    def idle(self) -> None:
        self._send("idle")

    def working(self) -> None:
        self._blocked = 0
        self._send("working")

    def meter_changed(self) -> None:
        """The meter moved during a turn: a usage_update moves the progress, a model change (the figure forgotten)
        drops it. The emitter drops a report that did not change."""
        if self.state in ("working", "blocked"):
            self._report()

    def permission_asked(self, what: str | None) -> None:
        self._blocked += 1
        self._send("blocked", kind="permission", msg=what)

    def permission_answered(self) -> None:
        self._blocked = max(0, self._blocked - 1)
        if self._blocked == 0 and self.state == "blocked":
            self._send("working")

    def turn_ended(self, stop_reason: object) -> None:
        # Every stop reason but a cancel is an answer to read (a refusal or a cut-off answer included; a stop
        # reason a newer protocol adds too): only a turn that failed outright is an error.
        self._send("idle" if stop_reason == "cancelled" else "done")

    def failed(self, message: str) -> None:
        self._send("error", msg=message)

    def clear(self) -> None:
        if self._emitter is not None and self.state != "clear":
            self._emitter.report(Report("clear"))
        self.state = "clear"
