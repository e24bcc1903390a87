"""Program status for the terminal (OSC 7501, rev 0.3): tell the terminal what state a program is in.

    ESC ] 7501 ; state=working:id=ama/s1:progress=34:app=ama:title=<base64> ESC \\

This module follows the seed's reference code (`program-status.mjs`, issue 29) to the byte; a differential test
(tests/unit/test_program_status_seed.py) runs both and a committed table (tests/data/program_status_seed.json)
keeps the comparison in every run. docs/seeds.md says so.

`encode()` builds one sequence from a report: `state` is required (idle, working, done, blocked, error, clear);
`id` is `/`-separated segments of `[A-Za-z0-9_.+-]{1,32}`, at most 8 of them and 128 bytes; `kind` (permission,
question, auth) only with `blocked`; `progress` an integer 0–100 only with working/blocked; `app` like one id
segment; `title` and `msg` (never with `clear`) made one line — every C0/DEL/C1 control becomes a space, runs of
whitespace one space, the ends trimmed, as JavaScript's `\\s` and `trim()` define whitespace — then cut to 192 /
2,048 UTF-8 bytes at a code point boundary with "…" appended, then base64. An invalid field is dropped; an
invalid state or id sends nothing. A sequence over 4,096 bytes loses msg, then title.

`Emitter` decides when to send, per id: the last body sent is never sent again; a report whose state and kind
are those of the last one sent (a new progress, title or msg) waits until 500 ms after that one, and the newest
report then is sent; a change of state or kind, and `clear`, go at once. `clear` forgets the id and its
descendants (without an id: everything). With `app`, every report — `clear` too — carries `app=<app>`. Times
are milliseconds from an injectable `Clock`, so tests drive it without sleeping. Every pattern here is a full
match of a bounded character class or a fixed set: linear time whatever the input.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

STATES = ("idle", "working", "done", "blocked", "error", "clear")
KINDS = ("permission", "question", "auth")
MAX_ID_BYTES = 128
MAX_ID_LEVELS = 8
MAX_TITLE_BYTES = 192
MAX_MSG_BYTES = 2048
MAX_SEQUENCE_BYTES = 4096
THROTTLE_MS = 500.0
ELLIPSIS = "…"

_SEGMENT = re.compile(r"[A-Za-z0-9_.+-]{1,32}")
# What the seed's JavaScript treats as whitespace (`\s`, `trim()`): not Python's idea of it (which adds
# \x1c-\x1f and \x85, and lacks U+FEFF). Controls are spaces by the time this applies.
_JS_SPACE = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_SPACES = re.compile("[" + re.escape(_JS_SPACE) + "]+")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
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
    if len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        return False
    parts = value.split("/")
    return len(parts) <= MAX_ID_LEVELS and all(_SEGMENT.fullmatch(p) for p in parts)


def _as_js(text: str) -> str:
    """The string JavaScript would hold: surrogate halves that pair up become one character, a lone half
    becomes U+FFFD (which is what UTF-8 encoding makes of it there, at the same three bytes)."""
    if not any("\ud800" <= ch <= "\udfff" for ch in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def one_line(text: str) -> str:
    """Every control character a space, every run of whitespace one space, no space at either end."""
    return _SPACES.sub(" ", _CONTROLS.sub(" ", _as_js(text))).strip(_JS_SPACE)


def cut_utf8(text: str, limit: int) -> str:
    """`text` when it fits in `limit` UTF-8 bytes; else as many whole code points as fit beside "…", and "…"."""
    if len(text.encode("utf-8")) <= limit:
        return text
    budget = limit - len(ELLIPSIS.encode("utf-8"))
    out, used = [], 0
    for ch in text:
        size = len(ch.encode("utf-8"))
        if used + size > budget:
            break
        out.append(ch)
        used += size
    return "".join(out) + ELLIPSIS


def clean_text(text: str, limit: int) -> str:
    """What a title or msg becomes before base64: one line, at most `limit` UTF-8 bytes."""
    line = one_line(text)
    return cut_utf8(line, limit) if line else ""


def _b64_text(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    line = clean_text(text, limit)
    return base64.b64encode(line.encode("utf-8")).decode("ascii") if line else None


def _is_progress(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100


def body(report: Report) -> str | None:
    """The sequence's `key=value:…` part; None when the state or the id is invalid (nothing may be sent)."""
    if report.state not in STATES:
        return None
    if report.id is not None and not valid_id(report.id):
        return None
    return _fitted([*_field_pairs(report), *_text_pairs(report)])


def _field_pairs(report: Report) -> list[str]:
    """state and id, then each of kind, progress and app that is valid with that state."""
    pairs = [f"state={report.state}"]
    if report.id is not None:
        pairs.append(f"id={report.id}")
    if report.state == "blocked" and report.kind in KINDS:
        pairs.append(f"kind={report.kind}")
    if report.state in ("working", "blocked") and _is_progress(report.progress):
        pairs.append(f"progress={report.progress}")
    if report.app is not None and _SEGMENT.fullmatch(report.app):
        pairs.append(f"app={report.app}")
    return pairs


