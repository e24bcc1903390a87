"""OpenAI-compatible Chat Completions, streamed: OpenAI itself and the many servers that copy its API
(vLLM, llama.cpp, Ollama, DeepSeek, OpenRouter, ...). The quirks of the copies are handled here, quietly.

Choices that differ between servers:
- `max_output` goes out as `max_completion_tokens` to api.openai.com (its reasoning models reject
  `max_tokens`) and as `max_tokens` everywhere else (older compatible servers only know that one).
- Thinking text is never sent to api.openai.com. To other servers it travels back as `reasoning_content`
  on assistant messages that made tool calls, and only there: DeepSeek's thinking mode answers 400 when it
  is missing on such messages, and servers that do not know the field ignore it. Anthropic-signed and
  redacted thinking is not sent (another vendor's reasoning, useless to this model).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Literal, NotRequired, TypedDict
from urllib.parse import urlsplit

import msgspec

from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.providers.base import (
    Finished,
    ModelRequest,
    ProviderEvent,
    StopKind,
    ToolCallEvent,
)
from ama_acp.providers.dialect import DeltaBuffer, decode_event, parse_replies, token_count
from ama_acp.providers.failures import MAX_DETAIL, StreamError, malformed
from ama_acp.providers.settings import ProviderSettings
from ama_acp.providers.sse import SSEEvent
from ama_acp.providers.stream import HttpStream

log = logging.getLogger(__name__)

_STOPS: dict[str, StopKind] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def is_official(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "") == "api.openai.com"


# --- request -----------------------------------------------------------------------------------------------

# The request as Chat Completions reads it: only what ama sends, typed, so a misspelt key is a type error.


class _TextPart(TypedDict):
    type: Literal["text"]
    text: str


class _ImageURL(TypedDict):
    url: str


class _ImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: _ImageURL


_Part = _TextPart | _ImagePart


class _FunctionCall(TypedDict):
    name: str
    arguments: str


class _ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: _FunctionCall


class _SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


class _UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[_Part]


class _AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[_ToolCall]]
    reasoning_content: NotRequired[str]


class _ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str


ChatMessage = _SystemMessage | _UserMessage | _AssistantMessage | _ToolMessage


class _FunctionDecl(TypedDict):
    name: str
    description: str
    parameters: Mapping[str, object]  # the tool's JSON schema


class _ToolDecl(TypedDict):
    type: Literal["function"]
    function: _FunctionDecl


class _StreamOptions(TypedDict):
    include_usage: bool


class ChatBody(TypedDict):
    model: str
    messages: list[ChatMessage]
    stream: bool
    stream_options: _StreamOptions
    tools: NotRequired[list[_ToolDecl]]
    max_completion_tokens: NotRequired[int]
    max_tokens: NotRequired[int]
    reasoning_effort: NotRequired[str]


def _user_content(parts: list[TextPart | ImagePart]) -> str | list[_Part]:
    # Plain text goes as one string: some compatible servers accept nothing else.
    if all(isinstance(p, TextPart) for p in parts):
        return "\n\n".join(p.text for p in parts if isinstance(p, TextPart))
    out: list[_Part] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        else:
            out.append(_image_block(p))
    return out


def _image_block(part: ImagePart) -> _ImagePart:
    return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}}


def _assistant(msg: AssistantMessage, send_reasoning: bool) -> _AssistantMessage:
    text = "".join(p.text for p in msg.content if isinstance(p, TextPart))
    calls = _tool_calls(msg)
    out: _AssistantMessage = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        out["tool_calls"] = calls
        thinking = _plain_thinking(msg) if send_reasoning else ""
        if thinking:
            out["reasoning_content"] = thinking
    return out


def _tool_calls(msg: AssistantMessage) -> list[_ToolCall]:
    return [
        {"id": p.id, "type": "function", "function": {"name": p.name, "arguments": p.arguments or "{}"}}
        for p in msg.content
        if isinstance(p, ToolCallPart)
    ]


def _plain_thinking(msg: AssistantMessage) -> str:
    """The reasoning that went out as plain text (not redacted, not signed by another dialect)."""
    return "".join(p.text for p in msg.content if isinstance(p, ThinkingPart) and not p.redacted and not p.signature)


def to_openai_messages(system: str, messages: list[Message], *, send_reasoning: bool = False) -> list[ChatMessage]:
    """The neutral conversation as Chat Completions messages."""
    out: list[ChatMessage] = []
    if system:
        out.append({"role": "system", "content": system})
    # Tool messages carry text only; images a tool returned follow the batch of tool messages as a user
    # message (a user message between a tool call and its result would break the pairing).
    pending_images: list[_Part] = []

    def flush_images() -> None:
        if pending_images:
            intro: _TextPart = {"type": "text", "text": "Images from the tool results above:"}
            out.append({"role": "user", "content": [intro, *pending_images]})
            pending_images.clear()

    for msg in messages:
        if not isinstance(msg, ToolResultMessage):
            flush_images()
        if isinstance(msg, UserMessage):
            out.append({"role": "user", "content": _user_content(msg.content)})
        elif isinstance(msg, AssistantMessage):
            out.append(_assistant(msg, send_reasoning))
        else:
            out.append(_tool_message(msg, pending_images))
    flush_images()
    return out


def _tool_message(msg: ToolResultMessage, pending_images: list[_Part]) -> ChatMessage:
    """A tool result's text, saying how many images follow; the images go to `pending_images`."""
    text = msg.text
    images = [p for p in msg.content if isinstance(p, ImagePart)]
    if images:
        text = (text + "\n" if text else "") + f"({len(images)} image(s) attached below)"
        pending_images.extend(_image_block(p) for p in images)
    return {"role": "tool", "tool_call_id": msg.tool_call_id, "content": text}


