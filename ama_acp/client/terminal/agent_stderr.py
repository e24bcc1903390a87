"""The agent's stderr, shown to the person line by line with its controls made visible.

An agent inheriting the client's stderr could write anything to the person's terminal: an OSC 52 that sets the
clipboard, a title, a forged OSC 7501 status, a DSR query the terminal answers by typing into the shell. So the
agent gets a pipe instead, and each line read from it is written through `one_line` (ama_acp/textsafe.py). A
line is kept up to MAX_LINE bytes; the rest of it is counted and told, never held, so an agent that writes one
endless line costs the client nothing.

POSIX only (the pipe is watched with the event loop); elsewhere the agent inherits stderr as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import anyio

from ama_acp.textsafe import one_line

MAX_LINE = 4096  # bytes of one stderr line shown
_READ = 65536


class AgentStderr:
    """A pipe for the agent's stderr: `child_fd` goes to the process, `pump()` shows what arrives on `write`.

    `spawned()` once the process started (the client's copy of the write end is closed, so the pipe ends when
    the agent and its children are gone); `close()` when done (whatever was read of an unfinished line is shown).
    """

    def __init__(self, write: Callable[[str], object]) -> None:
        self._write = write
        self._read_fd, self.child_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._partial = bytearray()
        self._cut = 0  # bytes of the current line past MAX_LINE, not kept
        self._child_open = True
        self._closed = False
        self.ended = anyio.Event()  # the pipe reached its end (every writer gone)

    def spawned(self) -> None:
        if self._child_open:
            self._child_open = False
            os.close(self.child_fd)

    async def pump(self) -> None:
        """Read until the pipe ends (or the task is cancelled); never raises for what the agent does."""
        try:
            while not self._closed:
                await anyio.wait_readable(self._read_fd)
                try:
                    data = os.read(self._read_fd, _READ)
                except BlockingIOError:
                    continue
                if not data:
                    break
                self.feed(data)
        except (OSError, anyio.ClosedResourceError):
            pass  # the pipe went away under us: nothing more to show
        finally:
            self.ended.set()

    def feed(self, data: bytes) -> None:
        """Take in bytes read from the agent; show each complete line."""
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            room = MAX_LINE - len(self._partial)
            self._partial += piece[: max(room, 0)]
            self._cut += max(len(piece) - max(room, 0), 0)
            if end < 0:
                return
            self._show()
            start = end + 1

    def _show(self) -> None:
        raw = bytes(self._partial)
        if raw.endswith(b"\r"):
            raw = raw[:-1]  # CR LF: the line's end, not a character of it
        text = one_line(raw.decode("utf-8", errors="replace"))
        if self._cut:
            text += f"… ({self._cut} more bytes of this line not shown)"
        self._partial.clear()
        self._cut = 0
        try:
            self._write(text + "\n")
        except (OSError, ValueError):
            pass  # our own stderr is gone: the agent's cannot be shown either

    def _drain(self, limit: int = 1024 * 1024) -> None:
        """What is already in the pipe (the agent's last words before the pump was stopped), up to `limit`."""
        taken = 0
        while taken < limit:
            try:
                data = os.read(self._read_fd, _READ)
            except OSError:  # BlockingIOError: nothing more for now
                return
            if not data:
                return
            taken += len(data)
            self.feed(data)

    def close(self) -> None:
        """Show an unfinished last line and release both ends of the pipe."""
        if self._closed:
            return
        self.spawned()
        self._drain()
        if self._partial or self._cut:
            self._show()
        self._closed = True
        os.close(self._read_fd)
