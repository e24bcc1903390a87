"""One streaming POST with retries (`HttpStream`): the transport both HTTP dialects share.

The dialect modules (openai.py, anthropic.py) build a request body and parse server-sent events into provider
events; this module sends the body, bounds the reply in time and size, turns every way an attempt can fail
into an `Outcome` (failures.py), and retries what `retry.py` says may succeed — so both providers fail the
same way.

The HTTP itself is exchange.py's (httpcore, or httpx where it must), imported by the first request only: importing a
provider module must stay cheap (`ama --version`, `ama models` and the ACP handshake never touch the network).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import TYPE_CHECKING

import anyio
import msgspec

from ama_acp.errors import ProviderError
from ama_acp.providers.base import Accepted, Failure, Finished, ProviderEvent, Retrying
from ama_acp.providers.dialect import Parser
from ama_acp.providers.exchange import Reply, send, transport_error
from ama_acp.providers.failures import KeyHint, Outcome, StreamError, error_detail, give_up, safe_url, scrub
from ama_acp.providers.retry import classify_status
from ama_acp.providers.sse import MAX_EVENT_BYTES, SSEEvent, SSEParser
from ama_acp.providers.tls import certificate_failure

if TYPE_CHECKING:
    from ama_acp.providers.settings import ProviderSettings

log = logging.getLogger(__name__)

MAX_ERROR_BODY = 64 * 1024  # bytes of an error body we read; the rest is never downloaded
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # one streamed reply; ~8x the largest real one (128k tokens of deltas)


class _DeadlineExceeded(ProviderError):
    """The whole-request deadline passed (raised outside any cancel scope, so it never meets a `yield`)."""


def _remaining(deadline: float) -> float:
    # Deadlines are on time.monotonic(), the event loop's own clock, read without anyio's backend lookup (a
    # microsecond or two, once per read of a stream).
    return max(0.0, deadline - time.monotonic())


async def _before(deadline: float, it: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """`it`'s chunks while `deadline` has not passed (an error body, read whole). Each wait for the next chunk
    gets its own cancel scope: a scope held open across a `yield` would cancel the consumer's code instead."""
    while True:
        chunk = await _read_before(deadline, it)
        if chunk is None:
            return
        yield chunk


async def _read_before(deadline: float, it: AsyncIterator[bytes]) -> bytes | None:
    """The next chunk of `it`, None at its end; `_DeadlineExceeded` once `deadline` has passed.

    The deadline is checked before each read, not guarded by a cancel scope around it: a scope per read cost
    ~20 µs, most of what a delta costs, and one cannot be held across a `yield`. A read that waits is bounded by
    the transport's read timeout (the same `timeout`, given to `send`): a server that keeps sending (keepalives,
    endless text) is stopped at the deadline, one that stalls `timeout` after its last byte."""
    if time.monotonic() >= deadline:
        raise _DeadlineExceeded
    try:
        return await it.__anext__()
    except StopAsyncIteration:
        return None


async def sse_batches(
    chunks: AsyncIterator[bytes], deadline: float, meter: _Meter, parser: SSEParser
) -> AsyncGenerator[list[SSEEvent], None]:
    """The server-sent events of each read of a streamed body, in one list per read (none for a read that
    finished no event), within the deadline and the reply's bound. One generator for the whole path from bytes
    to events, so a delta costs no extra hop per layer.

    Reads are never paced to gather more events per read: a receiver that reads late makes its ACKs late, and a
    server that waits for them before its next small write (Nagle) then stalls — measured: 77× slower."""
    while True:
        chunk = await _read_before(deadline, chunks)
        if chunk is None:
            break
        meter.take(chunk)
        events = parser.feed(chunk)
        if events:
            yield events
    events = parser.close()
    if events:
        yield events


