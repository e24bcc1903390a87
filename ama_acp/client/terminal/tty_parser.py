"""Bytes from a terminal in, typed events out: what the person typed, and the terminal's replies, told apart.

`InputParser` turns the bytes a terminal sends into typed events, with no I/O: `Text` (one code point each, so
the events of any split of the input equal those of the whole), `Key` (enter, backspace, ctrl-c/d/u/w/z),
`ProgramStatusReply` (`ESC ] 7501 ; ?` …, ended by BEL or ST), `DeviceAttributesReply` (DA1, `ESC [ ? … c`) and
`IgnoredSequence` (every other escape sequence or control: arrows, other CSI, SS3, other OSC, DCS/SOS/PM/APC
strings, lone C0 controls). It is a byte-at-a-time state machine: linear time, and what it holds is bounded
(a string longer than 4,096 bytes, a CSI longer than 256, is consumed to its end without being kept). Invalid
UTF-8 becomes U+FFFD (one per maximal invalid subpart, as Python's own decoder does). Inside a string, a C0
control other than BEL/ESC/CAN/SUB, or DEL, ends the string and is then read as a key: no terminal reply
contains one, and it means Enter, Ctrl-C and Ctrl-D still work after a stray `ESC ]` (Alt+] in some terminals)
instead of everything typed vanishing into a string that never ends.

An ESC is held for the byte after it (ESC `a` is Alt+a, ESC `[` starts a sequence): `feed` alone cannot tell the
Esc key from the start of a sequence, and a timer inside it would break split-invariance. The reader that knows
the input has paused says so with `flush()`, which makes a held lone ESC the Esc key (`tty_input` does that
after ESC_TIMEOUT_S of quiet), so the key typed after Esc is its own.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MAX_SEQUENCE_BYTES",
    "MAX_STRING_BYTES",
    "DeviceAttributesReply",
    "Event",
    "IgnoredSequence",
    "InputParser",
    "Key",
    "KeyName",
    "ProgramStatusReply",
    "SequenceKind",
    "Text",
]

MAX_STRING_BYTES = 4096  # the data of an OSC/DCS/SOS/PM/APC string kept; a longer one is consumed and dropped
MAX_SEQUENCE_BYTES = 256  # the bytes of a CSI/SS3/ESC sequence kept; a longer one is consumed and dropped
_STATUS_PREFIX = b"7501;?"

KeyName = Literal["enter", "backspace", "ctrl-c", "ctrl-d", "ctrl-u", "ctrl-w", "ctrl-z"]
SequenceKind = Literal["control", "esc", "csi", "ss3", "osc", "dcs", "sos", "pm", "apc"]


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
    0x1A: "ctrl-z",
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

    @property
    def holds_escape(self) -> bool:
        """A lone ESC is held, waiting for the byte that says whether it began a sequence."""
        return self._state == _ESCAPE

    def flush(self) -> list[Event]:
        """The input has paused: a held lone ESC was the Esc key, not the start of a sequence. Anything else
        unfinished (a reply cut between two reads, a character's first bytes) stays held."""
        self._out = []
        if self._state == _ESCAPE:
            self._end()
        return self._out

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
            return self._continuation(b)
        if b < 0x80:
            self._ascii(b)
        else:
            self._lead_byte(b)
        return True

    def _continuation(self, b: int) -> bool:
        """A byte after a UTF-8 lead byte: consumed when it continues the character."""
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

    def _ascii(self, b: int) -> None:
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

    def _lead_byte(self, b: int) -> None:
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
