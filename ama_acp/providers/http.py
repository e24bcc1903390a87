"""HTTP plumbing the model providers share: one streaming POST with retries, an SSE reader, error wording.

The dialect modules (openai.py, anthropic.py) build a request body and parse server-sent events into
provider events; everything about status codes, timeouts, backoff and what a person is told lives here, so
both providers fail the same way.

httpx is imported inside functions only: importing a provider module must stay cheap (`ama --version`,
`ama models` and the ACP handshake never touch the network).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

import anyio
import msgspec

from ama_acp.errors import ProviderError
from ama_acp.providers.base import (
    Accepted,
    Failure,
    FailureKind,
    Finished,
    ProviderEvent,
    Retrying,
    TextDelta,
    ThinkingDelta,
)

T = TypeVar("T")

if TYPE_CHECKING:
    import ssl

    import httpx

log = logging.getLogger(__name__)

MAX_DETAIL = 500  # characters of a provider's error text we pass on


class SSEEvent(NamedTuple):
    event: str  # "" when the server sent no `event:` line
    data: str


MAX_EVENT_BYTES = 64 * 1024 * 1024  # one SSE event (a big tool argument fits; an endless line does not)
MAX_ERROR_BODY = 64 * 1024  # bytes of an error body we read; the rest is never downloaded
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # one streamed reply; ~8x the largest real one (128k tokens of deltas)

_EOL = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


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


class StreamError(ProviderError):
    """An error the server reported inside a 200 stream, or a stream ama cannot read (a dialect parser or the
    SSE reader raises it; the transport decides). `protocol`: the server broke the dialect, not the line."""

    def __init__(
        self,
        kind: FailureKind,
        detail: str,
        *,
        retryable: bool,
        status: int | None = None,
        protocol: bool = False,
    ):
        super().__init__(detail)
        self.kind: FailureKind = kind
        self.detail = detail
        self.retryable = retryable
        self.status = status
        self.protocol = protocol


def malformed(detail: str) -> StreamError:
    """The server broke its dialect (a wrong shape, an event out of order): not retried, it would repeat."""
    return StreamError("stream", detail, retryable=False, protocol=True)


def decode_event(decoder: msgspec.json.Decoder[T], data: str, what: str) -> T:
    """One SSE data payload into the dialect's typed Struct; `what` names it in the failure ("chunk")."""
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise malformed(f"a {what} of the wrong shape: {exc}") from None
    except msgspec.DecodeError:
        # Not JSON at all: often a line cut in transit, so worth another try.
        raise StreamError("stream", f"malformed {what}: {data[:200]}", retryable=True) from None


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
        if (
            not self._start
            and not self._line
            and not self._data
            and not self._skip_lf
            and chunk.startswith(b"data: ")
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk.endswith(b"\n\n")
            and b"\r" not in chunk
            and len(chunk) <= self.max_event
        ):
            # One whole event of one data line, the way model servers send a delta: no line loop at all.
            single: list[SSEEvent] = []
            self._data.append(self._text(chunk[6:-2]))
            self._dispatch(single)
            return single
        out: list[SSEEvent] = []
        if self._start and chunk:
            head = bytes(self._line) + chunk[:3]
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._line += chunk  # too short to tell yet
                return out
            self._start = False
            if head.startswith(_BOM):
                chunk = (bytes(self._line) + chunk)[len(_BOM) :]
                self._line.clear()
        pos = 0
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                pos = 1
        if b"\r" not in chunk:
            # The usual case (servers end lines with "\n"): split at C speed; a long line's middle chunks
            # have no "\n" at all and are only appended.
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
            return out
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
            raise StreamError(
                "stream", f"the stream is not valid UTF-8 ({exc.reason})", retryable=False, protocol=True
            ) from None

    def _too_big(self) -> StreamError:
        mib = self.max_event / (1024 * 1024)
        return StreamError("stream", f"one event is larger than {mib:g} MiB", retryable=False, protocol=True)


async def iter_sse(
    chunks: AsyncIterator[bytes] | AsyncIterator[str], parser: SSEParser | None = None
) -> AsyncGenerator[SSEEvent, None]:
    """The events of a byte stream (text chunks are accepted too, encoded as UTF-8), through `parser`."""
    parser = parser or SSEParser()
    async for chunk in chunks:
        for event in parser.feed(chunk.encode() if isinstance(chunk, str) else chunk):
            yield event
    for event in parser.close():
        yield event


