"""The terminal input side of `ama acp-client`: the person's lines, OSC 7501 detection, and the terminal's replies.

Three layers, each usable alone:

`InputParser` turns the bytes a terminal sends into typed events, with no I/O: `Text` (one code point each, so
the events of any split of the input equal those of the whole), `Key` (enter, backspace, ctrl-c/d/u/w),
`ProgramStatusReply` (`ESC ] 7501 ; ?` …, ended by BEL or ST), `DeviceAttributesReply` (DA1, `ESC [ ? … c`) and
`IgnoredSequence` (every other escape sequence or control: arrows, other CSI, SS3, other OSC, DCS/SOS/PM/APC
strings, lone C0 controls). It is a byte-at-a-time state machine: linear time, and what it holds is bounded
(a string longer than 4,096 bytes, a CSI longer than 256, is consumed to its end without being kept). Invalid
UTF-8 becomes U+FFFD (one per maximal invalid subpart, as Python's own decoder does). Inside a string, a C0
control other than BEL/ESC/CAN/SUB, or DEL, ends the string and is then read as a key: no terminal reply
contains one, and it means Enter, Ctrl-C and Ctrl-D still work after a stray `ESC ]` (Alt+] in some terminals)
instead of everything typed vanishing into a string that never ends.

`TerminalInput` owns a tty file descriptor (POSIX). Its terminal mode, chosen so that a reply can never reach the
screen: for the whole client session ECHO, ICANON and IEXTEN stay off (a late reply arriving while a turn runs is
then neither echoed by the tty nor mixed into a line; the next `read_line` swallows it), input is 8-bit with no
CR/NL translation, VMIN=1/VTIME=0, and output post-processing is left on (a newline still returns the carriage). Only ISIG
changes: off while a line is read (Ctrl-C arrives as a byte: `read_line` raises `LineInterrupted`), on while a
turn runs (`with terminal.turn():`, so Ctrl-C is SIGINT as before). `read_line` turns ISIG off for its own
duration and puts back what it found, so it may be called inside `turn()` (the permission prompt). Keys typed
during a turn are not echoed then: they wait in the tty and the next `read_line` reads (and echoes) them. The
original attributes come back when the context exits, on an exception or a cancellation too, and from an
`atexit` hook if the process ends without unwinding.

Editing is the minimum: typed text, backspace (a wide character erases two cells, a combining mark goes with its
base), Ctrl-U, Ctrl-W; arrows and other keys are ignored. Erasing uses backspaces, so a line wider than the
terminal is erased only on its last row. A lone Esc key press waits for the next byte (which ends it as Alt+key):
without a timer the parser cannot tell Esc from the start of a sequence, and a timer would break split-invariance.

`detect_program_status()` writes the OSC 7501 query and then DA1; every terminal answers DA1, and answers in
order, so a 7501 reply first means supported and DA1 first (or nothing within 300 ms) means not. Replies are
swallowed whenever they arrive, before or after the decision, and what the person typed meanwhile waits for the
next `read_line`. If the DA1 reply is still outstanding when the context exits, it is waited for (at most
200 ms) so the restored, echoing tty does not print it.

`resolve_mode()` and `in_tmux()` decide whether to report program status at all.
"""

from __future__ import annotations

import atexit
import errno
import os
import select
import time
import unicodedata
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import anyio

from ama_acp.errors import ControlFlow

__all__ = [
    "DETECT_TIMEOUT_S",
    "MAX_SEQUENCE_BYTES",
    "MAX_STRING_BYTES",
    "PROBE",
    "SequenceKind",
    "DeviceAttributesReply",
    "Event",
    "IgnoredSequence",
    "InputParser",
    "Key",
    "KeyName",
    "LineInterrupted",
    "ProgramStatusReply",
    "TerminalInput",
    "Text",
    "in_tmux",
    "resolve_mode",
]

MAX_STRING_BYTES = 4096  # the data of an OSC/DCS/SOS/PM/APC string kept; a longer one is consumed and dropped
MAX_SEQUENCE_BYTES = 256  # the bytes of a CSI/SS3/ESC sequence kept; a longer one is consumed and dropped
DETECT_TIMEOUT_S = 0.3
EXIT_DRAIN_S = 0.2
PROBE = "\x1b]7501;?\x1b\\" + "\x1b[c"  # the OSC 7501 query, then DA1 (which every terminal answers)
_STATUS_PREFIX = b"7501;?"

