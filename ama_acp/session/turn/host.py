"""The agent loop's host for one session (agent/loop.py `TurnHost`): it builds each request from the session's
conversation, model and tools, runs tools through the session's workspace and permissions, persists every
message and tool call as it happens, bills and measures each reply, and turns the loop's events into the
session's updates. Pruning and compaction run before each request (the session's compactor), where the
context is whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import msgspec

from ama_acp.agent import events as ev
from ama_acp.agent.instructions import SessionInstructions
from ama_acp.agent.loop import Refusal, TurnEnd
from ama_acp.agent.prompt import Setting, setting_reminder
from ama_acp.config import Config
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.providers import base as pb
from ama_acp.providers.catalog import ModelInfo
from ama_acp.session.accounting.session_context import SessionContext
from ama_acp.session.conversation import Conversation
from ama_acp.session.editor.outbox import Outbox
from ama_acp.session.editor.updates import cut_short_update, plan_update, to_update
from ama_acp.session.facets import Located, Persists, UsesModel
from ama_acp.session.store import entries as en
from ama_acp.session.turn.tool_runner import Room, hooked, judge_redirects, room, run_tool
from ama_acp.session.turn.toolcalls import ToolCallRecords
from ama_acp.session.turn.toolset import SessionTools
from ama_acp.session.turn.wire_ids import WireIds
from ama_acp.shaping.skills import Found
from ama_acp.tools.base import Tool, ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.task import NAME as TASK
from ama_acp.tools.workspace import CutShort
from ama_acp.wire import types as w

if TYPE_CHECKING:  # a session has hooks only when the config lists some: made by live.py then
    from ama_acp.shaping.hook_points import SessionHooks


class HostRuntime(Protocol):
    """What the host needs from the sessions' shared runtime (session/manager.py `SessionManager`)."""

    @property
    def config(self) -> Config: ...

    def provider_for(self, model_id: str) -> pb.Provider: ...

    def model_info(self, model_id: str) -> ModelInfo | None: ...


class Approves(Protocol):
    """session/editor/approval.py `Approver`."""

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, object]) -> Refusal | None: ...


class RunsTasks(Protocol):
    """session/tasks/runner.py `TaskRunner`."""

    async def run(self, args: dict[str, object], wire_id: str) -> ToolResult: ...


class Prepares(Protocol):
    """session/turn/compacting.py `Compactor`."""

    async def before_request(self) -> None: ...


class SessionSetting(Located, Protocol):
    """Where a session works and in which mode: what its system prompt is written for (agent/prompt.py), and a
    task's of its own loop too (session/tasks/loop_worker.py)."""

    @property
    def mode(self) -> str: ...

    @property
    def instructions(self) -> SessionInstructions: ...

    @property
    def skills(self) -> Found:
        """The session's skills (shaping/skills.py), read once as it opened."""
        ...


class SessionParts(Persists, Protocol):
    """What a conversation's host works through of its session, the session's own and a task's alike
    (session/tasks/worker.py `TaskParent`): its tools, their context and its approval, its thought level, its file
    and its updates."""

    @property
    def tools(self) -> SessionTools: ...

    @property
    def tool_ctx(self) -> ToolContext: ...

    @property
    def approver(self) -> Approves: ...

    @property
    def thought_level(self) -> str: ...

    @property
    def hooks(self) -> SessionHooks | None:
        """The person's hooks (shaping/hook_points.py); None without any."""
        ...


class HostedSession(SessionSetting, SessionParts, UsesModel, Protocol):
    """What the host reads of its session (session/live.py `Session`) and the parts it works through."""

    @property
    def conversation(self) -> Conversation: ...

    @property
    def ctx(self) -> SessionContext: ...

    @property
    def compactor(self) -> Prepares: ...

    @property
    def outbox(self) -> Outbox: ...

    @property
    def tasks(self) -> RunsTasks: ...

    def system_prompt(self) -> str: ...

    def base_prompt(self) -> str:
        """The system prompt without the project instructions (what the first request freezes)."""
        ...

    async def report_usage(self, force: bool = False, message_end: bool = False) -> None: ...


