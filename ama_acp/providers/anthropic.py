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
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from ama_acp.agent.messages import (
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
    Finished,
    ModelRequest,
    ProviderEvent,
    StopKind,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from ama_acp.providers.http import HttpStream, KeyHint, RetryPolicy, SSEEvent, StreamError

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
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
_CACHE = {"type": "ephemeral"}
_BAD_ID = re.compile(r"[^a-zA-Z0-9_-]")


# --- request -----------------------------------------------------------------------------------------------


def _tool_id(raw: str) -> str:
    # The API only takes [a-zA-Z0-9_-] ids; calls recorded from other providers may carry more.
    return _BAD_ID.sub("_", raw) or "tool"


def _blocks(parts: list[TextPart | ImagePart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            if p.text:  # the API rejects empty text blocks
                out.append({"type": "text", "text": p.text})
        else:
            out.append({"type": "image", "source": {"type": "base64", "media_type": p.mime_type, "data": p.data}})
    return out


def _tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(arguments) if arguments.strip() else {}
    except msgspec.DecodeError:
        log.debug("tool call arguments are not JSON; sending {} instead")
        value = {}
    return value if isinstance(value, dict) else {}


def _assistant_blocks(msg: AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
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


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The neutral conversation as Messages API turns: tool results become user turns of `tool_result`
    blocks, and consecutive turns of one role are merged (the API wants them alternating)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        if isinstance(msg, UserMessage):
            role, content = "user", _blocks(msg.content)
        elif isinstance(msg, AssistantMessage):
            role, content = "assistant", _assistant_blocks(msg)
        else:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": _tool_id(msg.tool_call_id)}
            body = _blocks(msg.content)
            if body:
                block["content"] = body
            if msg.is_error:
                block["is_error"] = True
            role, content = "user", [block]
        if not content:
            continue  # an empty turn is rejected; dropping it keeps the rest valid
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    return out


def _mark_cache(messages: list[dict[str, Any]]) -> None:
    """Put a cache breakpoint on the last block of the last user turn (the end of the reusable prefix)."""
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]["content"][-1]
        messages[-1]["content"][-1] = {**last, "cache_control": _CACHE}


# --- response ----------------------------------------------------------------------------------------------

_RETRYABLE_ERRORS = {"overloaded_error": "server", "api_error": "server", "timeout_error": "timeout"}


def _error_event(data: dict[str, Any]) -> StreamError:
    err = data.get("error") or {}
    etype = str(err.get("type") or "error")
    detail = str(err.get("message") or etype)
    if etype in _RETRYABLE_ERRORS:
        return StreamError(_RETRYABLE_ERRORS[etype], f"{etype}: {detail}", retryable=True)  # type: ignore[arg-type]
    if etype == "rate_limit_error":
        return StreamError("rate_limit", detail, retryable=True)
    if etype in ("authentication_error", "permission_error"):
        return StreamError("auth", detail, retryable=False)
    return StreamError("bad_request", f"{etype}: {detail}", retryable=False)


class _Block:
    __slots__ = ("kind", "id", "name", "parts", "signature")

    def __init__(self, kind: str, id: str = "", name: str = "") -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.parts: list[str] = []
        self.signature = ""


async def parse_anthropic_stream(events: AsyncIterator[SSEEvent]) -> AsyncIterator[ProviderEvent]:
    """Messages API stream events → provider events."""
    decode = msgspec.json.Decoder()
    blocks: dict[int, _Block] = {}
    usage: dict[str, int] = {}
    stop: StopKind = "end_turn"
    async for ev in events:
        try:
            data = decode.decode(ev.data)
        except msgspec.DecodeError:
            raise StreamError("stream", f"malformed event: {ev.data[:200]}", retryable=True) from None
        if not isinstance(data, dict):
            continue
        kind = data.get("type") or ev.event
        if kind == "message_start":
            _take_usage(usage, (data.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            cb = data.get("content_block") or {}
            btype = cb.get("type", "")
            block = blocks[data.get("index", len(blocks))] = _Block(btype, cb.get("id", ""), cb.get("name", ""))
            if btype == "text" and cb.get("text"):
                yield TextDelta(text=cb["text"])
            elif btype == "thinking" and cb.get("thinking"):
                yield ThinkingDelta(text=cb["thinking"])
            elif btype == "redacted_thinking":
                # Encrypted reasoning: kept (in `text`) only to be sent back verbatim.
                yield ThinkingDelta(text=cb.get("data", ""), redacted=True)
            elif btype == "tool_use" and cb.get("input"):
                block.parts.append(msgspec.json.encode(cb["input"]).decode())
        elif kind == "content_block_delta":
            block = blocks.get(data.get("index", -1))
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta" and delta.get("text"):
                yield TextDelta(text=delta["text"])
            elif dtype == "thinking_delta" and delta.get("thinking"):
                yield ThinkingDelta(text=delta["thinking"])
            elif dtype == "signature_delta" and block is not None:
                block.signature += delta.get("signature", "")
            elif dtype == "input_json_delta" and block is not None:
                block.parts.append(delta.get("partial_json", ""))
        elif kind == "content_block_stop":
            block = blocks.pop(data.get("index", -1), None)
            if block is None:
                continue
            if block.kind == "thinking" and block.signature:
                yield ThinkingDelta(text="", signature=block.signature)
            elif block.kind == "tool_use":
                yield ToolCallEvent(id=block.id, name=block.name, arguments="".join(block.parts) or "{}")
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                stop = _STOPS.get(reason, "end_turn")
            _take_usage(usage, data.get("usage"))
        elif kind == "message_stop":
            yield Finished(stop=stop, usage=_usage(usage))
            return
        elif kind == "error":
            raise _error_event(data)
        # ping and unknown events are ignored, as the API's versioning policy asks


def _take_usage(acc: dict[str, int], raw: Any) -> None:
    # message_delta repeats the final (cumulative) figures, so later values replace earlier ones.
    if isinstance(raw, dict):
        for key, value in raw.items():
            if isinstance(value, int):
                acc[key] = value


def _usage(acc: dict[str, int]) -> Usage | None:
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
    """`Provider` for the Messages API. `reasoning` flags a model with extended thinking."""

    def __init__(
        self,
        *,
        name: str = "anthropic",
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = DEFAULT_KEY_ENV,  # None: no variable is named
        reasoning: bool = False,
        timeout: float = 600.0,
        max_retries: int = 4,
        retry: RetryPolicy | None = None,
        headers: dict[str, str] | None = None,
    ):
        self.name = name
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.reasoning = reasoning
        url = self.base_url + ("/messages" if self.base_url.endswith("/v1") else "/v1/messages")
        all_headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
            **(headers or {}),
        }
        if api_key:
            all_headers["x-api-key"] = api_key
        self._http = HttpStream(
            provider=name,
            url=url,
            headers=all_headers,
            timeout=timeout,
            retry=retry or RetryPolicy(max_retries=max_retries),
            key=KeyHint(env=api_key_env, has_key=bool(api_key), provider=name, builtin=api_key_env == DEFAULT_KEY_ENV),
            secret=api_key,
        )

    def __repr__(self) -> str:
        return f"AnthropicProvider(name={self.name!r}, base_url={self.base_url!r})"

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        max_tokens = request.max_output or DEFAULT_MAX_TOKENS
        messages = to_anthropic_messages(request.messages)
        _mark_cache(messages)
        body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens, "messages": messages, "stream": True}
        if request.system:
            body["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
        if request.tools:
            tools = [
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

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        return self._http.stream(self.build_body(request), parse_anthropic_stream)