KeyName = Literal["enter", "backspace", "ctrl-c", "ctrl-d", "ctrl-u", "ctrl-w"]
SequenceKind = Literal["control", "esc", "csi", "ss3", "osc", "dcs", "sos", "pm", "apc"]


class LineInterrupted(ControlFlow):
    """Ctrl-C while a line was being read; `text` is what had been typed."""

    def __init__(self, text: str = "") -> None:
        super().__init__("interrupted")
        self.text = text


@dataclass(frozen=True, slots=True)
class Text:
    """One typed character (a tab arrives as a space)."""

    text: str


@dataclass(frozen=True, slots=True)
class Key:
    name: KeyName


@dataclass(frozen=True, slots=True)
class ProgramStatusReply:
    """The terminal's answer to the OSC 7501 query; `body` is what followed `7501;?`."""

    body: str


@dataclass(frozen=True, slots=True)
class DeviceAttributesReply:
    """The terminal's DA1 answer (`ESC [ ? 62 ; 22 c` gives (62, 22))."""

    params: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IgnoredSequence:
    """An escape sequence or control that is not text: consumed, shown to nobody. `data` is its bytes (at most
    MAX_STRING_BYTES + 4); `truncated` when it was longer than the parser keeps."""

    kind: SequenceKind
    data: bytes
    truncated: bool = False


Event = Text | Key | ProgramStatusReply | DeviceAttributesReply | IgnoredSequence

_KEYS: dict[int, KeyName] = {
    0x0D: "enter",
    0x0A: "enter",
    0x7F: "backspace",
    0x08: "backspace",
    0x03: "ctrl-c",
    0x04: "ctrl-d",
    0x15: "ctrl-u",
    0x17: "ctrl-w",
}
_STRINGS: dict[int, SequenceKind] = {ord("]"): "osc", ord("P"): "dcs", ord("X"): "sos", ord("^"): "pm", ord("_"): "apc"}
_ESC, _BEL, _CAN, _SUB, _DEL = 0x1B, 0x07, 0x18, 0x1A, 0x7F

# Parser states.
_GROUND, _ESCAPE, _ESC_INTER, _CSI, _STRING, _STRING_ESC = range(6)


