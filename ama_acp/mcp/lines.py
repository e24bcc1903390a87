"""A stdio MCP server's output split into lines: linear in the bytes and bounded in memory.

Why not the SDK's reader: `mcp.client.stdio` keeps the unfinished line in a `str` and, on every read, joins it
to the new chunk and splits the whole thing again (`(buffer + chunk).split("\\n")`). One long line without a
newline therefore costs time quadratic in its length (a 20 MB line read 64 KiB at a time copies gigabytes) and
memory without any bound; the SDK offers no cap. Here each byte is searched for a newline once (the search
resumes where the last one stopped), a line is copied once when it is complete, and an unfinished line longer
than the cap ends the server with `LineTooLong` (docs/tools.md "MCP servers").
"""

from __future__ import annotations

from ama_acp.errors import ProtocolError

__all__ = ["MAX_LINE_BYTES", "LineSplitter", "LineTooLong"]

# One JSON-RPC message from a server. Generous for a real tools/list or a tool result (16 MiB of JSON is far
# past what a model can take in); a server past it is broken or hostile.
MAX_LINE_BYTES = 16 * 1024 * 1024


class LineTooLong(ProtocolError):
    """A server sent more than `limit` bytes without a line break (the server fails; its session goes on)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"sent a message longer than {limit // (1024 * 1024)} MiB without a line break")
        self.limit = limit


class LineSplitter:
    """Bytes in (as they arrive), whole lines out (without their `\\n`).

    The buffer never holds more than `limit` plus one chunk: `peak` records the most it held, so a test can
    check the bound.
    """

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self.peak = 0
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already known to hold no newline

    @property
    def pending(self) -> int:
        """Bytes of the unfinished line."""
        return len(self._buffer)

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines this chunk completes. Raises LineTooLong when a line (finished or not) passes the limit."""
        buffer = self._buffer
        buffer += chunk
        self.peak = max(self.peak, len(buffer))
        lines: list[bytes] = []
        start = 0
        end = buffer.find(b"\n", self._scanned)
        while end != -1:
            if end - start > self.limit:
                raise LineTooLong(self.limit)
            lines.append(bytes(buffer[start:end]))
            start = end + 1
            end = buffer.find(b"\n", start)
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        if len(buffer) > self.limit:
            raise LineTooLong(self.limit)
        return lines
