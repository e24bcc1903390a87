"""Bytes ↔ lines. Split on `\\n` only, strip a trailing `\\r`, skip blank lines, no small line limit.

anyio's own line reader caps lines; ACP messages carry whole files (a 10 MiB line must work), so this
reads raw chunks and splits itself. `max_line` only guards memory against a peer that never sends `\\n`;
it holds for every line however the reads cut it (a line's fate must not depend on the pipe's timing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from anyio import BrokenResourceError, ClosedResourceError, EndOfStream, Lock
from anyio.abc import ByteReceiveStream, ByteSendStream

from ama_acp.errors import ProtocolError

MAX_LINE = 256 * 1024 * 1024


class LineTooLong(ProtocolError):
    """An incoming line longer than the limit: the connection is closed (its end cannot be found to resync)."""


async def read_lines(stream: ByteReceiveStream, max_line: int = MAX_LINE) -> AsyncIterator[bytes]:
    buf = bytearray()
    while True:
        try:
            chunk = await stream.receive(1 << 20)
        except (EndOfStream, BrokenResourceError, ClosedResourceError):
            break
        start = 0
        nl = chunk.find(b"\n")
        while nl != -1:
            if len(buf) + nl - start > max_line:
                raise LineTooLong(f"line longer than {max_line} bytes")
            if buf:
                buf += chunk[start:nl]
                line = bytes(buf)
                buf.clear()
            else:
                line = chunk[start:nl]
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.strip():
                yield line
            start = nl + 1
            nl = chunk.find(b"\n", start)
        buf += chunk[start:]
        if len(buf) > max_line:
            buf.clear()
            raise LineTooLong(f"line longer than {max_line} bytes")
    if buf.strip():  # a last line without its newline still counts
        yield bytes(buf.rstrip(b"\r"))


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
