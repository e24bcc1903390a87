"""The agent loop's host (agent/loop.py `TurnHost`) for a task carried out by ama's own loop: a conversation of
its own.

The task has a fresh context (its prompt, the project instructions, the tools its agent allows), its own meter
and its own billing; it works through its parent session's workspace and approval, so the mode and the
person's answers apply to its calls exactly as to the parent's, and its tools run as the parent's do
(session/turn/tool_runner.py), sized to its own window. Nothing of its conversation enters the parent's: the
parent sees the task call and its result. The host tells its view (`ShowsLoop`) what happens — the task call's
content (session/tasks/call_view.py) or a session of its own (session/tasks/subagent_view.py), it does not know
which — and asks it for the approver of the task's calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal, TurnEnd
from ama_acp.context.request_size import tools_json
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, Usage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.providers import base as pb
from ama_acp.session.store import entries as en
from ama_acp.session.tasks.record import LoopTaskRecord
from ama_acp.session.tasks.worker import ShowsTask, TaskParent, TaskRuntime
from ama_acp.session.turn.host import Approves
from ama_acp.session.turn.tool_runner import judge_redirects, room, run_tool
from ama_acp.session.turn.toolset import describe_call
from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.tools.plan_exit import NAME as PLAN_EXIT
from ama_acp.tools.task import NAME as TASK


class ShowsLoop(ShowsTask, Protocol):
    """What the person sees of a task of ama's own loop, told by its host."""

    @property
    def approver(self) -> Approves:
        """Who approves the task's calls (the parent's approval, asked in the task's name or the parent's)."""
        ...

    def live(self) -> AbstractAsyncContextManager[None]:
        """The task's turn runs inside this (a view may merge streamed text meanwhile)."""
        ...

    async def event(self, event: ev.AgentEvent) -> None:
        """One event of the task's loop, after the host recorded it in the task's record."""

    async def replied(self) -> None:
        """A reply of the task was billed and measured."""


class TaskHost:
    """agent/loop.py `TurnHost` for one task's conversation."""

    def __init__(
        self,
        runtime: TaskRuntime,
        parent: TaskParent,
        record: LoopTaskRecord,
        system: str,
        tool_names: Sequence[str] | None,
        view: ShowsLoop,
    ) -> None:
        self._rt = runtime
        self._p = parent
        self.record = record
        self._system = system
        self._names = None if tool_names is None else frozenset(tool_names)
        self.max_turn_requests = runtime.config.max_turn_requests
        self.messages: list[Message] = []
        self.failure: str | None = None  # why the task's turn stopped short, if it did
        self.view = view
        self._provider: pb.Provider | None = None
        self._calls = 0

    # --- requests -----------------------------------------------------------------------------------------

    def provider(self) -> pb.Provider:
        if self._provider is None:  # the task's model is fixed when it starts: a switch of the parent's waits
            self._provider = self._rt.provider_for(self.record.model)
        return self._provider

    def specs(self) -> list[ToolSpec]:
        """The tools the task may use: its agent's, never `task` (no recursion) nor `exit_plan_mode` (only the
        session's own turn offers its plan to the person)."""
        return [s for s in self._p.tools.tool_specs() if self._allowed(s.name)]

    def build_request(self) -> pb.ModelRequest:
        specs = self.specs()
        self.record.meter.set_prefix(self._system, tools_json(specs))
        info = self._rt.model_info(self.record.model)
        _, _, name = self.record.model.partition("/")
        return pb.ModelRequest(
            model=info.model if info else name,
            system=self._system,
            messages=list(self.messages),
            tools=specs,
            max_output=info.max_output if info else None,
            thought_level=self._p.thought_level,
        )

    async def before_request(self) -> None:
        # A task is not compacted (it is meant to fit; its results are cut to its window), but its requests are
        # billed to its session and held to the session's budget.
        why = self._p.ctx.budget_stop()
        if why is not None:
            self.failure = why
            raise TurnEnd("end_turn")

    # --- its conversation ---------------------------------------------------------------------------------

    async def append(self, message: Message) -> None:
        self.messages.append(message)
        self.record.meter.append(message)

    async def emit(self, event: ev.AgentEvent) -> None:
        r = self.record
        if isinstance(event, ev.TextChunk):
            r.text += event.text
        elif isinstance(event, ev.ToolCallRequested):
            r.call_started(event.wire_id, event.title)
        elif isinstance(event, ev.ToolCallFinished):
            r.call_ended(event.wire_id, not event.result.is_error)
        await self.view.event(event)

    def wire_id(self, provider_id: str) -> str:
        # Unique across the session: the task call's id and the task's count (shown in permission requests).
        self._calls += 1
        return f"{self.record.id}.{self._calls}"

    # --- tools --------------------------------------------------------------------------------------------

    def _allowed(self, name: str) -> bool:
        return name not in (TASK, PLAN_EXIT) and (self._names is None or name in self._names)

    def describe_tool(self, name: str, args: dict[str, object]) -> ev.ToolCallRequested | None:
        if not self._allowed(name):
            return None
        return describe_call(self._p.tools.tool(name), name, args, self._p.tool_ctx.cwd)

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, object]) -> Refusal | None:
        return await self.view.approver.approve(call, args)  # the parent's mode, memory and editor

    async def run_tool(self, name: str, args: dict[str, object], wire_id: str) -> ToolResult:
        tool = self._p.tools.tool(name) if self._allowed(name) else None
        if tool is None:
            raise ToolError(f"There is no tool named {name!r}.")
        # The task's own window decides how much of a result it can take; the editor does not know the task's
        # call ids: a terminal is not embedded in a call it never saw.
        meter = self.record.meter
        space = room(meter, meter.figures(), self.messages)
        judge = judge_redirects(tool, wire_id, self.approve, self.emit)
        return await run_tool(tool, args, self._p.tool_ctx, space, None, judge=judge, hooks=self._p.hooks)

    # --- billing and failures -----------------------------------------------------------------------------

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        self._bill(message.usage, interrupted=False)
        self.record.text = answer_text(message) or self.record.text
        await self.view.replied()

    async def request_lost(self) -> None:
        self._bill(None, interrupted=True)

    def _bill(self, usage: Usage | None, interrupted: bool) -> None:
        model = self.record.model
        price = self._rt.price(model, usage)
        cost = self.record.billing.add(usage, price, True, interrupted)
        parent = self._p.ctx
        parent.billing.add(usage, price, False, interrupted)
        self._p.persist(
            en.UsageEntry(
                model_id=model,
                usage=usage or Usage(),
                cost=cost,
                purpose="task",
                meter=parent.meter_state(),
                billing=parent.billing_state(),
            )
        )

    async def provider_failed(self, failure: pb.Failure) -> None:
        self.failure = failure.message

    async def turn_failed(self, text: str) -> None:
        self.failure = text


def answer_text(message: AssistantMessage) -> str:
    return "".join(p.text for p in message.content if isinstance(p, TextPart)).strip()