class _Meter:
    """Counts a response's bytes (bounding the reply) and keeps its first bytes for messages."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.head = b""

    def take(self, chunk: bytes) -> None:
        if len(self.head) < 200:
            self.head += chunk[: 200 - len(self.head)]
        self.total += len(chunk)
        if self.total > self.limit:
            raise StreamError("stream", f"the reply is larger than {self.limit // (1024 * 1024)} MiB", retryable=False)


async def read_bounded(chunks: AsyncIterator[bytes], limit: int = MAX_ERROR_BODY) -> bytes:
    """At most `limit` bytes of a body; the rest is never read (the caller closes the response)."""
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk[: limit - len(buf)]
        if len(buf) >= limit:
            break
    return bytes(buf)


def _html_title(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    low = text.lower()
    start = low.find("<title")
    start = low.find(">", start) + 1 if start >= 0 else -1
    end = low.find("</title>", start) if start > 0 else -1
    title = " ".join(text[start:end].split()) if end > start else ""
    return title[:200]


class HttpStream:
    """Streaming POSTs to one endpoint, with classification and retries. One instance per provider.

    `settings` (already filled for the dialect) gives the name, timeout, retry policy, key and transport;
    `url` and `headers` (which hold the key: never logged) are the dialect's. `timeout` is a deadline for a whole
    attempt, from connecting to the last byte: a server that trickles keepalive comments forever still times out.
    """

    max_response_bytes = MAX_RESPONSE_BYTES  # tests shrink these on an instance
    max_event_bytes = MAX_EVENT_BYTES

    def __init__(self, settings: ProviderSettings, *, url: str, headers: Mapping[str, str], key: KeyHint) -> None:
        self.provider = settings.name
        self.url = url
        self._headers = dict(headers)  # holds the key: never log or repr it
        self.timeout = settings.timeout
        self.retry = settings.retry
        self.key = key
        self._secret = settings.api_key
        self.transport = settings.transport

    def __repr__(self) -> str:
        return f"HttpStream(provider={self.provider!r}, url={safe_url(self.url)!r})"

    async def stream(self, body: Mapping[str, object], parse: Parser) -> AsyncGenerator[ProviderEvent, None]:
        """POST `body`, feed the SSE stream to `parse`, and pass its events on. Ends with exactly one
        `Finished` or `Failure`; a retry is announced with `Retrying` (the caller drops partial output).
        Never raises but for cancellation, whatever the server sends."""
        payload = msgspec.json.encode(body)
        retries = self.retry.max_retries
        for attempt in range(retries + 1):
            log.debug("%s: POST %s (attempt %d)", self.provider, safe_url(self.url), attempt + 1)
            outcome: Outcome | None = None
            async with contextlib.aclosing(self._attempt(payload, parse)) as events:
                async for item in events:
                    if isinstance(item, Outcome):
                        outcome = item
                        break
                    yield item
                    if isinstance(item, Finished | Failure):
                        return
            if outcome is None:  # unreachable: _attempt ends with a terminal event or an outcome
                outcome = Outcome("stream", "the reply ended without a result", False)
            if not outcome.retryable or attempt >= retries:
                yield self._give_up(outcome, attempt)
                return
            delay = self.retry.delay(outcome, attempt + 1)
            reason = outcome.short()
            log.warning("%s: %s; retry %d of %d in %.1fs", self.provider, reason, attempt + 1, retries, delay)
            yield Retrying(attempt=attempt + 1, delay=delay, reason=reason)
            await anyio.sleep(delay)

    async def _attempt(self, payload: bytes, parse: Parser) -> AsyncGenerator[ProviderEvent | Outcome, None]:
        """One POST: its provider events, then (unless one was terminal) the `Outcome` of its failure."""
        deadline = time.monotonic() + self.timeout
        try:
            async with contextlib.AsyncExitStack() as stack:
                with anyio.move_on_after(_remaining(deadline)) as scope:
                    resp = await stack.enter_async_context(
                        send(
                            "POST",
                            self.url,
                            self._headers,
                            payload,
                            timeout=self.timeout,
                            connect_timeout=min(self.timeout, 30.0),
                            transport=self.transport,
                        )
                    )
                if scope.cancelled_caught:
                    raise _DeadlineExceeded
                chunks = resp.chunks
                body = _before(deadline, chunks)
                stack.push_async_callback(body.aclose)
                refused = await self._refusal(resp, body)
                if refused is not None:
                    yield refused
                    return
                yield Accepted()  # a 2xx stream: the provider bills this attempt from here on
                meter = _Meter(self.max_response_bytes)
                sse = SSEParser(self.max_event_bytes)
                batches = sse_batches(chunks, deadline, meter, sse)
                stack.push_async_callback(batches.aclose)
                events = parse(batches)
                stack.push_async_callback(events.aclose)
                async for event in events:
                    yield event
                    if isinstance(event, Finished | Failure):
                        return
                yield self._ended_early(meter, sse)
        except Exception as exc:
            yield self._outcome_of(exc)

    async def _refusal(self, resp: Reply, body: AsyncIterator[bytes]) -> Outcome | None:
        """Why a response is not a stream to read (an error status, a JSON answer, a web page), or None."""
        ctype = resp.headers.get("content-type", "").lower()
        if resp.status >= 300:
            raw = await read_bounded(body)
            detail = self._scrub(error_detail(raw))
            return classify_status(resp.status, resp.headers, raw, detail, self.retry.retry_after_cap)
        if ctype.startswith("application/json"):
            # The server ignored `stream: true` or answered an error with 200.
            raw = await read_bounded(body)
            return Outcome("bad_request", f"expected a stream, got JSON: {self._scrub(error_detail(raw))}", False)
        if ctype.startswith("text/html"):
            # A web page, not an API: usually a base URL that points at a site or a login portal.
            title = _html_title(await read_bounded(body))
            what = f" ({self._scrub(title)})" if title else ""
            return Outcome("bad_request", f"expected a stream, got an HTML page{what}; check the base URL", False)
        return None

    def _outcome_of(self, exc: Exception) -> Outcome:
        """What an exception that ended an attempt means. Called while it is being handled (the log keeps its
        traceback when it is a bug of ours). The transport's errors are httpcore's (a request sent straight) or
        httpx's (exchange.py says when): one `_transport_outcome` for both."""
        match exc:
            case _DeadlineExceeded():
                return Outcome("timeout", f"timed out after {self.timeout:g}s without a complete reply", True)
            case StreamError():
                return Outcome(exc.kind, self._scrub(exc.detail), exc.retryable, exc.status, protocol=exc.protocol)
        if (kind := transport_error(exc)) is not None:
            return self._transport_outcome(kind, exc)
        # A bug of ours met an input nobody foresaw. The contract (never raise) holds, and the traceback goes to the
        # log; the fuzz tests look for this wording.
        log.exception("%s: internal error while reading the reply", self.provider)
        return Outcome("stream", f"internal error reading the reply: {type(exc).__name__}", False)

    def _transport_outcome(self, kind: str, exc: Exception) -> Outcome:
        if kind in ("connect_timeout", "timeout"):
            what = "connecting" if kind == "connect_timeout" else "waiting for the server"
            return Outcome("timeout", f"timed out after {self.timeout:g}s {what}", True)
        if kind == "connect" and (why := certificate_failure(exc)) is not None:
            detail = f"its TLS certificate failed verification ({self._scrub(why)})"
            return Outcome("server", detail, False, connect=True, certificate=True)
        if kind == "connect":
            return Outcome("server", f"could not connect: {self._scrub(str(exc)) or 'refused'}", True, connect=True)
        # The connection dropped mid-body (incomplete chunked read, reset, ...).
        return Outcome("stream", f"connection lost: {self._scrub(str(exc)) or type(exc).__name__}", True)

    def _ended_early(self, meter: _Meter, sse: SSEParser) -> Outcome:
        if meter.total == 0:
            detail = "the server closed the stream without sending anything"
        elif sse.events == 0:
            head = " ".join(meter.head.decode("utf-8", "replace").split())[:120]
            detail = f"the server sent {meter.total} bytes but no server-sent events (it began {head!r})"
        else:
            detail = "the response stream ended before the reply was complete"
        return Outcome("stream", self._scrub(detail), True)

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secret)

    def _give_up(self, out: Outcome, attempt: int) -> Failure:
        return give_up(
            out, who=f"{self.provider} ({safe_url(self.url)})", key=self.key, attempt=attempt, secret=self._secret
        )
