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
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

import anyio
import msgspec

from ama_acp.providers.base import Failure, FailureKind, Finished, ProviderEvent, Retrying

if TYPE_CHECKING:
    import ssl

log = logging.getLogger(__name__)

MAX_DETAIL = 500  # characters of a provider's error text we pass on


class SSEEvent(NamedTuple):
    event: str  # "" when the server sent no `event:` line
    data: str


async def iter_sse(chunks: AsyncIterator[str]) -> AsyncIterator[SSEEvent]:
    """Server-sent events from decoded text chunks: `\\n`, `\\r\\n` and `\\r` all end a line, a blank line ends
    an event, `:` lines are comments. A last event without its blank line is still delivered."""
    buf = ""
    event = ""
    data: list[str] = []
    async for chunk in chunks:
        buf += chunk
        # A trailing "\r" may be the first half of a "\r\n" split across chunks: keep it back.
        hold = ""
        if buf.endswith("\r"):
            buf, hold = buf[:-1], "\r"
        *lines, buf = buf.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        buf += hold
        for line in lines:
            if not line:
                if data:
                    yield SSEEvent(event, "\n".join(data))
                event, data = "", []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                event = value
    tail = buf.rstrip("\r")
    if tail.startswith("data:"):
        data.append(tail[5:].removeprefix(" "))
    if data:
        yield SSEEvent(event, "\n".join(data))


class StreamError(Exception):
    """An error the server reported inside a 200 stream (a dialect parser raises it; the transport decides)."""

    def __init__(self, kind: FailureKind, detail: str, *, retryable: bool, status: int | None = None):
        super().__init__(detail)
        self.kind: FailureKind = kind
        self.detail = detail
        self.retryable = retryable
        self.status = status


Parser = Callable[[AsyncIterator[SSEEvent]], AsyncIterator[ProviderEvent]]


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
        delay = min(self.backoff_cap, self.backoff_base * 2 ** (retry - 1))
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


def parse_retry_after(headers: Any, cap: float = 60.0, now: float | None = None) -> float | None:
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
    msg: Any = None
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err.get("type") or err.get("code")
        elif isinstance(err, str):
            msg = err
        msg = msg or obj.get("message") or obj.get("detail")
    if not isinstance(msg, str) or not msg:
        msg = text.strip() or "no error text"
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


class HttpStream:
    """Streaming POSTs to one endpoint, with classification and retries. One instance per provider."""

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
    ):
        self.provider = provider
        self.url = url
        self._headers = headers  # holds the key: never log or repr it
        self.timeout = timeout
        self.retry = retry
        self.key = key
        self._secret = secret

    def __repr__(self) -> str:
        return f"HttpStream(provider={self.provider!r}, url={safe_url(self.url)!r})"

    async def stream(self, body: dict[str, Any], parse: Parser) -> AsyncIterator[ProviderEvent]:
        """POST `body`, feed the SSE stream to `parse`, and pass its events on. Ends with exactly one
        `Finished` or `Failure`; a retry is announced with `Retrying` (the caller drops partial output)."""
        import httpx

        payload = msgspec.json.encode(body)
        retries = self.retry.max_retries
        for attempt in range(retries + 1):
            log.debug("%s: POST %s (attempt %d)", self.provider, safe_url(self.url), attempt + 1)
            outcome: _Outcome
            try:
                async with (
                    self._client() as client,
                    client.stream("POST", self.url, content=payload, headers=self._headers) as resp,
                ):
                    if resp.status_code >= 300:
                        outcome = self._classify_status(resp.status_code, resp.headers, await resp.aread())
                    elif resp.headers.get("content-type", "").startswith("application/json"):
                        # The server ignored `stream: true` or answered an error with 200.
                        raw = await resp.aread()
                        outcome = _Outcome(
                            "bad_request", f"expected a stream, got JSON: {self._scrub(error_detail(raw))}", False
                        )
                    else:
                        async with contextlib.aclosing(parse(iter_sse(resp.aiter_text()))) as events:
                            async for event in events:
                                yield event
                                if isinstance(event, Finished | Failure):
                                    return
                        outcome = _Outcome("stream", "the response stream ended before the reply was complete", True)
            except StreamError as exc:
                outcome = _Outcome(exc.kind, self._scrub(exc.detail), exc.retryable, exc.status)
            except httpx.TimeoutException as exc:
                what = "connecting" if isinstance(exc, httpx.ConnectTimeout) else "waiting for the server"
                outcome = _Outcome("timeout", f"timed out after {self.timeout:g}s {what}", True)
            except httpx.ConnectError as exc:
                outcome = _Outcome("server", f"could not connect: {self._scrub(str(exc)) or 'refused'}", True)
                outcome.connect = True
            except (httpx.TransportError, httpx.DecodingError) as exc:
                # The connection dropped mid-body (incomplete chunked read, reset, ...).
                outcome = _Outcome("stream", f"connection lost: {self._scrub(str(exc)) or type(exc).__name__}", True)

            if not outcome.retryable or attempt >= retries:
                yield self._failure(outcome, attempt)
                return
            delay = outcome.retry_after if outcome.retry_after is not None else self.retry.backoff(attempt + 1)
            reason = self._short(outcome)
            log.warning("%s: %s; retry %d of %d in %.1fs", self.provider, reason, attempt + 1, retries, delay)
            yield Retrying(attempt=attempt + 1, delay=delay, reason=reason)
            await anyio.sleep(delay)

    def _client(self) -> Any:
        # A client per request: it binds to the running event loop, and a connection kept for the next
        # model call minutes later saves little. The expensive part, the TLS context, is shared.
        import httpx

        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
        return httpx.AsyncClient(timeout=timeout, verify=_ssl_context())

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secret)

    def _classify_status(self, status: int, headers: Any, raw: bytes) -> _Outcome:
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
        elif out.kind == "stream":
            msg = f"The reply from {who} broke off ({out.detail}).{tail}"
        elif out.connect:
            msg = f"Cannot reach {who} ({out.detail}). Check the base URL and the network.{tail}"
        else:
            msg = f"{who} answered with a server error ({self._short(out)}).{tail}"
        return Failure(kind=out.kind, message=self._scrub(msg), status=out.status)