class SessionHost:
    def __init__(self, runtime: HostRuntime, session: HostedSession, wire_ids: WireIds | None = None) -> None:
        self._rt = runtime
        self._s = session
        self.max_turn_requests = runtime.config.max_turn_requests
        self.calls = ToolCallRecords(wire_ids)
        self._provider: pb.Provider | None = None
        self._provider_model: str | None = None
        # The model the request in flight was built for: its reply is billed and measured as that model's, even
        # when the person switches models while it streams (docs/context.md "A switch while a reply streams").
        self.serving: str | None = None
        # What made the last turn fail, as (kind, message): a provider Failure's kind, or "internal" for ama's own
        # error. None while the turn succeeds; `ama -p` exits non-zero on it (the ACP answer is still end_turn).
        self.turn_error: tuple[str, str] | None = None
        # The messageId of the reply streaming now (its last chunk's), stored with the reply when it is appended
        # so a replay after session/load uses the id the client keys the message by.
        self._shown_id: str | None = None
        # wire id → what its command left if a cancel cut it short (filled by the workspace), until it finishes.
        self._cut: dict[str, CutShort] = {}
        # Tokens of task results sized but not yet in the conversation (calls run side by side; see run_tool).
        self._fitted = 0

    def new_turn(self) -> None:
        self.turn_error = None

    # --- requests -----------------------------------------------------------------------------------------

    def provider(self) -> pb.Provider:
        model_id = self._s.model_id
        if self._provider is None or self._provider_model != model_id:
            self._provider = self._rt.provider_for(model_id)
            self._provider_model = model_id
        return self._provider

    def build_request(self) -> pb.ModelRequest:
        s = self._s
        if s.conversation.frozen_prompt is None:  # the first request fixes it for the session and its reloads
            system = s.base_prompt()  # the instructions are read anew at each turn and load (agent/instructions.py)
            s.conversation.freeze(system, _setting(s))
            s.persist(
                en.PromptEntry(mode_id=s.mode, additional_directories=list(s.additional_directories), system=system)
            )
        info = self._rt.model_info(s.model_id)
        _, _, name = s.model_id.partition("/")
        self.serving = s.model_id
        return pb.ModelRequest(
            model=info.model if info else name,
            system=s.system_prompt(),
            messages=list(s.conversation.messages),
            tools=s.tools.tool_specs(),
            max_output=info.max_output if info else None,
            thought_level=s.thought_level,
        )

    async def before_request(self) -> None:
        await self.check_budget()  # first: compaction would send a request too
        mcp = self._s.tools.mcp
        if mcp is not None:
            await mcp.before_first_request()  # the first request waits (bounded) for servers still starting
        await self.tell_setting()  # a mode changed while the turn ran: the model hears of it before its next reply
        note = self._s.instructions.take_note(self._s.conversation.messages)  # AGENTS.md of folders tools worked in
        if note is not None:
            await self.append(note)
        await self._s.compactor.before_request()

    async def check_budget(self) -> None:
        """End the turn, saying why, when the session's cost reached its budget: no request reaches the provider."""
        why = self._s.ctx.budget_stop()
        if why is None:
            return
        self.turn_error = ("budget", why)
        await self._s.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n⚠ Stopped: {why}\n\n")))
        raise TurnEnd("end_turn")

    async def tell_setting(self) -> bool:
        """Append a reminder when the mode or directories changed since the model was last told; True if one
        was appended. Only where the conversation is whole (no tool call waiting for its result)."""
        s = self._s
        now, told = _setting(s), s.conversation.told
        if s.conversation.frozen_prompt is None or told is None or told == now:
            return False
        await self.append(UserMessage(content=[TextPart(setting_reminder(told, now))], origin="ama"))
        s.conversation.tell(now)
        s.persist(en.PromptEntry(mode_id=now.mode, additional_directories=list(now.additional_directories)))
        return True

    # --- the conversation and what the person sees of it ---------------------------------------------------

    async def append(self, message: Message) -> None:
        s = self._s
        if isinstance(message, ToolResultMessage):
            self._fitted = 0  # the results of side-by-side calls now count as messages
        s.conversation.append(message)
        shown_id = None
        if isinstance(message, AssistantMessage):
            shown_id, self._shown_id = self._shown_id, None  # a reply that showed nothing has no id to keep
        s.persist(en.MessageEntry(message=message, message_id=shown_id))
        # A reply of the model that was current when its request was built, unless the person switched since.
        measured = not isinstance(message, AssistantMessage) or self.serving in (None, s.model_id)
        s.ctx.append(message, measured)

    async def emit(self, event: ev.AgentEvent) -> None:
        # The hot path first: a text delta is all most events of a turn are (thousands a reply).
        if type(event) is ev.TextChunk:
            self._shown_id = event.message_id
            await self._s.outbox.text(w.AgentMessageChunk, event.text, event.message_id)
            return
        if type(event) is ev.ThoughtChunk:
            self._shown_id = event.message_id
            await self._s.outbox.text(w.AgentThoughtChunk, event.text, event.message_id)
            return
        shown = self.calls.shown(event)
        if isinstance(event, ev.ToolCallFinished):
            await self._finished(event, shown)
        elif shown:
            await self._show(event)

    async def _finished(self, event: ev.ToolCallFinished, shown: bool) -> None:
        """A call's end: its record kept, its final update (with what a cancel left of its command), its plan."""
        cut = self._cut.pop(event.wire_id, None)
        if cut is not None and (cut.output or cut.terminal_id is not None):
            try:
                await self._finish_cut_short(event, cut, shown)
            finally:
                if cut.release is not None:  # only now: the final update above still shows the terminal
                    await cut.release()
            return
        if (record := self.calls.settled(event)) is not None:
            self._s.persist(record)
        if shown:
            await self._show(event)
        if event.result.plan is not None:
            plan = list(event.result.plan)
            self._s.persist(en.PlanEntry(entries=plan))
            await self._s.send(plan_update(plan))

    async def _show(self, event: ev.AgentEvent) -> None:
        update = to_update(event)
        if update is not None:
            await self._s.send(update)

    async def _finish_cut_short(self, event: ev.ToolCallFinished, cut: CutShort, shown: bool) -> None:
        """The final update of a command cancelled while it ran: its terminal or output so far, and the line
        saying it was cancelled; the record keeps the output, so a replay shows what the person saw."""
        kept, update = cut_short_update(event, cut.output, cut.terminal_id)
        if (record := self.calls.settled(msgspec.structs.replace(event, shown=kept))) is not None:
            self._s.persist(record)
        if shown:
            await self._s.send(update)

    def wire_id(self, provider_id: str) -> str:
        return self.calls.wire_id(provider_id)

    # --- tools --------------------------------------------------------------------------------------------

    def describe_tool(self, name: str, args: dict[str, object]) -> ev.ToolCallRequested | None:
        return self._s.tools.describe(name, args, self._s.cwd)

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, object]) -> Refusal | None:
        return await self._s.approver.approve(call, args)

    def runs_concurrently(self, name: str) -> bool:
        """Task calls of one response run side by side (agent/loop.py `ConcurrentCalls`, session/tasks/runner.py)."""
        return name == TASK

    async def run_tool(self, name: str, args: dict[str, object], wire_id: str) -> ToolResult:
        tool = self._s.tools.tool(name)
        if tool is None:
            raise ToolError(f"There is no tool named {name!r}.")
        if name == TASK:  # a task, carried out by the session's task runner (the tool is a declaration)
            result = await hooked(self._s.hooks, name, args, lambda: self._s.tasks.run(args, wire_id))
            # Sized when the task is done: its siblings' results that finished first count (they enter the
            # conversation only after the last of them, agent/loop.py), so together they keep to the share.
            result = self._room().fit(result)
            self._fitted += self._s.ctx.meter.estimator.text(result.text)
            return result
        self._touched(tool, args)
        space = self._room()
        sink = self._cut[wire_id] = CutShort()  # stays empty unless a cancel cuts a command short
        judge = judge_redirects(tool, wire_id, self.approve, self.emit)
        return await run_tool(tool, args, self._s.tool_ctx, space, wire_id, sink, judge, self._s.hooks)

    def _touched(self, tool: Tool, args: dict[str, object]) -> None:
        """The instruction files of the folders the call works in are announced before the next request."""
        try:
            paths = [loc.path for loc in tool.locations(args, self._s.cwd)]
        except Exception:  # bad arguments: the tool says so when it runs
            return
        self._s.instructions.touched(paths, self._s.conversation.messages)

    def _room(self) -> Room:
        """What the next tool result may take of the session's context (session/turn/tool_runner.py)."""
        ctx = self._s.ctx
        return room(ctx.meter, ctx.figures(), self._s.conversation.messages, self._fitted)

    # --- billing and failures -----------------------------------------------------------------------------

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        # Every completed response was billed by the provider, reported or not: one without usage counts as an
        # unreported request and makes the cost unknown (U17), instead of passing for a free one.
        served_by = self.serving or self._s.model_id  # priced as the model that served it (a switch may be newer)
        self._s.ctx.bill(served_by, message.usage, enters_context=True)
        self._persist_usage(served_by, message.usage)
        await self._s.report_usage(message_end=True)  # E1

    async def request_lost(self) -> None:
        served_by = self.serving or self._s.model_id
        self._s.ctx.bill(served_by, None, enters_context=True, interrupted=True)
        self._persist_usage(served_by, None)  # a load must know the cost became unknown

    def _persist_usage(self, model_id: str, usage: Usage | None) -> None:
        ctx = self._s.ctx
        self._s.persist(
            en.UsageEntry(
                model_id=model_id,
                usage=usage or Usage(),  # {}: the provider said nothing; the states below still change
                cost=ctx.last_cost,
                purpose="turn",
                meter=ctx.meter_state(),
                billing=ctx.billing_state(),
            )
        )

    async def turn_failed(self, text: str) -> None:
        self.turn_error = ("internal", text)
        await self._s.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n⚠ {text}\n")))

    async def provider_failed(self, failure: pb.Failure) -> None:
        self.turn_error = (failure.kind, failure.message)
        text = failure.message
        if failure.kind == "auth":
            text = f"**The model provider refused the credentials.** {failure.message}"
        await self._s.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n⚠ {text}\n")))


def _setting(s: HostedSession) -> Setting:
    return Setting(s.mode, tuple(s.additional_directories))
