"""A scripted provider and a recording TurnHost for in-process tests of the agent loop.

Both are real implementations of the loop's seams (`providers.base.Provider`, `agent.loop.TurnHost`): the
provider is an async generator of the typed events real providers yield, the host keeps the conversation
in a list and runs tools as plain async functions. What they record is what the tests assert on.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

import anyio

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal, TurnHost
from ama_acp.conversation.messages import AssistantMessage, Message, ToolResultMessage
from ama_acp.providers import base as pb
from ama_acp.tools.base import ToolResult


class Hang:
    """A point in a scripted reply where the stream stops until cancelled (the provider's `streaming` is
    set first, so a test can cancel exactly there)."""


Scripted = pb.ProviderEvent | Hang
Reply = Sequence[Scripted]

DEFAULT_REPLY: Reply = (pb.TextDelta("(no more replies)"), pb.Finished("end_turn"))


class FakeProvider:
    """Yields one scripted reply per request, in order, and records every ModelRequest it was given."""

    name = "fake"

    def __init__(self, replies: Sequence[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[pb.ModelRequest] = []
        self.streaming = anyio.Event()

    async def stream(self, request: pb.ModelRequest) -> AsyncGenerator[pb.ProviderEvent, None]:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else DEFAULT_REPLY
        for event in reply:
            if isinstance(event, Hang):
                self.streaming.set()
                await anyio.sleep_forever()
            else:
                yield event


Tool = Callable[[dict[str, Any]], Awaitable[ToolResult]]
Approve = Callable[[ev.ToolCallRequested, dict[str, Any]], Awaitable[Refusal | None]]


async def _allow(call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
    return None


class HostBug(Exception):
    """A failure injected into the host (a bug of ama's outside the loop)."""


class FakeHost:
    """A TurnHost that records the conversation, the events and every call the loop makes to it.

    `tools` maps a tool name to its behaviour; a name not in it is an unknown tool (describe_tool → None).
    `fail_append` makes the n-th append (0 = the prompt) raise HostBug without recording the message.
    """

    def __init__(
        self,
        replies: Sequence[Reply],
        tools: dict[str, Tool] | None = None,
        *,
        approve: Approve = _allow,
        max_turn_requests: int = 10,
        fail_append: int | None = None,
    ) -> None:
        self.p = FakeProvider(replies)
        self.tools = tools or {}
        self._approve = approve
        self.max_turn_requests = max_turn_requests
        self.fail_append = fail_append
        self.messages: list[Message] = []
        self.events: list[ev.AgentEvent] = []
        self.approved: list[tuple[ev.ToolCallRequested, dict[str, Any]]] = []
        self.ran: list[tuple[str, dict[str, Any], str]] = []
        self.after_messages: list[AssistantMessage] = []
        self.lost_requests = 0  # request_lost() calls: accepted requests whose usage never came
        self.before_requests = 0
        self.provider_failures: list[pb.Failure] = []
        self.turn_failures: list[str] = []
        self._appends = 0
        self._wire = 0

    # --- TurnHost ---------------------------------------------------------------------------------------

    def provider(self) -> pb.Provider:
        return self.p

    def build_request(self) -> pb.ModelRequest:
        return pb.ModelRequest(model="fake-model", system="sys", messages=list(self.messages))

    async def append(self, message: Message) -> None:
        n = self._appends
        self._appends += 1
        if self.fail_append == n:
            raise HostBug(f"append #{n}")
        self.messages.append(message)

    async def emit(self, event: ev.AgentEvent) -> None:
        self.events.append(event)

    def wire_id(self, provider_id: str) -> str:
        self._wire += 1
        return f"w{self._wire}-{provider_id}"

    def describe_tool(self, name: str, args: dict[str, Any]) -> ev.ToolCallRequested | None:
        if name not in self.tools:
            return None
        return ev.ToolCallRequested("", name, f"Title of {name}", "read", [], args)

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
        self.approved.append((call, args))
        return await self._approve(call, args)

    async def run_tool(self, name: str, args: dict[str, Any], wire_id: str) -> ToolResult:
        self.ran.append((name, args, wire_id))
        return await self.tools[name](args)

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        self.after_messages.append(message)

    async def request_lost(self) -> None:
        self.lost_requests += 1

    async def before_request(self) -> None:
        self.before_requests += 1

    async def provider_failed(self, failure: pb.Failure) -> None:
        self.provider_failures.append(failure)

    async def turn_failed(self, text: str) -> None:
        self.turn_failures.append(text)

    # --- what the tests read ----------------------------------------------------------------------------

    def results(self) -> list[ToolResultMessage]:
        return [m for m in self.messages if isinstance(m, ToolResultMessage)]

    def assistants(self) -> list[AssistantMessage]:
        return [m for m in self.messages if isinstance(m, AssistantMessage)]

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def final_status_counts(self) -> dict[str, int]:
        """wire id → number of final statuses (ToolCallFinished) of every announced call."""
        counts = {e.wire_id: 0 for e in self.of(ev.ToolCallRequested)}
        for e in self.of(ev.ToolCallFinished):
            counts[e.wire_id] = counts.get(e.wire_id, 0) + 1
        return counts


def _is_turn_host(host: FakeHost) -> TurnHost:
    return host  # mypy checks here that FakeHost keeps up with the TurnHost Protocol


def calls(*specs: tuple[str, str, str], stop: pb.StopKind = "tool_use") -> list[Scripted]:
    """A reply of tool calls (id, name, JSON arguments)."""
    return [*(pb.ToolCallEvent(cid, name, args) for cid, name, args in specs), pb.Finished(stop)]


def text(body: str, stop: pb.StopKind = "end_turn") -> list[Scripted]:
    return [pb.TextDelta(body), pb.Finished(stop)]


def returns(result: str, is_error: bool = False) -> Tool:
    async def run(args: dict[str, Any]) -> ToolResult:
        return ToolResult(result, is_error)

    return run


def raises(exc: BaseException) -> Tool:
    async def run(args: dict[str, Any]) -> ToolResult:
        raise exc

    return run


def blocks(started: anyio.Event) -> Tool:
    """A tool that runs until cancelled (it sets `started` first)."""

    async def run(args: dict[str, Any]) -> ToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return run