# A dialect's stream parser: the events of each read in one list (so it can merge the text deltas of one read);
# an async generator, so the transport can close it when it stops early.
Parser = Callable[[AsyncIterator[list[SSEEvent]]], AsyncGenerator[ProviderEvent, None]]


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


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried. Tests shrink `backoff_base` to run fast."""

    max_retries: int = 4
    backoff_base: float = 1.0
    backoff_cap: float = 30.0
    retry_after_cap: float = 60.0

    def backoff(self, retry: int) -> float:
        """Delay before retry number `retry` (1-based): exponential, capped, with up to 25 % jitter off so
        many clients that failed together do not come back together."""
        delay = min(self.backoff_cap, self.backoff_base * 2.0 ** (retry - 1))
        return delay * (1.0 - 0.25 * random.random())


@dataclass
class _Outcome:
    """Why one attempt failed."""

    kind: FailureKind
    detail: str  # for a person, already scrubbed of secrets
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    connect: bool = False
    protocol: bool = False  # the server broke the dialect (a chunk of the wrong shape, bytes that are not UTF-8)


def parse_retry_after(headers: Mapping[str, str], cap: float = 60.0, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `Retry-After` as seconds or an HTTP
    date. Capped so a confused server cannot park the agent for an hour."""
    value: float | None = None
    ms = headers.get("retry-after-ms")
    if ms:
        with contextlib.suppress(ValueError):
            value = float(ms) / 1000.0
    raw = headers.get("retry-after")
    if value is None and raw:
        try:
            value = float(raw)
        except ValueError:
            import email.utils  # only dates need it, and it is slow to import

            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                value = when.timestamp() - (time.time() if now is None else now)
    if value is None:
        return None
    return min(max(value, 0.0), cap)


