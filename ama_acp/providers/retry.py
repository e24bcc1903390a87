"""Whether and when a failed model request is tried again: the policy (how often, how patiently), the
server's own word on it (`Retry-After`, `x-should-retry`), and what an HTTP error status means.

Standard library and msgspec only: the registry imports `RetryPolicy` without loading httpx.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping

import msgspec

from ama_acp.providers.failures import Outcome


class RetryPolicy(msgspec.Struct, frozen=True):
    """How often and how patiently a request is retried. Tests shrink `backoff_base` to run fast."""

    max_retries: int = 4
    backoff_base: float = 1.0
    backoff_cap: float = 30.0
    retry_after_cap: float = 60.0

    def backoff(self, retry: int) -> float:
        """Delay before retry number `retry` (1-based): exponential, capped, with up to 25 % jitter off so
        many clients that failed together do not come back together."""
        import random  # a retry's only (~1.5 ms to import)

        delay = min(self.backoff_cap, self.backoff_base * 2.0 ** (retry - 1))
        return delay * (1.0 - 0.25 * random.random())

    def delay(self, out: Outcome, retry: int) -> float:
        """Seconds before retry number `retry` after `out`: what the server asked for, else the backoff."""
        return out.retry_after if out.retry_after is not None else self.backoff(retry)


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
            value = _seconds_until(raw, time.time() if now is None else now)
    if value is None:
        return None
    return min(max(value, 0.0), cap)


def _seconds_until(http_date: str, now: float) -> float | None:
    import email.utils  # only dates need it, and it is slow to import

    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() - now


def classify_status(status: int, headers: Mapping[str, str], raw: bytes, detail: str, cap: float) -> Outcome:
    """What an error status means: its kind and whether a retry may help. `raw` is the (bounded) error body,
    `detail` its human part already scrubbed, `cap` the longest `Retry-After` obeyed."""
    retry_after = parse_retry_after(headers, cap)
    match status:
        case 401 | 403:
            out = Outcome("auth", detail, False, status)
        case 429:
            # An exhausted quota or budget will not recover by waiting.
            quota = "quota" in _error_code(raw) or "billing" in detail.lower()
            out = Outcome("rate_limit", detail, not quota, status, retry_after)
        case 408:
            out = Outcome("timeout", detail, True, status, retry_after)
        case _ if status == 409 or status >= 500:  # 409: a lock timeout on OpenAI's side; 529: Anthropic overloaded
            out = Outcome("server", detail, True, status, retry_after)
        case _:
            out = Outcome("bad_request", detail, False, status)
    # Both OpenAI and Anthropic can say explicitly whether a retry makes sense.
    should = headers.get("x-should-retry")
    if should in ("true", "false") and out.kind != "auth":
        out.retryable = should == "true"
    return out


def _error_code(raw: bytes) -> str:
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return ""
    err = obj.get("error") if isinstance(obj, dict) else None
    return str(err.get("code") or err.get("type") or "") if isinstance(err, dict) else ""
