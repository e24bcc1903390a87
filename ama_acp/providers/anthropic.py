"""Anthropic Messages API, streamed (`anthropic-version: 2023-06-01`).

Choices worth knowing:
- Signed thinking blocks go back exactly as received (the API checks the signature); redacted thinking
  goes back as `redacted_thinking` with its data. Unsigned thinking (from another provider's model) is
  dropped: the API would reject it.
- Prompt caching is on: `cache_control` marks the system prompt, the last tool and the last user
  message, so each request in a tool loop reads the previous one's prefix from the cache.
- A base URL ending in `/v1` is accepted as well as the bare host the SDKs use.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Literal, NotRequired, TypedDict

import msgspec

from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
    UserMessage,
)
from ama_acp.providers.base import (
    FailureKind,
    Finished,
    ModelRequest,
    ProviderEvent,
    StopKind,
    ThinkingDelta,
    ToolCallEvent,
)
from ama_acp.providers.dialect import DeltaBuffer, decode_event, parse_replies, token_count
from ama_acp.providers.failures import MAX_DETAIL, StreamError, malformed
from ama_acp.providers.settings import ProviderSettings
from ama_acp.providers.sse import SSEEvent
from ama_acp.providers.stream import HttpStream

log = logging.getLogger(__name__)

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
# Thinking budgets per thought level; each is further held to half of max_tokens so an answer fits.
THINKING_BUDGETS = {"low": 4096, "medium": 10000, "high": 32000}
MIN_THINKING_BUDGET = 1024  # the API's floor

_STOPS: dict[str, StopKind] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


# --- request -----------------------------------------------------------------------------------------------

# The request as the Messages API reads it: only what ama sends, typed, so a misspelt key is a type error.


class _CacheControl(TypedDict):
    type: Literal["ephemeral"]


_CACHE: _CacheControl = {"type": "ephemeral"}
_BAD_ID = re.compile(r"[^a-zA-Z0-9_-]")


class _TextBlock(TypedDict):
    type: Literal["text"]
    text: str
    cache_control: NotRequired[_CacheControl]


class _ImageSource(TypedDict):
    type: Literal["base64"]
    media_type: str
    data: str


class _ImageBlock(TypedDict):
    type: Literal["image"]
    source: _ImageSource
    cache_control: NotRequired[_CacheControl]


class _ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str
    cache_control: NotRequired[_CacheControl]


class _RedactedThinkingBlock(TypedDict):
    type: Literal["redacted_thinking"]
    data: str
    cache_control: NotRequired[_CacheControl]


class _ToolUseBlock(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, object]
    cache_control: NotRequired[_CacheControl]


class _ToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: NotRequired[list[_TextBlock | _ImageBlock]]
    is_error: NotRequired[bool]
    cache_control: NotRequired[_CacheControl]


_Block = _TextBlock | _ImageBlock | _ThinkingBlock | _RedactedThinkingBlock | _ToolUseBlock | _ToolResultBlock


class Turn(TypedDict):
    role: Literal["user", "assistant"]
    content: list[_Block]


class _SystemBlock(TypedDict):
    type: Literal["text"]
    text: str
    cache_control: _CacheControl


class _ToolDecl(TypedDict):
    name: str
    description: str
    input_schema: Mapping[str, object]  # the tool's JSON schema
    cache_control: NotRequired[_CacheControl]


class _Thinking(TypedDict):
    type: Literal["enabled"]
    budget_tokens: int


class MessagesBody(TypedDict):
    model: str
    max_tokens: int
    messages: list[Turn]
    stream: bool
    system: NotRequired[list[_SystemBlock]]
    tools: NotRequired[list[_ToolDecl]]
    thinking: NotRequired[_Thinking]


def _tool_id(raw: str) -> str:
    # The API only takes [a-zA-Z0-9_-] ids; calls recorded from other providers may carry more.
    return _BAD_ID.sub("_", raw) or "tool"


def _blocks(parts: list[TextPart | ImagePart]) -> list[_TextBlock | _ImageBlock]:
    out: list[_TextBlock | _ImageBlock] = []
    for p in parts:
        if isinstance(p, TextPart):
            if p.text:  # the API rejects empty text blocks
                out.append({"type": "text", "text": p.text})
        else:
            out.append({"type": "image", "source": {"type": "base64", "media_type": p.mime_type, "data": p.data}})
    return out


def _tool_input(arguments: str) -> dict[str, object]:
    try:
        value = msgspec.json.decode(arguments) if arguments.strip() else {}
    except (msgspec.DecodeError, RecursionError):  # not JSON, or nested past the decoder's depth
        log.debug("tool call arguments are not usable JSON; sending {} instead")
        value = {}
    return value if isinstance(value, dict) else {}


def _assistant_blocks(msg: AssistantMessage) -> list[_Block]:
    out: list[_Block] = []
    for p in msg.content:
        if isinstance(p, ThinkingPart):
            if p.redacted:
                out.append({"type": "redacted_thinking", "data": p.text})
            elif p.signature:
                out.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
        elif isinstance(p, TextPart):
            if p.text:
                out.append({"type": "text", "text": p.text})
        elif isinstance(p, ToolCallPart):
            out.append({"type": "tool_use", "id": _tool_id(p.id), "name": p.name, "input": _tool_input(p.arguments)})
    return out


def _turn(msg: Message) -> Turn:
    """One message as a turn: tool results become user turns of one `tool_result` block."""
    if isinstance(msg, UserMessage):
        return {"role": "user", "content": [*_blocks(msg.content)]}
    if isinstance(msg, AssistantMessage):
        return {"role": "assistant", "content": _assistant_blocks(msg)}
    block: _ToolResultBlock = {"type": "tool_result", "tool_use_id": _tool_id(msg.tool_call_id)}
    body = _blocks(msg.content)
    if body:
        block["content"] = body
    if msg.is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def to_anthropic_messages(messages: list[Message]) -> list[Turn]:
    """The neutral conversation as Messages API turns: tool results become user turns of `tool_result`
    blocks, and consecutive turns of one role are merged (the API wants them alternating)."""
    out: list[Turn] = []
    for msg in messages:
        turn = _turn(msg)
        if not turn["content"]:
            continue  # an empty turn is rejected; dropping it keeps the rest valid
        if out and out[-1]["role"] == turn["role"]:
            out[-1]["content"].extend(turn["content"])
        else:
            out.append(turn)
    return out


def _mark_cache(messages: list[Turn]) -> None:
    """Put a cache breakpoint on the last block of the last user turn (the end of the reusable prefix). The
    turns were built for this request alone, so the block is marked in place."""
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"][-1]["cache_control"] = _CACHE


# --- response ----------------------------------------------------------------------------------------------

_RETRYABLE_ERRORS: dict[str, FailureKind] = {
    "overloaded_error": "server",
    "api_error": "server",
    "timeout_error": "timeout",
}


def _error_event(err: object) -> StreamError:
    """An `error` event: its `error` object, read leniently (an error is an error, whatever its shape)."""
    fields = err if isinstance(err, dict) else {}
    etype = str(fields.get("type") or "error")[:100]
    detail = str(fields.get("message") or etype)[:MAX_DETAIL]
    if etype in _RETRYABLE_ERRORS:
        return StreamError(_RETRYABLE_ERRORS[etype], f"{etype}: {detail}", retryable=True)
    if etype == "rate_limit_error":
        return StreamError("rate_limit", detail, retryable=True)
    if etype in ("authentication_error", "permission_error"):
        return StreamError("auth", detail, retryable=False)
    return StreamError("bad_request", f"{etype}: {detail}", retryable=False)


# The event shapes ama reads, as typed Structs: a field of the wrong type is a malformed event (a clear
# `Failure` naming the field), never a crash. Unknown fields, block types and event types are ignored, as the
# API's versioning policy asks.


class _ContentBlock(msgspec.Struct):
    type: str
    id: str | None = None
    name: str | None = None
    text: str | None = None
    thinking: str | None = None
    data: str | None = None
    input: dict[str, object] | None = None


class _Delta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


_NO_DELTA = _Delta()


class _MessageHead(msgspec.Struct):
    usage: object = None


class _Event(msgspec.Struct):
    type: str | None = None
    index: int | None = None
    message: _MessageHead | None = None
    content_block: _ContentBlock | None = None
    delta: _Delta | None = None
    usage: object = None  # read leniently: a bad figure is unknown, not a failed reply (see token_count)
    error: object = None


_event_decoder = msgspec.json.Decoder(_Event)

# Which delta may extend which block.
_DELTA_FOR = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "thinking"}
_DELTA_FOR["input_json_delta"] = "tool_use"
_KNOWN_BLOCKS = {"text", "thinking", "redacted_thinking", "tool_use"}  # deltas of other (newer) blocks are ignored


class _OpenBlock:
    """A content block being streamed: its kind, and what its deltas built so far."""

    __slots__ = ("kind", "id", "name", "parts", "signature")

    def __init__(self, kind: str, id: str = "", name: str = "") -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.parts: list[str] = []
        self.signature = ""


def _decode_event(data: str) -> _Event:
    return decode_event(_event_decoder, data, "event")


def parse_anthropic_stream(batches: AsyncIterator[list[SSEEvent]]) -> AsyncGenerator[ProviderEvent, None]:
    """Messages API stream events → provider events; the text and thinking deltas of one read come out merged
    (`DeltaBuffer`). Raises `StreamError` for an event ama cannot use or one out of order (a delta for a block
    never started), after the text before it; anything after `message_stop` is never read."""
    return parse_replies(batches, _MessageState())


class _MessageState:
    """One streamed message: its open blocks, usage and stop reason, and the deltas held for merging."""

    def __init__(self) -> None:
        self.blocks: dict[int, _OpenBlock] = {}
        self.started = 0  # content blocks started so far: the index of one that names none
        self.last: int | None = None  # the block a delta or stop without an index belongs to
        self.usage: dict[str, int | None] = {}
        self.stop: StopKind = "end_turn"
        self.held = DeltaBuffer()

    def event(self, ev: SSEEvent, out: list[ProviderEvent]) -> Finished | None:
        data = _decode_event(ev.data)
        match data.type or ev.event:
            case "message_start":
                _take_usage(self.usage, data.message.usage if data.message else None)
            case "content_block_start":
                self._block_start(data, out)
            case "content_block_delta":
                self._block_delta(data, out)
            case "content_block_stop":
                self._block_stop(data, out)
            case "message_delta":
                self._message_delta(data)
            case "message_stop":
                return self._message_stop()
            case "error":
                raise _error_event(data.error)
        # ping and unknown events are ignored, as the API's versioning policy asks
        return None

    def end(self) -> Finished | None:
        return None  # no message_stop: a broken stream

    def _message_delta(self, data: _Event) -> None:
        reason = data.delta.stop_reason if data.delta else None
        if reason:
            self.stop = _STOPS.get(reason, "end_turn")
        _take_usage(self.usage, data.usage)

    def _message_stop(self) -> Finished:
        unfinished = [i for i, b in self.blocks.items() if b.kind == "tool_use"]
        if unfinished:
            raise malformed(f"message_stop while tool_use block {unfinished[0]} was still open")
        return Finished(stop=self.stop, usage=_usage(self.usage))

    def _block_start(self, data: _Event, out: list[ProviderEvent]) -> None:
        cb = data.content_block
        if cb is None:
            raise malformed("content_block_start without a content_block")
        index = self.started if data.index is None else data.index
        if index in self.blocks:
            raise malformed(f"content block {index} started twice")
        if cb.type == "tool_use" and not (cb.id and cb.name):
            raise malformed(f"tool_use block {index} without an id or a name")
        block = self.blocks[index] = _OpenBlock(cb.type, cb.id or "", cb.name or "")
        self.started, self.last = self.started + 1, index
        self._block_content(cb, block, out)

    def _block_content(self, cb: _ContentBlock, block: _OpenBlock, out: list[ProviderEvent]) -> None:
        """What a content block carries from its start (the API sends it empty; some copies do not)."""
        match cb.type:
            case "text" if cb.text:
                out += self.held.text(cb.text)
            case "thinking" if cb.thinking:
                out += self.held.thinking(cb.thinking)
            case "redacted_thinking":
                # Encrypted reasoning: kept (in `text`) only to be sent back verbatim.
                out += self.held.take()
                out.append(ThinkingDelta(text=cb.data or "", redacted=True))
            case "tool_use" if cb.input:
                block.parts.append(msgspec.json.encode(cb.input).decode())

    def _block_delta(self, data: _Event, out: list[ProviderEvent]) -> None:
        index = self.last if data.index is None else data.index
        found = self.blocks.get(index) if index is not None else None
        delta = data.delta or _NO_DELTA
        if found is None:
            raise malformed(f"content_block_delta for block {index}, which was never started (or has stopped)")
        if not _extends(delta, found):
            raise malformed(f"a {delta.type} for the {found.kind} block {index}")
        self._add_delta(delta, found, out)

    def _add_delta(self, delta: _Delta, found: _OpenBlock, out: list[ProviderEvent]) -> None:
        match delta.type:
            case "text_delta" if delta.text:
                out += self.held.text(delta.text)
            case "thinking_delta" if delta.thinking:
                out += self.held.thinking(delta.thinking)
            case "signature_delta":
                found.signature += delta.signature or ""
            case "input_json_delta":
                found.parts.append(delta.partial_json or "")

    def _block_stop(self, data: _Event, out: list[ProviderEvent]) -> None:
        index = self.last if data.index is None else data.index
        ended = self.blocks.pop(index, None) if index is not None else None
        if ended is None:
            raise malformed(f"content_block_stop for block {index}, which was never started")
        if ended.kind == "thinking" and ended.signature:
            out += self.held.take()  # the signature closes the thinking it signs: after all of its text
            out.append(ThinkingDelta(text="", signature=ended.signature))
        elif ended.kind == "tool_use":
            out += self.held.take()
            out.append(ToolCallEvent(id=ended.id, name=ended.name, arguments="".join(ended.parts) or "{}"))


def _extends(delta: _Delta, block: _OpenBlock) -> bool:
    """Whether `delta` may extend `block`: a delta of another block's kind is a broken stream, while a kind of
    delta or block ama does not know is let through (the API adds new ones)."""
    want = _DELTA_FOR.get(delta.type or "")
    return want is None or want == block.kind or block.kind not in _KNOWN_BLOCKS


_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _take_usage(acc: dict[str, int | None], raw: object) -> None:
    # message_delta repeats the final (cumulative) figures, so later values replace earlier ones. A figure
    # that is not a count makes that figure unknown (None), not 0.
    if raw is None:
        return
    if not isinstance(raw, dict):
        log.warning("usage is not an object (%s); ignored", type(raw).__name__)
        return
    for key in _USAGE_KEYS:
        if key in raw:
            acc[key] = token_count(raw[key], key)


def _usage(acc: dict[str, int | None]) -> Usage | None:
    if not acc:
        return None
    return Usage(
        input=acc.get("input_tokens"),
        output=acc.get("output_tokens"),
        cache_read=acc.get("cache_read_input_tokens"),
        cache_write=acc.get("cache_creation_input_tokens"),
    )


# --- provider ----------------------------------------------------------------------------------------------


class AnthropicProvider:
    """`Provider` for the Messages API. `settings.reasoning` flags a model with extended thinking."""

    def __init__(self, settings: ProviderSettings) -> None:
        settings = settings.for_dialect("anthropic")
        self.name = settings.name
        self.base_url = settings.base_url or ""
        self.reasoning = settings.reasoning
        url = self.base_url + ("/messages" if self.base_url.endswith("/v1") else "/v1/messages")
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
            **settings.headers,
        }
        if settings.api_key:
            headers["x-api-key"] = settings.api_key
        self._http = HttpStream(settings, url=url, headers=headers, key=settings.key_hint("anthropic"))

    def __repr__(self) -> str:
        return f"AnthropicProvider(name={self.name!r}, base_url={self.base_url!r})"

    def build_body(self, request: ModelRequest) -> MessagesBody:
        max_tokens = request.max_output or DEFAULT_MAX_TOKENS
        messages = to_anthropic_messages(request.messages)
        _mark_cache(messages)
        body: MessagesBody = {"model": request.model, "max_tokens": max_tokens, "messages": messages, "stream": True}
        if request.system:
            body["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
        if request.tools:
            tools: list[_ToolDecl] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
            tools[-1]["cache_control"] = _CACHE
            body["tools"] = tools
        if self.reasoning and request.thought_level in THINKING_BUDGETS:
            budget = min(THINKING_BUDGETS[request.thought_level], max_tokens // 2)
            if budget >= MIN_THINKING_BUDGET:
                body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            else:
                log.info("max_tokens %d leaves no room for thinking; asking without it", max_tokens)
        return body

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        return self._http.stream(self.build_body(request), parse_anthropic_stream)
