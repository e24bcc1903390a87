"""Server-sent events parsed from chunks given at once (text chunks are encoded as UTF-8): what a test of the
SSE reader needs without a transport around it."""

from __future__ import annotations

from collections.abc import Iterable

from ama_acp.providers.sse import SSEEvent, SSEParser


def sse_events(chunks: Iterable[bytes | str], parser: SSEParser | None = None) -> list[SSEEvent]:
    """The events of `chunks` fed one by one to `parser` (a new one by default), then the end of the stream."""
    parser = parser or SSEParser()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk.encode() if isinstance(chunk, str) else chunk)
    return events + parser.close()
