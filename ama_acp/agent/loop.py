"""The agent loop: stream → tool calls → run tools → feed results → repeat.

No protocol in here. The host (a session) supplies the conversation, the provider request, tools,
approvals and an event sink. Turn exits are `TurnEnd` exceptions carrying their ACP stop reason, caught in
one place (`run_turn`).
"""

from __future__ import annotations

import itertools
import logging
from contextlib import aclosing
from typing import Any, Protocol

import anyio

from ama_acp.agent import events as ev
from ama_acp.agent.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.providers import base as pb
from ama_acp.tools.base import ToolError, ToolResult

log = logging.getLogger(__name__)

_message_ids = itertools.count(1)


class TurnEnd(Exception):
    def __init__(self, stop_reason: str) -> None:
        super().__init__(stop_reason)
        self.stop_reason = stop_reason


class ToolCallInfo(Protocol):
    wire_id: str
    name: str


class TurnHost(Protocol):
    max_turn_requests: int

    def provider(self) -> pb.Provider: ...

    def build_request(self) -> pb.ModelRequest: ...

    async def append(self, message: Message) -> None: ...

    async def emit(self, event: ev.AgentEvent) -> None: ...

    def wire_id(self, provider_id: str) -> str: ...

    def describe_tool(self, name: str, args: dict[str, Any]) -> ev.ToolCallRequested | None:
        """Title, kind and locations of a call; None when no tool of that name exists."""
        ...

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, Any]) -> str | None:
        """None to go ahead, or the reason the call may not run (told to the model)."""
        ...

    async def run_tool(self, name: str, args: dict[str, Any], wire_id: str) -> ToolResult: ...

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        """E1; runs after the message is appended."""
        ...

    async def before_request(self) -> None:
        """Compaction, when due, happens here: the context is whole (every call has its result)."""
        ...

    async def provider_failed(self, failure: pb.Failure) -> None:
        """Tell the person why the turn stopped (an agent message)."""
        ...


async def run_turn(host: TurnHost, prompt: UserMessage) -> str:
    """Run one prompt turn to its end and return the ACP stop reason."""
    await host.append(prompt)
    try:
        await _turn(host)
    except TurnEnd as end:
        return end.stop_reason
    return "end_turn"  # pragma: no cover - _turn always raises TurnEnd


async def _turn(host: TurnHost) -> None:
    for _ in range(host.max_turn_requests):
        message = await _one_request(host)
        if message.stop == "max_tokens" and not message.tool_calls:
            raise TurnEnd("max_tokens")
        if message.stop == "refusal":
            raise TurnEnd("refusal")
        calls = message.tool_calls
        if not calls:
            raise TurnEnd("end_turn")
        await _run_calls(host, calls)
    raise TurnEnd("max_turn_requests")


async def _one_request(host: TurnHost) -> AssistantMessage:
    """Stream one model response; append it; return it."""
    await host.before_request()
    request = host.build_request()
    parts = _PartialMessage(next(_message_ids))
    try:
        # aclosing: a cancelled or abandoned stream closes its HTTP response now, not at garbage collection.
        async with aclosing(host.provider().stream(request)) as stream:
            async for event in stream:
                if isinstance(event, pb.TextDelta):
                    parts.text(event.text)
                    await host.emit(ev.TextChunk(event.text, parts.message_id))
                elif isinstance(event, pb.ThinkingDelta):
                    parts.thinking(event)
                    if event.text and not event.redacted:
                        await host.emit(ev.ThoughtChunk(event.text, parts.message_id))
                elif isinstance(event, pb.ToolCallEvent):
                    parts.tool_call(event)
                elif isinstance(event, pb.Retrying):
                    # The provider starts the request over itself; what streamed so far is void.
                    await host.emit(ev.Retrying(event.attempt, event.delay, event.reason))
                    parts = _PartialMessage(next(_message_ids))
                elif isinstance(event, pb.Failure):
                    await _keep_partial(host, parts, "error")
                    await host.provider_failed(event)
                    raise TurnEnd("end_turn")
                elif isinstance(event, pb.Finished):
                    message = parts.finish(request.model, event.stop, event.usage)
                    await host.append(message)
                    await host.after_assistant_message(message)
                    return message
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await _keep_partial(host, parts, "cancelled")
        raise
    # The stream ended without Finished or Failure: a provider bug; say so rather than hang.
    await _keep_partial(host, parts, "error")
    await host.provider_failed(pb.Failure("stream", "The model's reply ended unexpectedly."))
    raise TurnEnd("end_turn")


