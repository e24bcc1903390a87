"""What the two dialect parsers (openai.py, anthropic.py) share: the loop from batches of server-sent events to
provider events, the merging of the deltas of one read, typed decoding of a payload, and token counts read
leniently.

A dialect supplies a `ReplyState`: it takes one event at a time and says when the reply is finished;
`parse_replies` runs it over the reads of a stream, keeping the stream's order of text, thought and
everything else.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Protocol, TypeVar

import msgspec

from ama_acp.providers.base import Finished, ProviderEvent, TextDelta, ThinkingDelta
from ama_acp.providers.failures import StreamError, malformed
from ama_acp.providers.sse import SSEEvent

T = TypeVar("T")

log = logging.getLogger(__name__)

# A dialect's stream parser: the events of each read in one list (so it can merge the text deltas of one read);
# an async generator, so the transport can close it when it stops early.
Parser = Callable[[AsyncIterator[list[SSEEvent]]], AsyncGenerator[ProviderEvent, None]]

MAX_TOKEN_COUNT = 2**53 - 1  # the largest count a JSON reader anywhere (JavaScript included) keeps exact


def token_count(value: object, name: str = "a usage figure") -> int | None:
    """A token count the server reported, or None (unknown) when it is not one: a float, a bool, a string,
    a negative number or one past MAX_TOKEN_COUNT. Unknown is not 0: a figure ama did not get is reported as
    unknown, and one bad figure does not cost the reply (the text and tool calls are still good)."""
    if value is None:
        return None
    if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    log.warning("usage: %s is not a token count (%.40r); it is unknown", name, value)
    return None


def decode_event(decoder: msgspec.json.Decoder[T], data: str, what: str) -> T:
    """One SSE data payload into the dialect's typed Struct; `what` names it in the failure ("chunk")."""
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise malformed(f"a {what} of the wrong shape: {exc}") from None
    except msgspec.DecodeError:
        # Not JSON at all: often a line cut in transit, so worth another try.
        raise StreamError("stream", f"malformed {what}: {data[:200]}", retryable=True) from None


class DeltaBuffer:
    """The text and thought deltas of one read, merged: a dialect parser adds each delta here and yields what
    `take()` gives before any other event and at the end of each read, so the order of text, thought and
    everything else is the stream's and only the number of deltas changes."""

    __slots__ = ("_kind", "_parts")

    def __init__(self) -> None:
        self._kind: type[TextDelta] | type[ThinkingDelta] | None = None
        self._parts: list[str] = []

    def text(self, text: str) -> list[ProviderEvent]:
        return self._add(TextDelta, text)

    def thinking(self, text: str) -> list[ProviderEvent]:
        return self._add(ThinkingDelta, text)

    def _add(self, kind: type[TextDelta] | type[ThinkingDelta], text: str) -> list[ProviderEvent]:
        out = self.take() if self._kind is not kind and self._parts else []
        self._kind = kind
        self._parts.append(text)
        return out

    def take(self) -> list[ProviderEvent]:
        """What is held, as one delta (or nothing)."""
        if not self._parts:
            return []
        assert self._kind is not None
        text = self._parts[0] if len(self._parts) == 1 else "".join(self._parts)
        self._parts.clear()
        return [self._kind(text=text)]


class ReplyState(Protocol):
    """One streamed reply as a dialect reads it."""

    held: DeltaBuffer  # the text and thought deltas of the current read

    def event(self, ev: SSEEvent, out: list[ProviderEvent]) -> Finished | None:
        """Take one event, appending what it produces to `out` (held deltas before anything else); the
        `Finished` that ends the reply, when this event ends it. Raises `StreamError`."""
        ...

    def end(self) -> Finished | None:
        """The stream ended without an event that finished the reply: the `Finished` it still makes, or None
        (a broken stream: the transport says so and retries)."""
        ...


async def parse_replies(
    batches: AsyncIterator[list[SSEEvent]], state: ReplyState
) -> AsyncGenerator[ProviderEvent, None]:
    """The provider events of a stream read by `state`. Each read's events come out at its end, its deltas
    merged; anything after the finishing event is never read. A `StreamError` is raised after the events
    before the bad one (what streamed before it is the person's)."""
    async for batch in batches:
        out: list[ProviderEvent] = []
        try:
            for ev in batch:
                finished = state.event(ev, out)
                if finished is not None:
                    for event in out + state.held.take():
                        yield event
                    yield finished
                    return
        except StreamError:
            for event in out + state.held.take():
                yield event
            raise
        for event in out + state.held.take():
            yield event
    finished = state.end()
    if finished is not None:
        yield finished