# --- response ----------------------------------------------------------------------------------------------

# The chunk shapes ama reads, as typed Structs: a field of the wrong type is a malformed chunk (a clear
# `Failure` naming the field), never a crash. Unknown fields are ignored and every field is optional, as in
# the real API and its copies.


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolFragment(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None  # DeepSeek, vLLM, llama.cpp
    reasoning: object = None  # OpenRouter and others: a str; its shape varies between servers, so only a str is read
    refusal: str | None = None
    tool_calls: list[_ToolFragment] | None = None


_NO_DELTA = _Delta()


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: object = None  # read leniently: a bad figure is unknown, not a failed reply (see token_count)
    error: object = None


_chunk_decoder = msgspec.json.Decoder(_Chunk)


def openai_usage(raw: object) -> Usage | None:
    """Chat Completions usage → Usage. `prompt_tokens` includes cached tokens; ama counts them apart. A usage
    that is not an object is unknown (None); a figure that is not a plausible count is unknown on its own."""
    if not isinstance(raw, dict):
        if raw is not None:
            log.warning("usage is not an object (%s); the figures are unknown", type(raw).__name__)
        return None
    prompt = token_count(raw.get("prompt_tokens"), "prompt_tokens")
    prompt_details = raw.get("prompt_tokens_details")
    cached = (
        token_count(prompt_details.get("cached_tokens"), "cached_tokens") if isinstance(prompt_details, dict) else None
    )
    if cached is None:
        cached = token_count(raw.get("prompt_cache_hit_tokens"), "prompt_cache_hit_tokens")  # DeepSeek's name
    out_details = raw.get("completion_tokens_details")
    reasoning = (
        token_count(out_details.get("reasoning_tokens"), "reasoning_tokens") if isinstance(out_details, dict) else None
    )
    uncached = prompt
    if prompt is not None and cached is not None:
        # More cached than prompt tokens cannot be: the input figure is then unknown.
        uncached = prompt - cached if cached <= prompt else None
    return Usage(
        input=uncached,
        output=token_count(raw.get("completion_tokens"), "completion_tokens"),
        cache_read=cached,
        total=token_count(raw.get("total_tokens"), "total_tokens"),
        reasoning=reasoning,
    )


class _Call:
    __slots__ = ("id", "name", "args")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []

    def add(self, tid: str | None, fn: _Function) -> None:
        """A fragment: its id and name when the call has none yet, its piece of the arguments."""
        if tid and not self.id:
            self.id = tid
        if fn.name and not self.name:
            self.name = fn.name
        if fn.arguments:
            self.args.append(fn.arguments)


def _stream_error(err: object) -> StreamError:
    """An `error` object inside the stream (vLLM, OpenRouter and others send them mid-stream)."""
    if isinstance(err, dict):
        detail = str(err.get("message") or err.get("type") or err)
        code = f"{err.get('code', '')} {err.get('type', '')}".lower()
    else:
        detail, code = str(err), ""
    detail = detail[:MAX_DETAIL]
    if "429" in code or "rate" in code:
        return StreamError("rate_limit", detail, retryable=True)
    if any(w in code for w in ("500", "502", "503", "504", "server", "overload", "timeout", "internal")):
        return StreamError("server", detail, retryable=True)
    return StreamError("bad_request", detail, retryable=False)


def _decode_chunk(data: str) -> _Chunk:
    return decode_event(_chunk_decoder, data, "chunk")


def parse_openai_stream(batches: AsyncIterator[list[SSEEvent]]) -> AsyncGenerator[ProviderEvent, None]:
    """Chat Completions chunks → provider events. Tool calls are assembled by `index` and yielded when the
    finish reason arrives; `Finished` waits for the usage chunk (or `[DONE]`). Anything after `[DONE]` is
    never read, as in the official SDK. The text (and reasoning) deltas of one read come out merged
    (`DeltaBuffer`). Raises `StreamError` for a chunk ama cannot use, after the text before it."""
    return parse_replies(batches, _Completion())


class _Completion:
    """One streamed chat completion (choice 0): its tool calls by index, stop reason and usage."""

    def __init__(self) -> None:
        self.calls: dict[int, _Call] = {}
        self.stop: StopKind | None = None
        self.refused = False
        self.usage: Usage | None = None
        self.held = DeltaBuffer()

    def event(self, ev: SSEEvent, out: list[ProviderEvent]) -> Finished | None:
        if len(ev.data) < 32 and ev.data.strip() == "[DONE]":  # not a strip of every chunk
            return self._done(out)
        self._chunk(_decode_chunk(ev.data), out)
        if self.stop is not None and self.usage is not None:
            return Finished(stop=self.stop, usage=self.usage)
        return None

    def _chunk(self, chunk: _Chunk, out: list[ProviderEvent]) -> None:
        if chunk.error:
            raise _stream_error(chunk.error)
        for choice in chunk.choices or ():
            if choice.index == 0:
                self._choice(choice, out)
        if chunk.usage is not None:
            self.usage = openai_usage(chunk.usage) or self.usage

    def end(self) -> Finished | None:
        """The stream ended without `[DONE]`: finished if the finish reason came (usage unknown), else broken."""
        return None if self.stop is None else Finished(stop=self.stop, usage=self.usage)

    def _choice(self, choice: _Choice, out: list[ProviderEvent]) -> None:
        delta = choice.delta or _NO_DELTA
        if self.stop is not None and (delta.content or delta.refusal or delta.tool_calls):
            raise malformed("content after the finish reason")
        self._text(delta, out)
        for tc in delta.tool_calls or ():
            _add_fragment(self.calls, tc)
        if choice.finish_reason and self.stop is None:
            calls_done = self._finish(choice.finish_reason)
            out += self.held.take() + calls_done

    def _text(self, delta: _Delta, out: list[ProviderEvent]) -> None:
        """The delta's reasoning, text and refusal, in that order, into the held deltas."""
        held = self.held
        thought = delta.reasoning_content or delta.reasoning
        if isinstance(thought, str) and thought:
            out += held.thinking(thought)
        if delta.content:
            out += held.text(delta.content)
        if delta.refusal:
            self.refused = True
            out += held.text(delta.refusal)

    def _done(self, out: list[ProviderEvent]) -> Finished:
        """`[DONE]`: the reply is complete, with the tool calls still open if no finish reason came."""
        out += self.held.take()
        if self.stop is None:
            out += self._finish(None)
        assert self.stop is not None
        return Finished(stop=self.stop, usage=self.usage)

    def _finish(self, reason: str | None) -> list[ProviderEvent]:
        """The finish reason: the stop kind, and the tool calls assembled so far (each must have a name)."""
        kind = "refusal" if self.refused else _STOPS.get(reason or "", "end_turn")
        # Some servers say "stop" although the message carries tool calls.
        self.stop = "tool_use" if self.calls and kind == "end_turn" else kind
        done: list[ProviderEvent] = []
        for i, c in sorted(self.calls.items()):
            if not c.name:
                raise malformed(f"tool call {i} has no function name")
            done.append(ToolCallEvent(id=c.id or f"call_{i}", name=c.name, arguments="".join(c.args) or "{}"))
        self.calls.clear()
        return done


def _add_fragment(calls: dict[int, _Call], tc: _ToolFragment) -> None:
    tid = tc.id
    fn = tc.function or _Function()
    idx = tc.index if tc.index is not None else _unindexed(calls, tid)
    call = calls.get(idx)
    if call is None:
        # The first fragment of a call names it (OpenAI also sends its id; a few copies do not).
        if not tid and not fn.name:
            raise malformed(f"a tool-call fragment for index {idx}, which was never started")
        call = calls[idx] = _Call()
    call.add(tid, fn)


def _unindexed(calls: dict[int, _Call], tid: str | None) -> int:
    """The index of a fragment without one: servers that leave `index` out send a new call with an id and its
    later fragments without one."""
    same = [k for k, c in calls.items() if tid and c.id == tid]
    if same:
        return same[0]
    return len(calls) if tid or not calls else max(calls)


# --- provider ----------------------------------------------------------------------------------------------


class OpenAIProvider:
    """`Provider` for Chat Completions. `settings.reasoning` flags a reasoning model (it gets
    `reasoning_effort`)."""

    def __init__(self, settings: ProviderSettings) -> None:
        settings = settings.for_dialect("openai")
        self.name = settings.name
        self.base_url = settings.base_url or ""
        self.reasoning = settings.reasoning
        self.official = is_official(self.base_url)
        headers = {"content-type": "application/json", "accept": "text/event-stream", **settings.headers}
        if settings.api_key:
            headers["authorization"] = f"Bearer {settings.api_key}"
        self._http = HttpStream(
            settings, url=self.base_url + "/chat/completions", headers=headers, key=settings.key_hint("openai")
        )

    def __repr__(self) -> str:
        return f"OpenAIProvider(name={self.name!r}, base_url={self.base_url!r})"

    def build_body(self, request: ModelRequest) -> ChatBody:
        body: ChatBody = {
            "model": request.model,
            "messages": to_openai_messages(request.system, request.messages, send_reasoning=not self.official),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        if request.max_output and self.official:
            body["max_completion_tokens"] = request.max_output
        elif request.max_output:
            body["max_tokens"] = request.max_output
        if self.reasoning and request.thought_level in ("low", "medium", "high"):
            body["reasoning_effort"] = request.thought_level
        return body

    def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderEvent, None]:
        return self._http.stream(self.build_body(request), parse_openai_stream)
