"""Program status for the terminal (OSC 7501, rev 0.3): tell the terminal what state a program is in.

    ESC ] 7501 ; state=working:id=ama/s1:progress=34:title=<base64> ESC \\

`encode()` builds one sequence from a report, applying every rule of the protocol: `state` is required (idle,
working, done, blocked, error, clear); `id` is `/`-separated segments of `[A-Za-z0-9_.+-]{1,32}`, at most 8 of
them and 128 bytes; `kind` (permission, question, auth) only with `blocked`; `progress` an integer 0–100 only
with working/blocked; `app` like one id segment; `title` and `msg` cleaned of control characters, folded to one
line, cut to 192 / 2,048 UTF-8 bytes without splitting a character (ending in "…"), then base64. An invalid
field is dropped; an invalid state or id sends nothing. A whole sequence stays within 4,096 bytes (msg goes
first, then title). Inside tmux the sequence is wrapped in DCS passthrough with ESC doubled.

`Emitter` decides when to send: it keeps the last report per id, never sends the same one twice, holds back a
change of only msg/title within one state for 500 ms (the newest is sent when the time comes), and `clear`
forgets an id and its descendants. Every pattern here is a fixed-length check or a full match of a bounded
character class: linear time whatever the input.
"""

from __future__ import annotations

import base64
import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace

STATES = frozenset({"idle", "working", "done", "blocked", "error", "clear"})
KINDS = frozenset({"permission", "question", "auth"})
MAX_ID_BYTES = 128
MAX_ID_LEVELS = 8
MAX_TITLE_BYTES = 192
MAX_MSG_BYTES = 2048
MAX_SEQUENCE_BYTES = 4096
THROTTLE_S = 0.5
ELLIPSIS = "…"

_SEGMENT = re.compile(r"[A-Za-z0-9_.+-]{1,32}")
_OSC = "\x1b]7501;"
_ST = "\x1b\\"


@dataclass(frozen=True)
class Report:
    state: str
    id: str | None = None
    kind: str | None = None
    progress: int | None = None
    app: str | None = None
    title: str | None = None
    msg: str | None = None


def valid_id(value: str) -> bool:
    if not value or len(value.encode("utf-8")) > MAX_ID_BYTES:
        return False
    parts = value.split("/")
    return len(parts) <= MAX_ID_LEVELS and all(_SEGMENT.fullmatch(p) for p in parts)


def clean_text(text: str, limit: int) -> str:
    """One line without control characters, at most `limit` UTF-8 bytes; a cut ends in "…" and never splits a
    character."""
    folded = []
    for ch in text:
        if ch in "\r\n\t\v\f\u2028\u2029\x85":
            folded.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf") and ch != "\u200d":
            continue
        else:
            folded.append(ch)
    line = " ".join("".join(folded).split())
    if len(line.encode("utf-8")) <= limit:
        return line
    budget = limit - len(ELLIPSIS.encode("utf-8"))
    out, used = [], 0
    for ch in line:
        size = len(ch.encode("utf-8"))
        if used + size > budget:
            break
        out.append(ch)
        used += size
    return "".join(out).rstrip() + ELLIPSIS


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def fields(report: Report) -> list[tuple[str, str]] | None:
    """The fields of the sequence in order, invalid ones dropped; None when the state or the id is invalid."""
    if report.state not in STATES:
        return None
    out = [("state", report.state)]
    if report.id is not None:
        if not valid_id(report.id):
            return None
        out.append(("id", report.id))
    if report.kind is not None and report.state == "blocked" and report.kind in KINDS:
        out.append(("kind", report.kind))
    progress = report.progress
    if (
        isinstance(progress, int)
        and not isinstance(progress, bool)
        and 0 <= progress <= 100
        and report.state in ("working", "blocked")
    ):
        out.append(("progress", str(progress)))
    if report.app is not None and _SEGMENT.fullmatch(report.app):
        out.append(("app", report.app))
    if report.title:
        title = clean_text(report.title, MAX_TITLE_BYTES)
        if title:
            out.append(("title", _b64(title)))
    if report.msg:
        msg = clean_text(report.msg, MAX_MSG_BYTES)
        if msg:
            out.append(("msg", _b64(msg)))
    return out


def encode(report: Report, *, tmux: bool = False) -> str:
    """The escape sequence for `report` ("" when nothing may be sent), wrapped for tmux when asked."""
    parts = fields(report)
    if parts is None:
        return ""
    for drop in (None, "msg", "title"):
        if drop is not None:
            parts = [(k, v) for k, v in parts if k != drop]
        seq = _OSC + ":".join(f"{k}={v}" for k, v in parts) + _ST
        if len(seq.encode("utf-8")) <= MAX_SEQUENCE_BYTES:
            break
    return wrap_for_tmux(seq) if tmux else seq


def wrap_for_tmux(seq: str) -> str:
    """DCS passthrough: tmux hands the inner sequence to the outer terminal (every ESC inside doubled)."""
    return "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + _ST


def _descends(child: str, parent: str) -> bool:
    return child == parent or child.startswith(parent + "/")


class Emitter:
    """Sends reports through `write`, as the rules above say; `now` is a clock (injectable for tests)."""

    def __init__(
        self, write: Callable[[str], None], *, tmux: bool = False, now: Callable[[], float] = time.monotonic
    ) -> None:
        self._write, self._tmux, self._now = write, tmux, now
        self._last: dict[str | None, Report] = {}
        self._sent_at: dict[str | None, float] = {}
        self._pending: dict[str | None, Report] = {}

    def report(self, report: Report) -> bool:
        """Send `report` now if the rules allow; True when something was written."""
        if fields(report) is None:
            return False
        key = report.id
        if report.state == "clear":
            # Without an id: everything this emitter reported. With one: that id and its descendants.
            forgotten = [k for k in self._last if key is None or (k is not None and _descends(k, key))]
            for k in forgotten:
                self._last.pop(k, None)
                self._sent_at.pop(k, None)
                self._pending.pop(k, None)
            return self._send(report, remember=False)
        last = self._last.get(key)
        if last == report:
            return False  # never rewrite the same report
        if last is not None and last.state == report.state and _same_but_text(last, report):
            if self._now() - self._sent_at.get(key, 0.0) < THROTTLE_S:
                self._pending[key] = report  # only msg/title changed, too soon: the newest waits
                return False
        self._pending.pop(key, None)
        return self._send(report)

    def flush(self) -> bool:
        """Send held-back reports whose time has come; True when something was written."""
        wrote = False
        for key, report in list(self._pending.items()):
            if self._now() - self._sent_at.get(key, 0.0) >= THROTTLE_S:
                del self._pending[key]
                wrote = self._send(report) or wrote
        return wrote

    def _send(self, report: Report, *, remember: bool = True) -> bool:
        seq = encode(report, tmux=self._tmux)
        if not seq:
            return False
        self._write(seq)
        if remember:
            self._last[report.id] = report
            self._sent_at[report.id] = self._now()
        return True


def _same_but_text(a: Report, b: Report) -> bool:
    return replace(a, title=None, msg=None) == replace(b, title=None, msg=None)