class InputParser:
    """Bytes from a terminal in, events out; incremental (`feed` any split of the input) and without I/O."""

    def __init__(self) -> None:
        self._state = _GROUND
        self._buf = bytearray()  # the sequence being read (introducer included), at most its kind's bound
        self._kind: SequenceKind = "esc"
        self._truncated = False
        self._after_cr = False
        # UTF-8: code point so far, continuation bytes still needed, and the allowed range of the next one.
        self._cp, self._need, self._lo, self._hi = 0, 0, 0x80, 0xBF
        self._out: list[Event] = []

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished sequence (bounded whatever the input)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Event]:
        out = self._out = []
        for b in data:
            after_cr, self._after_cr = self._after_cr, False
            if b == 0x0A and after_cr:
                continue  # the \n of a \r\n pair: one enter
            while not self._step(b):
                pass  # the byte ended a sequence and is read again in the new state
        return out

    # Each `_step` returns True when the byte was consumed, False to read it again (the state has changed).

    def _step(self, b: int) -> bool:
        state = self._state
        if state == _GROUND:
            return self._ground(b)
        if state == _ESCAPE:
            return self._escape(b)
        if state == _ESC_INTER:
            return self._esc_inter(b)
        if state == _CSI:
            return self._csi(b)
        if state == _STRING:
            return self._string(b)
        return self._string_esc(b)

    def _ground(self, b: int) -> bool:
        if self._need:
            if self._lo <= b <= self._hi:
                self._cp = (self._cp << 6) | (b & 0x3F)
                self._need -= 1
                self._lo, self._hi = 0x80, 0xBF
                if not self._need:
                    self._char(chr(self._cp))
                return True
            self._need = 0
            self._out.append(Text("\ufffd"))  # an incomplete character; the byte is read on its own
            return False
        if b < 0x80:
            if b == _ESC:
                self._begin(_ESCAPE, "esc", b)
            elif 0x20 <= b < 0x7F:
                self._out.append(Text(chr(b)))
            elif b == 0x09:
                self._out.append(Text(" "))
            elif (key := _KEYS.get(b)) is not None:
                self._out.append(Key(key))
                self._after_cr = b == 0x0D
            else:
                self._out.append(IgnoredSequence("control", bytes((b,))))
            return True
        # A UTF-8 lead byte, with the range its first continuation byte must fall in (no overlong forms, no
        # surrogates, nothing above U+10FFFF).
        if 0xC2 <= b <= 0xDF:
            self._lead(b & 0x1F, 1, 0x80, 0xBF)
        elif 0xE0 <= b <= 0xEF:
            self._lead(b & 0x0F, 2, 0xA0 if b == 0xE0 else 0x80, 0x9F if b == 0xED else 0xBF)
        elif 0xF0 <= b <= 0xF4:
            self._lead(b & 0x07, 3, 0x90 if b == 0xF0 else 0x80, 0x8F if b == 0xF4 else 0xBF)
        else:
            self._out.append(Text("\ufffd"))
        return True

    def _lead(self, bits: int, need: int, lo: int, hi: int) -> None:
        self._cp, self._need, self._lo, self._hi = bits, need, lo, hi

    def _char(self, ch: str) -> None:
        if unicodedata.category(ch) == "Cc":  # a C1 control sent as UTF-8: a terminal might act on it
            self._out.append(IgnoredSequence("control", ch.encode("utf-8")))
        else:
            self._out.append(Text(ch))

    def _begin(self, state: int, kind: SequenceKind, b: int) -> None:
        self._state, self._kind, self._truncated = state, kind, False
        self._buf = bytearray((b,))

    def _add(self, b: int, limit: int) -> None:
        if len(self._buf) < limit:
            self._buf.append(b)
        else:
            self._truncated = True

    def _end(self, event: Event | None = None) -> None:
        if event is None:
            event = IgnoredSequence(self._kind, bytes(self._buf), self._truncated)
        self._out.append(event)
        self._state, self._buf, self._truncated = _GROUND, bytearray(), False

    def _escape(self, b: int) -> bool:
        if b == ord("["):
            self._buf.append(b)
            self._state, self._kind = _CSI, "csi"
        elif b == ord("O"):
            self._buf.append(b)
            self._state, self._kind = _CSI, "ss3"  # SS3 is read like a CSI: parameters, then a final byte
        elif (kind := _STRINGS.get(b)) is not None:
            self._buf.append(b)
            self._state, self._kind = _STRING, kind
        elif 0x20 <= b <= 0x2F:
            self._buf.append(b)
            self._state = _ESC_INTER
        elif 0x30 <= b <= 0x7E:  # a two-byte escape (Alt+key, a stray ST)
            self._buf.append(b)
            self._end()
        elif b == _ESC:
            self._end()
            self._begin(_ESCAPE, "esc", b)
        else:
            self._end()  # a lone ESC; the byte is read on its own
            return False
        return True

    def _esc_inter(self, b: int) -> bool:
        if 0x20 <= b <= 0x2F:
            self._add(b, MAX_SEQUENCE_BYTES)
            return True
        if 0x30 <= b <= 0x7E:
            self._add(b, MAX_SEQUENCE_BYTES + 1)
            self._end()
            return True
        self._end()
        return False

    def _csi(self, b: int) -> bool:
        if 0x20 <= b <= 0x3F:
            self._add(b, MAX_SEQUENCE_BYTES)
            return True
        if 0x40 <= b <= 0x7E:
            self._add(b, MAX_SEQUENCE_BYTES + 1)
            self._end(self._device_attributes())
            return True
        self._end()  # not a CSI byte: the sequence is cut short, the byte is read on its own
        return False

    def _device_attributes(self) -> Event | None:
        buf = self._buf
        if self._truncated or self._kind != "csi" or buf[-1] != ord("c") or buf[2:3] != b"?":
            return None
        params = bytes(buf[3:-1])
        if params.strip(b"0123456789;"):
            return None
        return DeviceAttributesReply(tuple(int(p) for p in params.split(b";") if p))

    def _string(self, b: int) -> bool:
        if b >= 0x20 and b != _DEL:
            self._add(b, MAX_STRING_BYTES + 2)
            return True
        if b == _ESC:
            self._state = _STRING_ESC
            return True
        if b == _BEL and self._kind == "osc":
            self._finish_string(b"\x07")
            return True
        if b in (_CAN, _SUB):  # cancels the string, and is consumed with it
            self._end()
            return True
        self._end()  # see the module docstring: Enter, Ctrl-C, ... end a string and still count as keys
        return False

    def _string_esc(self, b: int) -> bool:
        if b == ord("\\"):
            self._finish_string(b"\x1b\\")
            return True
        self._end()  # ESC not followed by `\` ends the string; the ESC starts a new sequence
        self._begin(_ESCAPE, "esc", _ESC)
        return False

    def _finish_string(self, terminator: bytes) -> None:
        data = bytes(self._buf[2:])
        if self._kind == "osc" and not self._truncated and data.startswith(_STATUS_PREFIX):
            self._end(ProgramStatusReply(data[len(_STATUS_PREFIX) :].decode("utf-8", "replace")))
            return
        self._buf += terminator
        self._end()


