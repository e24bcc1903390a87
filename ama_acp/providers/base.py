"""The provider interface: one request in, a closed stream of typed events out.

A provider never raises for a failed request: failures arrive as a `Failure` event (pi's contract), so the
agent loop has one place that decides what a person sees. Retries with backoff happen inside the provider
(`providers/stream.py`) and are announced with `Retrying` so the loop can drop a partial message.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Literal, Protocol

import msgspec

from ama_acp.conversation.messages import Message, Usage
from ama_acp.conversation.tools import ToolSpec


class ModelRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    model: str  # the provider's own model name (without the "provider/" prefix)
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = []
    max_output: int | None = None
    thought_level: str = "off"  # off | low | medium | high


class TextDelta(msgspec.Struct, frozen=True):
    text: str


class ThinkingDelta(msgspec.Struct, frozen=True, omit_defaults=True):
    text: str
    signature: str | None = None  # set on the event that closes a signed thinking block
    redacted: bool = False


class ToolCallEvent(msgspec.Struct, frozen=True):
    """A complete tool call (providers assemble streamed argument deltas before yielding it)."""

    id: str
    name: str
    arguments: str


StopKind = Literal["end_turn", "tool_use", "max_tokens", "refusal"]


class Finished(msgspec.Struct, frozen=True):
    stop: StopKind
    usage: Usage | None = None


FailureKind = Literal["auth", "rate_limit", "server", "timeout", "stream", "bad_request", "config"]


class Failure(msgspec.Struct, frozen=True):
    """The request failed for good (retries, if any, are exhausted). `message` is for a person."""

    kind: FailureKind
    message: str
    status: int | None = None


class Accepted(msgspec.Struct, frozen=True):
    """The provider took the request (a 2xx stream began): from here on it bills it, even if the reply is then
    cancelled, cut off or retried before its usage arrives (U17: such a request makes the cost unknown)."""


class Retrying(msgspec.Struct, frozen=True):
    """A retryable failure; the request starts over after `delay` seconds. Drop any partial output."""

    attempt: int
    delay: float
    reason: str


ProviderEvent = TextDelta | ThinkingDelta | ToolCallEvent | Finished | Failure | Retrying | Accepted


class Provider(Protocol):
    name: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        """Stream one model request. Ends with exactly one `Finished` or `Failure`."""
        ...
