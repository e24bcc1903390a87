"""stdin/stdout as anyio byte streams.

Reads and writes run in worker threads on raw file descriptors: asyncio's pipe transports refuse regular
files (an editor may hand us a file or a pty), and a blocking write to a full pipe must never stall the
event loop. Before serving, fd 1 is duplicated for the protocol and fd 1 itself is pointed at stderr, so
a stray print() anywhere (ours or a library's) can never corrupt the protocol stream.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import select
import stat
import threading

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.lowlevel import EventLoopToken
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

# What a call into the event loop raises in this thread when the loop ends while the call waits (a chunk read
# after a stop signal ended the input has no receiver, and its send is cancelled with the loop's tasks).
_LOOP_ENDED = (asyncio.CancelledError, concurrent.futures.CancelledError)


class FdReceiveStream(ByteReceiveStream):
    """Reads a file descriptor in a daemon thread of its own, handing chunks to the event loop.

    A daemon thread, not anyio's worker pool: a read blocked on an idle stdin must not keep the process
    alive after a SIGTERM has ended the server.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks: MemoryObjectReceiveStream[bytes] | None = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._chunks is None:
            send, self._chunks = anyio.create_memory_object_stream[bytes](0)
            token = anyio.lowlevel.current_token()
            threading.Thread(target=self._pump, args=(send, token), name="ama-stdin", daemon=True).start()
        try:
            return await self._chunks.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    def _pump(self, send: MemoryObjectSendStream[bytes], token: EventLoopToken) -> None:
        try:
            while True:
                data = os.read(self._fd, 1 << 20)
                if not data:
                    break
                anyio.from_thread.run(send.send, data, token=token)
        except (OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, *_LOOP_ENDED):
            pass  # stdin went away, or the event loop has ended (input after a stop signal): nothing left to feed
        finally:
            try:
                anyio.from_thread.run_sync(send.close, token=token)
            except (RuntimeError, *_LOOP_ENDED):
                pass  # the event loop has ended: no receiver is left to tell about the end of input

    async def aclose(self) -> None:
        if self._chunks is not None:
            await self._chunks.aclose()


class EndableReceiveStream(ByteReceiveStream):
    """A receive stream wrapped so that its input can be ended from inside the process: after `end()` (a stop signal,
    server.py) a waiting `receive` and every later one raise EndOfStream, as at the real end of input, so the
    reader goes down the EOF path and nothing else (the peer's clean-up) needs a second way to stop.

    Only the wait is cut short: the stream underneath (stdin's reader thread) is left as it is."""

    def __init__(self, inner: ByteReceiveStream) -> None:
        self._inner = inner
        self._waiting: anyio.CancelScope | None = None
        self.ended = False

    def end(self) -> None:
        self.ended = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self.ended:
            raise anyio.EndOfStream
        with anyio.CancelScope() as scope:
            self._waiting = scope
            try:
                return await self._inner.receive(max_bytes)
            finally:
                self._waiting = None
        raise anyio.EndOfStream  # only `end()` cancels this scope: the input ended

    async def aclose(self) -> None:
        await self._inner.aclose()


class FdSendStream(ByteSendStream):
    """Writes straight to a non-blocking pipe when it has room (the usual case: a thread hop per message
    made a 18,000-update replay take seconds); only a full pipe is waited out in a worker thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        mode = os.fstat(fd).st_mode
        # Only a pipe or socket of our own: O_NONBLOCK on a shared terminal would leak to the parent shell.
        self._direct = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        if self._direct:
            os.set_blocking(fd, False)

    async def send(self, item: bytes) -> None:
        sent = 0
        if self._direct:
            try:
                sent = os.write(self._fd, item)
            except BlockingIOError:
                sent = 0
            except BrokenPipeError:
                raise anyio.BrokenResourceError from None
        if sent < len(item):
            await anyio.to_thread.run_sync(_write_all, self._fd, item[sent:])

    async def aclose(self) -> None:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])  # the reader is behind: wait for room, off the event loop
            continue
        except BrokenPipeError:
            raise anyio.BrokenResourceError from None
        view = view[n:]


def protocol_streams() -> tuple[FdReceiveStream, FdSendStream]:
    """Take stdin and stdout for the protocol; from here on fd 1 (print) goes to stderr."""
    proto_out = os.dup(1)
    os.dup2(2, 1)
    return FdReceiveStream(0), FdSendStream(proto_out)
