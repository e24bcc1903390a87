"""Streamed text at the editor's pace: deltas that arrive faster than a frame are merged into one chunk.

A provider may send an answer in 25,000 four-character deltas; an editor that parses and renders one
`agent_message_chunk` line each spends its time on the framing, and gains nothing a person can see past one
frame. During a prompt turn the session hands each text or thought chunk to a `ChunkCoalescer`:

- the first delta of a message goes out at once (the first-chunk latency is the provider's), and so does any
  delta after a quiet spell of at least a window since the last chunk went out;
- deltas that follow sooner are merged (same kind, same message) and go out together one window after the
  last chunk — by a timer, so nothing is held back when the stream pauses — or as soon as the pending text
  reaches `max_chars`;
- every other update (a tool call, usage, a thought after text, the turn's end, a cancel) flushes what is
  pending first, so the order and the content of everything the editor sees are exactly as produced.

Only text chunks of one kind and one message are merged; a chunk with other content (an image, `_meta`) is
passed through like any other update. Outside a turn (replay after load, commands) nothing is merged.
All sends go through one lock, so the timer's flush and the turn's own updates never interleave.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from ama_acp.rpc.errors import UNEXPECTED
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

DEFAULT_WINDOW_S = 0.02  # one frame at 50 Hz: below what a person perceives as a stutter
DEFAULT_MAX_CHARS = 16_384  # a chunk never grows past this: the editor renders steadily, lines stay small

Send = Callable[[w.SessionUpdate], Awaitable[None]]
ChunkKind = type[w.AgentMessageChunk] | type[w.AgentThoughtChunk]
_CHUNK_TYPES = (w.AgentMessageChunk, w.AgentThoughtChunk)


def _mergeable(update: w.SessionUpdate) -> bool:
    if type(update) not in _CHUNK_TYPES:
        return False
    content = update.content  # type: ignore[union-attr]
    return type(content) is w.TextContent and content.annotations is None and content.meta is None


class ChunkCoalescer:
    def __init__(self, send: Send, *, window: float = DEFAULT_WINDOW_S, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self._send = send
        self.window = window
        self.max_chars = max_chars
        self._lock = anyio.Lock()
        self._pending: list[str] = []
        self._pending_chars = 0
        self._kind: ChunkKind | None = None
        self._message_id: str | None = None
        self._last_sent = float("-inf")  # time.monotonic() of the last chunk written
        self._armed: anyio.Event | None = None
        self.active = False  # merging: inside turn() with a window (an attribute: read once a delta)

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Merging is on for the body (a prompt turn), with the timer that flushes a paused stream; what is
        pending when the body ends — normally, by an error or by a cancel — is flushed before it returns."""
        if self.window <= 0:
            yield
            return
        self.active = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._timer)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self.active = False
            with anyio.CancelScope(shield=True):
                await self.flush()

    async def send(self, update: w.SessionUpdate) -> None:
        """Send `update`: a text chunk through `text()`, anything else after what is pending."""
        if self.active and isinstance(update, _CHUNK_TYPES) and _mergeable(update):
            content = update.content
            assert isinstance(content, w.TextContent)
            await self.text(type(update), content.text, update.message_id)
            return
        if not self.active and not self._pending:
            # Outside a turn there is no timer and nothing held: no lock, whose acquire costs a trip through
            # the event loop per update (a load replays thousands).
            await self._send(update)
            return
        async with self._lock:
            await self._flush_locked()
            await self._send(update)

    async def text(self, kind: ChunkKind, text: str, message_id: str | None) -> None:
        """One delta of a message or thought (the hot path: per delta it only appends, most of the time)."""
        if not self.active:
            await self.send(kind(content=w.TextContent(text=text), message_id=message_id))
            return
        same = kind is self._kind and message_id == self._message_id
        if self._pending and not same:
            async with self._lock:
                await self._flush_locked()
        if self._sends_at_once(same):
            self._kind, self._message_id = kind, message_id
            async with self._lock:
                await self._write(kind, message_id, text)
            return
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars >= self.max_chars:
            async with self._lock:
                await self._flush_locked()
        elif len(self._pending) == 1 and self._armed is not None:
            self._armed.set()  # the timer sends it one window after the last chunk

    def _sends_at_once(self, same: bool) -> bool:
        """Nothing is held, and the delta starts a message (`same`: it continues the last one) or follows a
        quiet spell: no reason to wait."""
        return not self._pending and (not same or time.monotonic() - self._last_sent >= self.window)

    async def flush(self) -> None:
        async with self._lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_chars = 0
        assert self._kind is not None
        await self._write(self._kind, self._message_id, text)

    async def _write(self, kind: ChunkKind, message_id: str | None, text: str) -> None:
        self._last_sent = time.monotonic()
        await self._send(kind(content=w.TextContent(text=text), message_id=message_id))

    async def _timer(self) -> None:
        while True:
            self._armed = anyio.Event()
            if not self._pending:
                await self._armed.wait()
            # anyio's clock is the event loop's, time.monotonic() on every backend ama runs on.
            await anyio.sleep(max(0.0, self._last_sent + self.window - time.monotonic()))
            try:
                # Shielded: the flush takes the pending text before it writes, so the turn's end cancelling this
                # task mid-write would lose that text. The turn's own flush waits for the lock, then finds
                # nothing pending, and the order holds.
                with anyio.CancelScope(shield=True):
                    await self.flush()
            except Exception:
                # Sends do not raise (a closed peer is recorded, not raised); if one did, it must not come out of
                # this task as an ExceptionGroup through the turn: the turn's own next send meets it plainly.
                log.exception("%s flushing streamed text", UNEXPECTED)
