"""Why a model request failed, in words for a person: the error a stream raises, the outcome of a failed
attempt, and the one sentence (`give_up`) a person reads when ama stops trying.

Both HTTP dialects fail through here, so an expired key, a rate limit or a broken stream reads the same
whichever provider answered. Every text a server sent passes `scrub` first: some servers echo a bad key.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import msgspec

from ama_acp.errors import ProviderError
from ama_acp.providers.base import Failure, FailureKind
from ama_acp.providers.tls import CERTIFICATE_ADVICE

MAX_DETAIL = 500  # characters of a provider's error text we pass on


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
    """The server broke its dialect (a wrong shape, an event out of order, bytes that are not UTF-8): not
    retried, it would repeat."""
    return StreamError("stream", detail, retryable=False, protocol=True)


class Outcome(msgspec.Struct):
    """Why one attempt failed."""

    kind: FailureKind
    detail: str  # for a person, already scrubbed of secrets
    retryable: bool
    status: int | None = None
    retry_after: float | None = None
    connect: bool = False
    certificate: bool = False  # the server's TLS certificate failed verification: a retry would fail the same
    protocol: bool = False  # the server broke the dialect (a chunk of the wrong shape, bytes that are not UTF-8)

    def short(self) -> str:
        """The detail, after the status when there is one (`HTTP 503: overloaded`)."""
        if self.status is not None:
            return f"HTTP {self.status}: {self.detail}"
        return self.detail


class KeyHint(msgspec.Struct, frozen=True):
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


def error_detail(raw: bytes | str) -> str:
    """The human part of an error body: `error.message` (OpenAI, Anthropic), `message`, `detail`, or the
    text itself, cut short."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError:
        obj = None
    found = _error_field(obj) if isinstance(obj, dict) else None
    msg = found if isinstance(found, str) and found else (text.strip() or "no error text")
    msg = " ".join(msg.split())
    return msg if len(msg) <= MAX_DETAIL else msg[:MAX_DETAIL] + "…"


def _error_field(obj: dict[object, object]) -> object:
    """The field of a decoded error body that says what went wrong (a value, unchecked until the caller checks it)."""
    found: object = None
    err = obj.get("error")
    if isinstance(err, dict):
        found = err.get("message") or err.get("type") or err.get("code")
    elif isinstance(err, str):
        found = err
    return found or obj.get("message") or obj.get("detail")


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


def give_up(out: Outcome, *, who: str, key: KeyHint, attempt: int, secret: str | None) -> Failure:
    """The `Failure` a person reads when `out` ends the request after `attempt` retries; `who` names the
    provider and its URL."""
    tail = f" Gave up after {attempt} {'retry' if attempt == 1 else 'retries'}." if attempt else ""
    msg = _GIVE_UP[_give_up_case(out)].format(
        who=who,
        short=out.short(),
        detail=out.detail,
        tail=tail,
        what="rejected the API key" if key.has_key else "needs an API key",
        instruction=key.instruction(),
        advice=CERTIFICATE_ADVICE,
    )
    return Failure(kind=out.kind, message=scrub(msg, secret), status=out.status)


# The sentence for each case of `_give_up_case`. The fields are filled by `give_up`.
_GIVE_UP = {
    "auth": "{who} {what} ({short}). {instruction}",
    "rate_limit": "{who} is rate-limiting requests ({short}).{tail} Wait and try again.",
    "quota": "{who} refused the request for quota or billing ({short}).",
    "bad_request": "{who} rejected the request ({short}).",
    "timeout": "{who} did not answer in time ({detail}).{tail}",
    "protocol": "{who} sent a reply ama cannot read ({detail}).",
    "stream": "The reply from {who} broke off ({detail}).{tail}",
    "certificate": "Cannot trust {who}: {detail}. Check the host name in the base URL. {advice}.",
    "connect": "Cannot reach {who} ({detail}). Check the base URL and the network.{tail}",
    "server": "{who} answered with a server error ({short}).{tail}",
}
_NAMED_KINDS = ("auth", "rate_limit", "bad_request", "timeout", "stream")


def _give_up_case(out: Outcome) -> str:
    """Which sentence `out` gets: its kind, told apart where one kind has two causes (a rate limit that passes or
    a quota that does not, a stream that broke off or one ama cannot read); any other kind by the transport."""
    if out.kind == "rate_limit" and not out.retryable:
        return "quota"
    if out.kind == "stream" and out.protocol:
        return "protocol"
    if out.kind in _NAMED_KINDS:
        return out.kind
    if out.certificate:
        return "certificate"
    return "connect" if out.connect else "server"