def error_detail(raw: bytes | str) -> str:
    """The human part of an error body: `error.message` (OpenAI, Anthropic), `message`, `detail`, or the
    text itself, cut short."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError:
        obj = None
    found: Any = None  # a value of the decoded body, unchecked until the isinstance below
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            found = err.get("message") or err.get("type") or err.get("code")
        elif isinstance(err, str):
            found = err
        found = found or obj.get("message") or obj.get("detail")
    msg = found if isinstance(found, str) and found else (text.strip() or "no error text")
    msg = " ".join(msg.split())
    return msg if len(msg) <= MAX_DETAIL else msg[:MAX_DETAIL] + "…"


def _error_code(raw: bytes) -> str:
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ""
    err = obj.get("error") if isinstance(obj, dict) else None
    return str(err.get("code") or err.get("type") or "") if isinstance(err, dict) else ""


def scrub(text: str, secret: str | None) -> str:
    """Remove the API key from text that may reach a person or a log (some servers echo a bad key)."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def safe_url(url: str) -> str:
    """The URL without credentials or query, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building a verified context loads the CA bundle (tens of ms); do it once per process.
    import httpx

    return httpx.create_ssl_context()


@dataclass(frozen=True)
class KeyHint:
    """Enough about the credentials to tell a person how to fix them, without knowing the key."""

    env: str | None  # the variable that holds the key, e.g. OPENAI_API_KEY; None: no variable is named
    has_key: bool
    provider: str = ""
    builtin: bool = False  # env is the provider kind's standard variable (OPENAI_API_KEY, ANTHROPIC_API_KEY)

    def instruction(self) -> str:
        if self.env is None:
            return f"Name the variable that holds the key with api_key_env in [providers.{self.provider}], set it and restart."
        if self.builtin:
            return f"Set {self.env} (or api_key_env in the config) and restart."
        return f"Set {self.env} and restart."


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
    httpx's read timeout (the same `timeout`, set in `_client`): a server that keeps sending (keepalives,
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

    `timeout` is a deadline for a whole attempt, from connecting to the last byte: a server that trickles
    keepalive comments forever still times out. `transport` replaces the network (tests: httpx.MockTransport).
    """

    def __init__(
        self,
        *,
        provider: str,
        url: str,
        headers: dict[str, str],
        timeout: float,
        retry: RetryPolicy,
        key: KeyHint,
        secret: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ):
        self.provider = provider
        self.url = url
        self._headers = headers  # holds the key: never log or repr it
        self.timeout = timeout
        self.retry = retry
        self.key = key
        self._secret = secret
        self.transport = transport
        self.max_response_bytes = max_response_bytes
        self.max_event_bytes = max_event_bytes

    def __repr__(self) -> str:
        return f"HttpStream(provider={self.provider!r}, url={safe_url(self.url)!r})"

    async def stream(self, body: dict[str, Any], parse: Parser) -> AsyncGenerator[ProviderEvent, None]:
        """POST `body`, feed the SSE stream to `parse`, and pass its events on. Ends with exactly one
        `Finished` or `Failure`; a retry is announced with `Retrying` (the caller drops partial output).
        Never raises but for cancellation, whatever the server sends."""
        payload = msgspec.json.encode(body)
        retries = self.retry.max_retries
        for attempt in range(retries + 1):
            log.debug("%s: POST %s (attempt %d)", self.provider, safe_url(self.url), attempt + 1)
            outcome: _Outcome | None = None
            async with contextlib.aclosing(self._attempt(payload, parse)) as events:
                async for item in events:
                    if isinstance(item, _Outcome):
                        outcome = item
                        break
                    yield item
                    if isinstance(item, Finished | Failure):
                        return
            if outcome is None:  # unreachable: _attempt ends with a terminal event or an outcome
                outcome = _Outcome("stream", "the reply ended without a result", False)
            if not outcome.retryable or attempt >= retries:
                yield self._failure(outcome, attempt)
                return
            delay = outcome.retry_after if outcome.retry_after is not None else self.retry.backoff(attempt + 1)
            reason = self._short(outcome)
            log.warning("%s: %s; retry %d of %d in %.1fs", self.provider, reason, attempt + 1, retries, delay)
            yield Retrying(attempt=attempt + 1, delay=delay, reason=reason)
            await anyio.sleep(delay)

    async def _attempt(self, payload: bytes, parse: Parser) -> AsyncGenerator[ProviderEvent | _Outcome, None]:
        """One POST: its provider events, then (unless one was terminal) the `_Outcome` of its failure."""
        import httpx

        deadline = time.monotonic() + self.timeout
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client())
                with anyio.move_on_after(_remaining(deadline)) as scope:
                    resp = await stack.enter_async_context(
                        client.stream("POST", self.url, content=payload, headers=self._headers)
                    )
                if scope.cancelled_caught:
                    raise _DeadlineExceeded
                chunks = resp.aiter_bytes()
                body = _before(deadline, chunks)
                stack.push_async_callback(body.aclose)
                ctype = resp.headers.get("content-type", "").lower()
                if resp.status_code >= 300:
                    yield self._classify_status(resp.status_code, resp.headers, await read_bounded(body))
                    return
                if ctype.startswith("application/json"):
                    # The server ignored `stream: true` or answered an error with 200.
                    raw = await read_bounded(body)
                    yield _Outcome(
                        "bad_request", f"expected a stream, got JSON: {self._scrub(error_detail(raw))}", False
                    )
                    return
                if ctype.startswith("text/html"):
                    # A web page, not an API: usually a base URL that points at a site or a login portal.
                    title = _html_title(await read_bounded(body))
                    what = f" ({self._scrub(title)})" if title else ""
                    yield _Outcome(
                        "bad_request", f"expected a stream, got an HTML page{what}; check the base URL", False
                    )
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
        except _DeadlineExceeded:
            yield _Outcome("timeout", f"timed out after {self.timeout:g}s without a complete reply", True)
        except StreamError as exc:
            out = _Outcome(exc.kind, self._scrub(exc.detail), exc.retryable, exc.status)
            out.protocol = exc.protocol
            yield out
        except httpx.TimeoutException as exc:
            what = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for the server"
            yield _Outcome("timeout", f"timed out after {self.timeout:g}s {what}", True)
        except httpx.ConnectError as exc:
            out = _Outcome("server", f"could not connect: {self._scrub(str(exc)) or 'refused'}", True)
            out.connect = True
            yield out
        except (httpx.TransportError, httpx.DecodingError) as exc:
            # The connection dropped mid-body (incomplete chunked read, reset, ...).
            yield _Outcome("stream", f"connection lost: {self._scrub(str(exc)) or type(exc).__name__}", True)
        except Exception as exc:
            # A bug of ours met an input nobody foresaw. The contract (never raise) holds, and the traceback
            # goes to the log; the fuzz tests look for this wording.
            log.exception("%s: internal error while reading the reply", self.provider)
            yield _Outcome("stream", f"internal error reading the reply: {type(exc).__name__}", False)

    def _ended_early(self, meter: _Meter, sse: SSEParser) -> _Outcome:
        if meter.total == 0:
            detail = "the server closed the stream without sending anything"
        elif sse.events == 0:
            head = " ".join(meter.head.decode("utf-8", "replace").split())[:120]
            detail = f"the server sent {meter.total} bytes but no server-sent events (it began {head!r})"
        else:
            detail = "the response stream ended before the reply was complete"
        return _Outcome("stream", self._scrub(detail), True)

    def _client(self) -> httpx.AsyncClient:
        # A client per request: it binds to the running event loop, and a connection kept for the next
        # model call minutes later saves little. The expensive part, the TLS context, is shared.
        import httpx

        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
        if self.transport is not None:
            return httpx.AsyncClient(timeout=timeout, transport=self.transport)
        return httpx.AsyncClient(timeout=timeout, verify=_ssl_context())

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secret)

    def _classify_status(self, status: int, headers: Mapping[str, str], raw: bytes) -> _Outcome:
        detail = self._scrub(error_detail(raw))
        retry_after = parse_retry_after(headers, self.retry.retry_after_cap)
        if status in (401, 403):
            out = _Outcome("auth", detail, False, status)
        elif status == 429:
            # An exhausted quota or budget will not recover by waiting.
            quota = "quota" in _error_code(raw) or "billing" in detail.lower()
            out = _Outcome("rate_limit", detail, not quota, status, retry_after)
        elif status == 408:
            out = _Outcome("timeout", detail, True, status, retry_after)
        elif status == 409 or status >= 500:  # 409: a lock timeout on OpenAI's side; 529: Anthropic overloaded
            out = _Outcome("server", detail, True, status, retry_after)
        else:
            out = _Outcome("bad_request", detail, False, status)
        # Both OpenAI and Anthropic can say explicitly whether a retry makes sense.
        should = headers.get("x-should-retry")
        if should in ("true", "false") and out.kind != "auth":
            out.retryable = should == "true"
        return out

    def _short(self, out: _Outcome) -> str:
        if out.status is not None:
            return f"HTTP {out.status}: {out.detail}"
        return out.detail

    def _failure(self, out: _Outcome, attempt: int) -> Failure:
        who = f"{self.provider} ({safe_url(self.url)})"
        tail = f" Gave up after {attempt} {'retry' if attempt == 1 else 'retries'}." if attempt else ""
        if out.kind == "auth":
            what = "rejected the API key" if self.key.has_key else "needs an API key"
            msg = f"{who} {what} ({self._short(out)}). {self.key.instruction()}"
        elif out.kind == "rate_limit":
            if out.retryable:
                msg = f"{who} is rate-limiting requests ({self._short(out)}).{tail} Wait and try again."
            else:
                msg = f"{who} refused the request for quota or billing ({self._short(out)})."
        elif out.kind == "bad_request":
            msg = f"{who} rejected the request ({self._short(out)})."
        elif out.kind == "timeout":
            msg = f"{who} did not answer in time ({out.detail}).{tail}"
        elif out.kind == "stream" and out.protocol:
            msg = f"{who} sent a reply ama cannot read ({out.detail})."
        elif out.kind == "stream":
            msg = f"The reply from {who} broke off ({out.detail}).{tail}"
        elif out.connect:
            msg = f"Cannot reach {who} ({out.detail}). Check the base URL and the network.{tail}"
        else:
            msg = f"{who} answered with a server error ({self._short(out)}).{tail}"
        return Failure(kind=out.kind, message=self._scrub(msg), status=out.status)
