"""Bytes ↔ lines. Split on `\\n` only, strip a trailing `\\r`, skip blank lines, no small line limit.

anyio's own line reader caps lines; ACP messages carry whole files (a 10 MiB line must work), so this
reads raw chunks and splits itself. `max_line` only guards memory against a peer that never sends `\\n`;
it holds for every line however the reads cut it (a line's fate must not depend on the pipe's timing).

`LineSplitter` is the splitting itself, lines as they came; `read_lines` is what the server reads through it.
ama's own client (`client/reader.py`) reads an agent's stdout through the same splitter, with its own cap, and
keeps the blank lines, the CRs and a last line without its newline, to report them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from anyio import BrokenResourceError, ClosedResourceError, EndOfStream, Lock
from anyio.abc import ByteReceiveStream, ByteSendStream

from ama_acp.errors import ProtocolError

MAX_LINE = 256 * 1024 * 1024


# How much of a line over the limit `LineTooLong` keeps: enough to show what it was, never the line.
HEAD_KEPT = 4096


class LineTooLong(ProtocolError):
    """An incoming line longer than the limit: the connection is closed (its end cannot be found to resync).
    `head` is the line's first bytes (at most HEAD_KEPT), for a reader that reports what it refused."""

    def __init__(self, message: str, head: bytes = b"") -> None:
        super().__init__(message)
        self.head = head


class LineSplitter:
    """Chunks in, whole lines out, as they are: no `\\r` stripped, blank lines kept (what a line means is the
    reader's business: `read_lines` below, and ama's own client, which reports what an agent's stdout holds).

    A line is split out once: an unfinished line waits in a bytearray and only the new chunk is searched for
    its end, so a 10 MiB line costs one copy however the reads cut it. `feed` raises LineTooLong at the first
    line longer than `max_line`, after yielding the lines before it; nothing more can be read after that.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        buf = self._buf
        start = 0
        nl = chunk.find(b"\n")
        while nl != -1:
            if len(buf) + nl - start > self.max_line:
                raise self._too_long(chunk[start : min(nl, start + HEAD_KEPT)])
            if buf:
                buf += chunk[start:nl]
                line = bytes(buf)
                buf.clear()
            else:
                line = chunk[start:nl]
            start = nl + 1
            yield line
            nl = chunk.find(b"\n", start)
        buf += chunk[start:]
        if len(buf) > self.max_line:
            raise self._too_long(b"")

    def rest(self) -> bytes:
        """The bytes after the last newline (at EOF: a last line without its newline, or nothing)."""
        rest = bytes(self._buf)
        self._buf.clear()
        return rest

    def _too_long(self, more: bytes) -> LineTooLong:
        head = bytes(self._buf[:HEAD_KEPT]) + more
        self._buf.clear()
        return LineTooLong(f"line longer than {self.max_line} bytes", head[:HEAD_KEPT])


async def read_lines(stream: ByteReceiveStream, max_line: int = MAX_LINE) -> AsyncIterator[bytes]:
    lines = LineSplitter(max_line)
    while True:
        try:
            chunk = await stream.receive(1 << 20)
        except (EndOfStream, BrokenResourceError, ClosedResourceError):
            break
        for line in lines.feed(chunk):
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.strip():
                yield line
    rest = lines.rest()
    if rest.strip():  # a last line without its newline still counts
        yield rest.rstrip(b"\r")


class LineWriter:
    """The single writer of stdout: one message, one line, one lock."""

    def __init__(self, stream: ByteSendStream) -> None:
        self._stream = stream
        self._lock = Lock()
        self.closed = False

    async def write(self, data: bytes) -> None:
        if b"\n" in data:  # msgspec never emits raw newlines; this guards the invariant (R3)
            raise ValueError("a protocol message may not contain a raw newline")
        async with self._lock:
            if self.closed:
                return
            try:
                await self._stream.send(data + b"\n")
            except (BrokenResourceError, ClosedResourceError):
                self.closed = True