def _text_pairs(report: Report) -> list[str]:
    if report.state == "clear":
        return []
    pairs = []
    for key, text, limit in (("title", report.title, MAX_TITLE_BYTES), ("msg", report.msg, MAX_MSG_BYTES)):
        encoded = _b64_text(text, limit)
        if encoded is not None:
            pairs.append(f"{key}={encoded}")
    return pairs


def _fitted(pairs: list[str]) -> str | None:
    # Each text has its own limit, so this does not happen with the limits above (about 3.2 KB at most); the
    # rule stands anyway: the texts go, from the last, and anything else too long sends nothing.
    while len(_osc(":".join(pairs))) > MAX_SEQUENCE_BYTES:
        if not pairs[-1].startswith(("msg=", "title=")):
            return None
        pairs.pop()
    return ":".join(pairs)


def _osc(text: str) -> str:
    return _OSC + text + _ST


def encode(report: Report, *, tmux: bool = False) -> str:
    """The escape sequence for `report` ("" when nothing may be sent), wrapped for tmux when asked."""
    pairs = body(report)
    if pairs is None:
        return ""
    return wrap_for_tmux(_osc(pairs)) if tmux else _osc(pairs)


def wrap_for_tmux(seq: str) -> str:
    """DCS passthrough: tmux hands the inner sequence to the outer terminal (every ESC inside doubled)."""
    return "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + _ST


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Milliseconds, and a callback after some of them (tests pass a fake that moves only when told)."""

    def now(self) -> float: ...

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> Timer: ...


class LoopClock:
    """The real clock: the monotonic clock, and the running asyncio loop's timers (the client runs on anyio's
    asyncio backend; the loop is looked up when a timer is needed, so building the emitter needs none)."""

    def now(self) -> float:
        return time.monotonic() * 1000.0

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> Timer:
        import asyncio

        return asyncio.get_running_loop().call_later(delay_ms / 1000.0, callback)


@dataclass(frozen=True)
class _Sent:
    body: str
    head: str  # state and kind: a report with the same head waits out the throttle
    at: float


class Emitter:
    """Sends reports through `write` by the rules in the module's docstring. It is the seed's emitter once the
    terminal is known to support the protocol: ama decides that before building one (tty_input.py)."""

    def __init__(
        self,
        write: Callable[[str], None],
        *,
        tmux: bool = False,
        app: str | None = None,
        clock: Clock | None = None,
        throttle_ms: float = THROTTLE_MS,
    ) -> None:
        self._write, self._tmux, self._app = write, tmux, app
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._throttle = throttle_ms
        self._wanted: dict[str, Report] = {}  # per id ("" for none): the newest report, sent or not yet
        self._sent: dict[str, _Sent] = {}
        self._timers: dict[str, Timer] = {}

    def report(self, report: Report) -> None:
        """The state of one id (none: the program's own); `clear` also forgets that id and those below it."""
        key = "" if report.id is None else report.id
        wanted = replace(report, app=self._app) if self._app is not None else report
        if report.state == "clear":
            for known in list(self._wanted):
                if key == "" or known == key or known.startswith(key + "/"):
                    self._forget(known)
        self._wanted[key] = wanted
        self._flush(key)
        if report.state == "clear":
            self._wanted.pop(key, None)

    def dispose(self) -> None:
        """Cancel every held report (nothing more is written by this emitter's timers)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _forget(self, key: str) -> None:
        self._wanted.pop(key, None)
        self._sent.pop(key, None)
        self._cancel_timer(key)

    def _cancel_timer(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _due(self, key: str) -> None:
        self._timers.pop(key, None)
        self._flush(key)

    def _flush(self, key: str) -> None:
        report = self._wanted.get(key)
        if report is None:
            return
        text = body(report)
        if text is None:
            return
        last = self._sent.get(key)
        if last is not None and last.body == text:
            return
        head = f"{report.state}:{report.kind or ''}"
        wait = self._wait(last, head)
        if wait > 0 and report.state != "clear":
            if key not in self._timers:  # one timer per id: when it fires, the newest report then is sent
                self._timers[key] = self._clock.call_later(wait, lambda: self._due(key))
            return
        self._send(key, report, text, head)

    def _send(self, key: str, report: Report, text: str, head: str) -> None:
        self._cancel_timer(key)
        seq = _osc(text)
        self._write(wrap_for_tmux(seq) if self._tmux else seq)
        if report.state == "clear":
            self._sent.pop(key, None)
        else:
            self._sent[key] = _Sent(text, head, self._clock.now())

    def _wait(self, last: _Sent | None, head: str) -> float:
        """Milliseconds before a report with this head may follow the last one sent (0: at once)."""
        if last is None or last.head != head:
            return 0.0
        return last.at + self._throttle - self._clock.now()