def in_tmux(env: Mapping[str, str] | None = None) -> bool:
    """Inside tmux: TMUX is set and not empty."""
    return bool((os.environ if env is None else env).get("TMUX"))


def resolve_mode(mode: str, *, stdin_tty: bool, stdout_tty: bool, tmux: bool) -> Literal["on", "off", "detect"]:
    """`on` reports program status whatever the terminal (the encoder wraps it for tmux); `off` never; `auto`
    detects, except inside tmux or when stdin or stdout is not a terminal, where it is off."""
    if mode == "on":
        return "on"
    if mode == "off":
        return "off"
    if mode == "auto":
        return "detect" if stdin_tty and stdout_tty and not tmux else "off"
    raise ValueError(f"unknown program-status mode {mode!r} (on, off or auto)")


def _cells(ch: str) -> int:
    """Terminal cells a character takes (close enough for erasing what was echoed)."""
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _erase(cells: int) -> str:
    return "\b" * cells + " " * cells + "\b" * cells


class TerminalInput:
    """A tty read by this process: `with TerminalInput(fd, write, flush) as term:` then `await term.read_line(…)`.

    `write` (and `flush`, if given, after each write) is where the prompt, the echo and the probe go: the same
    terminal, through whatever the caller writes its output with, so the two never interleave out of order."""

    read_size = 4096

    def __init__(self, fd: int, write: Callable[[str], object], flush: Callable[[], object] | None = None) -> None:
        self._fd = fd
        self._write, self._flush = write, flush
        self._parser = InputParser()
        self._pending: deque[Event] = deque()  # read but not yet used by a line (type-ahead)
        self._saved: list[Any] | None = None
        self._signals = False
        self._eof = False
        self._probe_open = False  # the probe was written and no reply has decided yet
        self._decision: bool | None = None
        self._awaiting_da1 = False
        self.program_status: bool | None = None  # what the last detection decided

    # --- the terminal mode ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        import termios

        if self._saved is not None:
            raise RuntimeError("this TerminalInput is already in use")
        if not os.isatty(self._fd):
            raise ValueError(f"file descriptor {self._fd} is not a terminal")
        self._saved = termios.tcgetattr(self._fd)
        atexit.register(self._restore)
        try:
            self._apply(signals=False)
        except BaseException:
            self._restore()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._awaiting_da1:
                self._drain(EXIT_DRAIN_S)
        finally:
            self._restore()

    def _apply(self, *, signals: bool) -> None:
        import termios

        assert self._saved is not None
        attrs = list(self._saved)
        attrs[6] = list(self._saved[6])
        attrs[0] &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.ISTRIP)
        attrs[3] &= ~(termios.ICANON | termios.ECHO | termios.ECHONL | termios.IEXTEN | termios.ISIG)
        if signals:
            attrs[3] |= termios.ISIG
        attrs[6][termios.VMIN] = 1
        attrs[6][termios.VTIME] = 0
        termios.tcsetattr(self._fd, termios.TCSANOW, attrs)
        self._signals = signals

    def _restore(self) -> None:
        import termios

        saved, self._saved = self._saved, None
        if saved is None:
            return
        atexit.unregister(self._restore)
        try:
            termios.tcsetattr(self._fd, termios.TCSANOW, saved)
        except (OSError, termios.error):
            pass  # the terminal is gone (hung up, closed): nothing left to restore

    def set_signals(self, enabled: bool) -> None:
        """ISIG on (Ctrl-C is SIGINT) or off (Ctrl-C is a byte `read_line` reads); the rest of the mode stays."""
        self._require_open()
        if enabled != self._signals:
            self._apply(signals=enabled)

    @contextmanager
    def turn(self) -> Iterator[None]:
        """While a turn runs: Ctrl-C is SIGINT again; afterwards it is a byte again."""
        self.set_signals(True)
        try:
            yield
        finally:
            if self._saved is not None:
                self.set_signals(False)

    def _require_open(self) -> None:
        if self._saved is None:
            raise RuntimeError("use TerminalInput inside its `with` block")

    # --- reading --------------------------------------------------------------------------------------

    def _out(self, text: str) -> None:
        if not text:
            return
        try:
            self._write(text)
            if self._flush is not None:
                self._flush()
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            # The terminal hung up: there is no screen left to write to, and reading now ends the input.

    def _read(self) -> bytes:
        try:
            return os.read(self._fd, self.read_size)
        except OSError as exc:
            if exc.errno == errno.EIO:  # Linux: the other end of the tty hung up
                return b""
            raise

    def _feed(self, data: bytes) -> None:
        """Parse `data`: replies are taken here (whenever they come), everything else waits for a line."""
        for event in self._parser.feed(data):
            if isinstance(event, ProgramStatusReply):
                if self._probe_open:
                    self._probe_open, self._decision = False, True
            elif isinstance(event, DeviceAttributesReply):
                self._awaiting_da1 = False
                if self._probe_open:
                    self._probe_open, self._decision = False, False
            else:
                self._pending.append(event)

    async def _fill(self) -> bool:
        """Wait for input and parse it; False at the end of input."""
        if self._eof:
            return False
        await anyio.wait_readable(self._fd)
        data = self._read()
        if not data:
            self._eof = True
            return False
        self._feed(data)
        return True

    def _drain(self, budget: float) -> None:
        """Read (blocking, at most `budget` seconds) until the outstanding DA1 reply has come."""
        deadline = time.monotonic() + budget
        while self._awaiting_da1 and not self._eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                ready, _, _ = select.select([self._fd], [], [], left)
                data = self._read() if ready else None
            except OSError:
                return
            if data is None:
                return
            if not data:
                self._eof = True
                return
            self._feed(data)

    async def detect_program_status(self, timeout: float = DETECT_TIMEOUT_S) -> bool:
        """Ask the terminal whether it reads OSC 7501 (see the module docstring); the answer is also kept in
        `program_status`."""
        self._require_open()
        self._decision = None
        self._probe_open = self._awaiting_da1 = True
        try:
            self._out(PROBE)
            with anyio.move_on_after(timeout):
                while self._probe_open and await self._fill():
                    pass
        finally:
            self._probe_open = False
        self.program_status = bool(self._decision)
        return self.program_status

    async def read_line(self, prompt: str) -> str | None:
        """Write `prompt`, read one line with echo and editing; None at Ctrl-D on an empty line or the end of
        input. Ctrl-C raises `LineInterrupted`. What follows the line's Enter stays for the next call."""
        self._require_open()
        restore_signals = self._signals
        if restore_signals:
            # Before the prompt shows: a Ctrl-C typed the moment it appears must be this line's, not a SIGINT.
            self.set_signals(False)
        self._out(prompt)
        try:
            return await self._edit()
        finally:
            if restore_signals and self._saved is not None:
                self.set_signals(True)

    async def _edit(self) -> str | None:
        chars: list[str] = []
        echo: list[str] = []
        try:
            while True:
                if not self._pending:
                    self._out("".join(echo))
                    echo.clear()
                    if not await self._fill() and not self._pending:
                        echo.append("\n")
                        return None
                    continue
                event = self._pending.popleft()
                if isinstance(event, Text):
                    chars.append(event.text)
                    echo.append(event.text)
                elif not isinstance(event, Key):
                    continue  # an escape sequence: never text, never echoed
                elif event.name == "enter":
                    echo.append("\n")
                    return "".join(chars)
                elif event.name == "ctrl-c":
                    echo.append("^C\n")
                    raise LineInterrupted("".join(chars))
                elif event.name == "ctrl-d":
                    if not chars:
                        echo.append("\n")
                        return None
                else:
                    echo.append(_erase(_rub_out(chars, event.name)))
        finally:
            self._out("".join(echo))


def _rub_out(chars: list[str], key: KeyName) -> int:
    """Remove from `chars` what backspace (one character and the marks on it), ctrl-w (a word and the spaces
    after it) or ctrl-u (everything) removes; returns the cells to erase."""
    cells = 0
    if key == "ctrl-u":
        cells = sum(_cells(ch) for ch in chars)
        chars.clear()
    elif key == "ctrl-w":
        while chars and chars[-1].isspace():
            cells += _cells(chars.pop())
        while chars and not chars[-1].isspace():
            cells += _cells(chars.pop())
    else:
        while chars:
            width = _cells(chars.pop())
            cells += width
            if width:
                break
    return cells
