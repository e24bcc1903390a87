"""The agent loop: stream → tool calls → run tools → feed results → repeat.

No protocol in here. The host (a session) supplies the conversation, the provider request, tools,
approvals and an event sink. Turn exits are `TurnEnd` exceptions carrying their ACP stop reason, caught in
one place (`run_turn`).

The invariant this module keeps on every path (normal, tool bug, host bug, cancel): once an assistant
message with tool calls is appended, each of its calls gets exactly one ToolResultMessage before anything
else enters the conversation, and each call the person was shown gets exactly one final status.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from typing import Any, Protocol, runtime_checkable

import anyio
import msgspec

from ama_acp.agent import events as ev
from ama_acp.agent.streamed_text import StreamedText
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
    valid_unicode,
)
from ama_acp.errors import ControlFlow
from ama_acp.providers import base as pb
from ama_acp.tools.base import ToolError, ToolResult

log = logging.getLogger(__name__)

CANCELLED_FOR_MODEL = "The user cancelled this tool call before it finished."
CANCELLED_FOR_PERSON = "Cancelled."


class TurnEnd(ControlFlow):
    """The turn is over (a control-flow signal, not an error): unwinds to the loop with the ACP stop reason."""

    def __init__(self, stop_reason: str) -> None:
        super().__init__(stop_reason)
        self.stop_reason = stop_reason


class Refusal(msgspec.Struct, frozen=True):
    """Why a call may not run: `for_model` goes into its ToolResultMessage, `for_person` is what the editor
    shows in the tool call (they differ: the model needs instructions, the person needs a plain fact)."""

    for_model: str
    for_person: str


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

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
        """None to go ahead, or why the call may not run."""
        ...

    async def run_tool(self, name: str, args: dict[str, Any], wire_id: str) -> ToolResult: ...

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        """E1; runs after the message is appended."""
        ...

    async def request_lost(self) -> None:
        """The provider accepted a request of this turn (`Accepted`) whose usage will never arrive: it was
        cancelled, cut off, or retried mid-reply. It was billed all the same (U17)."""
        ...

    async def before_request(self) -> None:
        """Compaction, when due, happens here: the context is whole (every call has its result)."""
        ...

    async def provider_failed(self, failure: pb.Failure) -> None:
        """Tell the person why the turn stopped (an agent message)."""
        ...

    async def turn_failed(self, text: str) -> None:
        """Tell the person that ama itself failed and the turn stopped (an agent message)."""
        ...


async def run_turn(host: TurnHost, prompt: UserMessage) -> str:
    """Run one prompt turn to its end and return the ACP stop reason."""
    try:
        await host.append(prompt)  # inside: a host that cannot take the prompt fails the turn, not the request
        await _turn(host)
    except TurnEnd as end:
        return end.stop_reason
    except Exception as exc:  # a bug in ama: the turn ends with a message, the conversation stays valid
        log.exception("the turn failed")
        with anyio.CancelScope(shield=True):
            try:
                await host.turn_failed(
                    f"ama hit an internal error and stopped this turn ({type(exc).__name__}: {exc})."
                )
            except Exception:
                log.exception("could not tell the person about the failed turn")
        return "end_turn"
    return "end_turn"  # pragma: no cover - _turn always raises TurnEnd


async def _turn(host: TurnHost) -> None:
    for _ in range(host.max_turn_requests):
        message = await _one_request(host)
        batch = _CallBatch(host, message.tool_calls)
        try:
            await host.after_assistant_message(message)
            if message.stop == "max_tokens" and not batch.calls:
                raise TurnEnd("max_tokens")
            if message.stop == "refusal":
                raise TurnEnd("refusal")
            if not batch.calls:
                raise TurnEnd("end_turn")
            await batch.run()
        except BaseException as exc:
            # Whatever ended this early (a cancel, a host bug, a refusal with calls), the calls still open
            # get their results now, before anything else can enter the conversation.
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            with anyio.CancelScope(shield=True):
                await batch.close_open(cancelled)
            raise
    raise TurnEnd("max_turn_requests")


async def _one_request(host: TurnHost) -> AssistantMessage:
    """Stream one model response; append it; return it."""
    await host.before_request()
    request = host.build_request()
    reply = _Streaming()
    try:
        # aclosing: a cancelled or abandoned stream closes its HTTP response now, not at garbage collection.
        async with aclosing(host.provider().stream(request)) as stream:
            async for event in stream:
                message = await reply.take(host, request, event)
                if message is not None:
                    return message
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await _keep_partial(host, reply.parts, "cancelled")
            await reply.lose(host)
        raise
    # The stream ended without Finished or Failure: a provider bug; say so rather than hang.
    await _keep_partial(host, reply.parts, "error")
    await reply.lose(host)
    await host.provider_failed(pb.Failure("stream", "The model's reply ended unexpectedly."))
    raise TurnEnd("end_turn")


class _Streaming:
    """The response being streamed: its parts so far, and whether the provider took the current attempt (it is
    then billed, whether or not usage arrives)."""

    def __init__(self) -> None:
        self.parts = _PartialMessage()
        self.accepted = False

    async def take(self, host: TurnHost, request: pb.ModelRequest, event: pb.ProviderEvent) -> AssistantMessage | None:
        """One event of the stream; the appended message once it is finished. A failure ends the turn."""
        parts = self.parts
        if isinstance(event, pb.Accepted):
            self.accepted = True
        elif isinstance(event, pb.TextDelta):
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
            await self.lose(host)  # …but an attempt cut off mid-reply was billed
            await host.emit(event)
            self.parts = _PartialMessage()
        elif isinstance(event, pb.Failure):
            await _keep_partial(host, parts, "error")
            await self.lose(host)
            await host.provider_failed(event)
            raise TurnEnd("end_turn")
        elif isinstance(event, pb.Finished):
            self.accepted = False  # billed with its message (after_assistant_message)
            message = parts.finish(request.model, event.stop, event.usage)
            await host.append(message)
            return message
        return None

    async def lose(self, host: TurnHost) -> None:
        """The accepted attempt ends without its message: the host bills it as lost."""
        if self.accepted:
            self.accepted = False
            await host.request_lost()


async def _keep_partial(host: TurnHost, parts: _PartialMessage, stop: str) -> None:
    """A reply cut short keeps the text the person already saw, without its unfinished tool calls."""
    message = parts.finish_partial(stop)
    if message is not None:
        await host.append(message)


class _CallState:
    __slots__ = ("call", "wire_id", "announced", "finished", "closed")

    def __init__(self, call: ToolCallPart) -> None:
        self.call = call
        self.wire_id: str | None = None
        self.announced = False  # the person was shown a tool_call for it
        self.finished = False  # …and its final status
        self.closed = False  # its ToolResultMessage is in the conversation


class _CallBatch:
    """The tool calls of one assistant message, and which of them are announced, finished and closed."""

    def __init__(self, host: TurnHost, calls: list[ToolCallPart]) -> None:
        self.host = host
        self.calls = calls
        self.states = [_CallState(c) for c in calls]

    async def run(self) -> None:
        i = 0
        while i < len(self.states):
            # A run of calls the host runs side by side (task calls: session/tasks/runner.py) goes at once; their
            # results still enter the conversation in call order, after the last of them is done.
            j = i
            while j < len(self.states) and _concurrent(self.host, self.states[j].call):
                j += 1
            group = self.states[i : max(j, i + 1)]
            i += len(group)
            if len(group) == 1:
                await self._close(group[0], await self._result(group[0]))
            else:
                await self._run_side_by_side(group)

    async def _run_side_by_side(self, group: list[_CallState]) -> None:
        results: list[ToolResult | None] = [None] * len(group)

        async def one(k: int, state: _CallState) -> None:
            results[k] = await self._result(state)

        async with anyio.create_task_group() as tg:
            for k, state in enumerate(group):
                tg.start_soon(one, k, state)
        for state, result in zip(group, results, strict=True):  # in call order, as the provider wants them
            assert result is not None
            await self._close(state, result)

    async def _result(self, state: _CallState) -> ToolResult:
        try:
            return await _run_call(self.host, state)
        except Exception as exc:  # describe/approve/emit broke: this call fails, the turn goes on
            log.exception("tool call %r failed outside its tool", state.call.name)
            result = ToolResult(f"{_name(state.call)} failed unexpectedly: {type(exc).__name__}: {exc}", True)
            await self._finish_quietly(state, result)
            return result

    async def _close(self, state: _CallState, result: ToolResult) -> None:
        call = state.call
        state.closed = True  # before the await: a cancel inside append must not add a second result
        await self.host.append(
            ToolResultMessage(
                tool_call_id=call.id,
                name=_name(call),
                content=[TextPart(result.text), *result.images],
                is_error=result.is_error,
            )
        )

    async def _finish_quietly(self, state: _CallState, result: ToolResult, shown: str | None = None) -> None:
        if not state.announced or state.finished or state.wire_id is None:
            return
        state.finished = True
        try:
            await self.host.emit(ev.ToolCallFinished(state.wire_id, result, shown=shown))
        except Exception:  # the person may not hear of it (the client is gone); the model still will
            log.exception("could not send the final status of tool call %s", state.wire_id)

    async def close_open(self, cancelled: bool) -> None:
        """Every call not closed yet gets its result; those the person saw get a final status first."""
        if cancelled:
            model_text, person_text = CANCELLED_FOR_MODEL, CANCELLED_FOR_PERSON
        else:
            model_text = person_text = "This call did not run: the turn ended before it."
        for state in self.states:
            if state.closed:
                continue
            await self._finish_quietly(state, ToolResult(model_text, is_error=True), person_text)
            try:
                await self._close(state, ToolResult(model_text, is_error=True))
            except Exception:
                log.exception("could not record the result of tool call %r", state.call.id)


@runtime_checkable
class ConcurrentCalls(Protocol):
    """A host that runs some tools side by side (session/turn/host.py: `task`); other hosts run every call in turn."""

    def runs_concurrently(self, name: str) -> bool: ...


def _concurrent(host: TurnHost, call: ToolCallPart) -> bool:
    return isinstance(host, ConcurrentCalls) and isinstance(call.name, str) and host.runs_concurrently(call.name)


def _name(call: ToolCallPart) -> str:
    return call.name if isinstance(call.name, str) else repr(call.name)


async def _run_call(host: TurnHost, state: _CallState) -> ToolResult:
    call = state.call
    wire_id = state.wire_id = host.wire_id(call.id if isinstance(call.id, str) else repr(call.id))
    args: dict[str, Any] | None = None
    bad_args = ""
    try:
        args = call.parsed_arguments()
    except ValueError as exc:
        bad_args = f"The arguments of {_name(call)} are not a valid JSON object ({exc}). Call it again with valid JSON."
    described = host.describe_tool(call.name, args or {}) if isinstance(call.name, str) else None
    if described is None:
        await _announce(host, state, ev.ToolCallRequested(wire_id, _name(call), _name(call), "other", [], args))
        return await _fail(host, state, f"There is no tool named {call.name!r}.")
    described = ev.ToolCallRequested(
        wire_id, described.name, described.title, described.kind, described.locations, args
    )
    await _announce(host, state, described)
    if args is None:
        return await _fail(host, state, bad_args)
    refusal = await host.approve(described, args)
    if refusal is not None:
        return await _fail(host, state, refusal.for_model, refusal.for_person)
    await host.emit(ev.ToolCallStarted(wire_id))
    try:
        result = await host.run_tool(call.name, args, wire_id)
    except ToolError as exc:
        return await _fail(host, state, str(exc))
    except Exception as exc:  # a tool bug must not kill the turn; the model and the person hear of it
        log.exception("tool %s failed", call.name)
        return await _fail(host, state, f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}")
    result = _valid_result(result)
    await host.emit(ev.ToolCallFinished(wire_id, result))
    state.finished = True
    return result


def _valid_result(result: ToolResult) -> ToolResult:
    """A tool's result as valid Unicode: file names the OS could not decode must not make the update, the
    session file or the next model request unwritable (see messages.valid_unicode)."""
    text = valid_unicode(result.text)
    paths = [valid_unicode(loc.path) for loc in result.locations]
    if text is result.text and all(p is loc.path for p, loc in zip(paths, result.locations, strict=True)):
        return result
    locations = [msgspec.structs.replace(loc, path=p) for p, loc in zip(paths, result.locations, strict=True)]
    return msgspec.structs.replace(result, text=text, locations=locations)


async def _announce(host: TurnHost, state: _CallState, event: ev.ToolCallRequested) -> None:
    state.announced = True  # before the await: once the update may be out, it needs a final status
    await host.emit(event)


async def _fail(host: TurnHost, state: _CallState, text: str, shown: str | None = None) -> ToolResult:
    result = ToolResult(valid_unicode(text), is_error=True)  # an error may quote a file name as the OS gave it
    assert state.wire_id is not None
    await host.emit(ev.ToolCallFinished(state.wire_id, result, shown=shown))
    # Marked after the send: a cancel that stops the send leaves the call for close_open to finish.
    state.finished = True
    return result


class _PartialMessage:
    """Accumulates one streamed reply into the parts of an AssistantMessage."""

    def __init__(self) -> None:
        self.message_id = ev.new_message_id()
        self._parts: list[TextPart | ThinkingPart | ToolCallPart] = []
        self._text = StreamedText()
        self._thinking = StreamedText()

    def _flush_text(self) -> None:
        if self._text:
            self._parts.append(TextPart(self._text.take()))

    def _flush_thinking(self, signature: str | None = None, redacted: bool = False) -> None:
        if self._thinking or signature:
            self._parts.append(ThinkingPart(self._thinking.take(), signature, redacted))

    def text(self, text: str) -> None:
        self._flush_thinking()
        self._text.add(text)

    def thinking(self, event: pb.ThinkingDelta) -> None:
        self._flush_text()
        if event.redacted:
            self._flush_thinking()
            self._parts.append(ThinkingPart(event.text, None, True))
            return
        if event.text:
            self._thinking.add(event.text)
        if event.signature:
            self._flush_thinking(event.signature)

    def tool_call(self, event: pb.ToolCallEvent) -> None:
        self._flush_text()
        self._flush_thinking()
        self._parts.append(ToolCallPart(event.id, event.name, event.arguments))

    def finish(self, model: str, stop: str, usage: Usage | None) -> AssistantMessage:
        self._flush_text()
        self._flush_thinking()
        return AssistantMessage(content=self._parts, model=model, stop=stop, usage=usage)

    def finish_partial(self, stop: str) -> AssistantMessage | None:
        self._flush_text()
        self._flush_thinking()
        kept: list[TextPart | ThinkingPart | ToolCallPart] = [
            p for p in self._parts if isinstance(p, TextPart) and p.text
        ]
        if not kept:
            return None
        return AssistantMessage(content=kept, stop=stop)