async def _keep_partial(host: TurnHost, parts: _PartialMessage, stop: str) -> None:
    """A reply cut short keeps the text the person already saw, without its unfinished tool calls."""
    message = parts.finish_partial(stop)
    if message is not None:
        await host.append(message)


async def _run_calls(host: TurnHost, calls: list[ToolCallPart]) -> None:
    pending = list(calls)
    try:
        while pending:
            call = pending[0]
            result = await _run_call(host, call)
            pending.pop(0)
            await host.append(
                ToolResultMessage(
                    tool_call_id=call.id, name=call.name, content=[TextPart(result.text)], is_error=result.is_error
                )
            )
    except anyio.get_cancelled_exc_class():
        # Every call the model made needs a result, or the next request is malformed.
        with anyio.CancelScope(shield=True):
            for call in pending:
                await host.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        name=call.name,
                        content=[TextPart("The user cancelled this tool call before it finished.")],
                        is_error=True,
                    )
                )
        raise


async def _run_call(host: TurnHost, call: ToolCallPart) -> ToolResult:
    wire_id = host.wire_id(call.id)
    try:
        args = call.parsed_arguments()
    except ValueError as exc:
        args = None
        bad_args = f"The arguments of {call.name} are not a valid JSON object ({exc}). Call it again with valid JSON."
    described = host.describe_tool(call.name, args if isinstance(args, dict) else {})
    if described is None:
        described = ev.ToolCallRequested(wire_id, call.name, call.name, "other", [], args)
        await host.emit(described)
        return await _fail(host, wire_id, f"There is no tool named {call.name!r}.")
    described = ev.ToolCallRequested(
        wire_id, described.name, described.title, described.kind, described.locations, args
    )
    await host.emit(described)
    if args is None:
        return await _fail(host, wire_id, bad_args)
    refusal = await host.approve(described, args)
    if refusal is not None:
        return await _fail(host, wire_id, refusal)
    await host.emit(ev.ToolCallStarted(wire_id))
    try:
        result = await host.run_tool(call.name, args, wire_id)
    except ToolError as exc:
        return await _fail(host, wire_id, str(exc))
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await host.emit(ev.ToolCallFinished(wire_id, ToolResult("Cancelled.", is_error=True)))
        raise
    except Exception as exc:  # a tool bug must not kill the turn; the model and the person hear of it
        log.exception("tool %s failed", call.name)
        return await _fail(host, wire_id, f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}")
    await host.emit(ev.ToolCallFinished(wire_id, result))
    return result


async def _fail(host: TurnHost, wire_id: str, text: str) -> ToolResult:
    result = ToolResult(text, is_error=True)
    await host.emit(ev.ToolCallFinished(wire_id, result))
    return result


class _PartialMessage:
    """Accumulates one streamed reply into the parts of an AssistantMessage."""

    def __init__(self, number: int) -> None:
        self.message_id = f"m{number}"
        self._parts: list[TextPart | ThinkingPart | ToolCallPart] = []
        self._text: list[str] = []
        self._thinking: list[str] = []

    def _flush_text(self) -> None:
        if self._text:
            self._parts.append(TextPart("".join(self._text)))
            self._text = []

    def _flush_thinking(self, signature: str | None = None, redacted: bool = False) -> None:
        if self._thinking or signature:
            self._parts.append(ThinkingPart("".join(self._thinking), signature, redacted))
            self._thinking = []

    def text(self, text: str) -> None:
        self._flush_thinking()
        self._text.append(text)

    def thinking(self, event: pb.ThinkingDelta) -> None:
        self._flush_text()
        if event.redacted:
            self._flush_thinking()
            self._parts.append(ThinkingPart(event.text, None, True))
            return
        if event.text:
            self._thinking.append(event.text)
        if event.signature:
            self._flush_thinking(event.signature)

    def tool_call(self, event: pb.ToolCallEvent) -> None:
        self._flush_text()
        self._flush_thinking()
        self._parts.append(ToolCallPart(event.id, event.name, event.arguments))

    def finish(self, model: str, stop: str, usage: Any) -> AssistantMessage:
        self._flush_text()
        self._flush_thinking()
        return AssistantMessage(content=self._parts, model=model, stop=stop, usage=usage)

    def finish_partial(self, stop: str) -> AssistantMessage | None:
        self._flush_text()
        self._flush_thinking()
        kept = [p for p in self._parts if isinstance(p, TextPart) and p.text]
        if not kept:
            return None
        return AssistantMessage(content=kept, stop=stop)
