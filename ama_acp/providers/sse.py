"""Server-sent events from the raw bytes of a streamed reply, in linear time however the bytes are split.

Standard library only (and the failure type): the transport (stream.py) feeds each read here, the dialect
parsers read the events that come out.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ama_acp.providers.failures import StreamError, malformed


class SSEEvent(NamedTuple):
    event: str  # "" when the server sent no `event:` line
    data: str


MAX_EVENT_BYTES = 64 * 1024 * 1024  # one SSE event (a big tool argument fits; an endless line does not)

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Server-sent events from raw bytes, in linear time however the bytes are split: `\\n`, `\\r\\n` and
    `\\r` all end a line, a blank line ends an event, `:` lines are comments. An unfinished line is kept in a
    bytearray and joined once, so one 40 MiB line costs one copy, not one per chunk. Lines are decoded as
    UTF-8 only once whole (a multi-byte character split across chunks is fine); invalid UTF-8 or an event
    over `max_event` bytes raises `StreamError`."""

    def __init__(self, max_event: int = MAX_EVENT_BYTES) -> None:
        self.max_event = max_event
        self.events = 0  # events delivered so far
        self._line = bytearray()  # the unfinished last line
        self._skip_lf = False  # the last chunk ended in "\r": a "\n" opening the next one belongs to it
        self._start = True  # nothing read yet (a leading BOM is dropped)
        self._event = ""
        self._data: list[str] = []
        self._size = 0  # bytes in the event being built

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._one_event(chunk):
            # One whole event of one data line, the way model servers send a delta: no line loop at all.
            single: list[SSEEvent] = []
            self._data.append(self._text(chunk[6:-2]))
            self._dispatch(single)
            return single
        if self._start and chunk:
            after_bom = self._drop_bom(chunk)
            if after_bom is None:
                return []
            chunk = after_bom
        pos = 0
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                pos = 1
        out: list[SSEEvent] = []
        if b"\r" not in chunk:
            self._feed_lf(chunk, pos, out)
        else:
            self._feed_any(chunk, pos, out)
        return out

    def close(self) -> list[SSEEvent]:
        """The end of the stream: a last event without its blank line is still delivered."""
        out: list[SSEEvent] = []
        if self._line:
            line = bytes(self._line)
            self._line.clear()
            if line.startswith(b"data:"):
                self._take(line, out)
        if self._data:
            self._dispatch(out)
        return out

    def _one_event(self, chunk: bytes) -> bool:
        """Whether `chunk` is exactly one `data: …\\n\\n` event with nothing pending before it."""
        return (
            not self._start
            and not self._line
            and not self._data
            and not self._skip_lf
            and chunk.startswith(b"data: ")
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk.endswith(b"\n\n")
            and b"\r" not in chunk
            and len(chunk) <= self.max_event
        )

    def _drop_bom(self, chunk: bytes) -> bytes | None:
        """The first bytes of the stream without a leading BOM; None while too few have come to tell."""
        head = bytes(self._line) + chunk[:3]
        if len(head) < len(_BOM) and _BOM.startswith(head):
            self._line += chunk  # too short to tell yet
            return None
        self._start = False
        if head.startswith(_BOM):
            chunk = (bytes(self._line) + chunk)[len(_BOM) :]
            self._line.clear()
        return chunk

    def _feed_lf(self, chunk: bytes, pos: int, out: list[SSEEvent]) -> None:
        """The usual case (servers end lines with "\\n"): split at C speed; a long line's middle chunks have no
        "\\n" at all and are only appended."""
        *lines, rest = chunk[pos:].split(b"\n")
        for piece in lines:
            if self._line:
                self._line += piece
                piece = bytes(self._line)
                self._line.clear()
            self._take(piece, out)
        self._line += rest
        if self._size + len(self._line) > self.max_event:
            raise self._too_big()

    def _feed_any(self, chunk: bytes, pos: int, out: list[SSEEvent]) -> None:
        """Every kind of line end ("\\r\\n", "\\r", "\\n"), a "\\r" at the end of the chunk included."""
        for m in _EOL.finditer(chunk, pos):
            piece = chunk[pos : m.start()]
            if self._line:
                self._line += piece
                line = bytes(self._line)
                self._line.clear()
            else:
                line = piece
            self._take(line, out)
            pos = m.end()
            if pos == len(chunk) and m.group() == b"\r":
                self._skip_lf = True
        if pos < len(chunk):
            self._line += chunk[pos:]
            if self._size + len(self._line) > self.max_event:
                raise self._too_big()

    def _take(self, line: bytes, out: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                self._dispatch(out)
            self._event, self._data, self._size = "", [], 0
            return
        if line[0] == 0x3A:  # ":" starts a comment (keepalives)
            return
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._size += len(value) + 1
            if self._size > self.max_event:
                raise self._too_big()
            self._data.append(self._text(value))
        elif field == b"event":
            self._event = self._text(value)
        # `id` and `retry` are of no use to a one-shot POST; unknown fields are ignored, as the spec says

    def _dispatch(self, out: list[SSEEvent]) -> None:
        out.append(SSEEvent(self._event, "\n".join(self._data)))
        self.events += 1
        self._event, self._data, self._size = "", [], 0

    @staticmethod
    def _text(value: bytes) -> str:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise malformed(f"the stream is not valid UTF-8 ({exc.reason})") from None

    def _too_big(self) -> StreamError:
        mib = self.max_event / (1024 * 1024)
        return malformed(f"one event is larger than {mib:g} MiB")
