"""One child of a `task` call: the agent loop's host (agent/loop.py `TurnHost`) for a conversation of its own.

The child has a fresh context (its task, the project instructions, the tools its agent allows), its own meter
and its own billing; it works through its parent session's workspace and approval, so the mode and the
person's answers apply to its calls exactly as to the parent's. Nothing of its conversation enters the
parent's: the parent sees the task call and its result. What the person sees of it goes out as the task call's
content (its tool calls as lines, its latest text) with its figures in the call's `_meta.ama.task` (`ChildView`,
for a client without `clientCapabilities.subagents`), or as a session of its own announced with
`subagent_update` (session/tasks/subagent_view.py `SubagentView`, for a client with it). The host does not know which:
it tells its view (`ShowsChild`) what happens and asks it for the approver of the child's calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal
from ama_acp.config import Price
from ama_acp.context.billing import Billing
from ama_acp.context.meter import ContextMeter
from ama_acp.context.request_size import tools_json
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, Usage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.providers import base as pb
from ama_acp.session.store import entries as en
from ama_acp.session.turn.host import Approves, HostRuntime
from ama_acp.session.turn.tool_runner import room, run_tool
from ama_acp.session.turn.toolset import SessionTools, describe_call
from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.store.session_store import SessionStore

LINES_SHOWN = 20  # the child's latest tool calls shown in the task call
TEXT_SHOWN = 1500  # characters of its latest reply shown there


class ChildRuntime(HostRuntime, Protocol):
    """What a child needs of the runtime: the host's, and the prices (session/manager.py `SessionManager`)."""

    def price(self, model_id: str, usage: Usage | None) -> Price | None: ...

    def context_window(self, model_id: str) -> int | None: ...

    @property
    def client_caps(self) -> w.ClientCapabilities: ...

    @property
    def store(self) -> SessionStore:
        """Where the session's children are kept (session/store/task_journal.py, beside the session files)."""
        ...

    async def send_update(self, session_id: str, update: w.SessionUpdate) -> None: ...


class ParentBilling(Protocol):
    """The parent session's accounting (session/accounting/session_context.py `SessionContext`): a child's requests are billed
    there too, as requests that do not enter the parent's context, so the session's cost is its own plus every
    child's (unknown when any part is)."""

    @property
    def billing(self) -> Billing: ...

    def meter_state(self) -> dict[str, object]: ...

    def billing_state(self) -> dict[str, object]: ...


class ChildParent(Protocol):
    """What a child uses of its parent session (session/live.py `Session`)."""

    @property
    def tools(self) -> SessionTools: ...

    @property
    def tool_ctx(self) -> ToolContext: ...

    @property
    def approver(self) -> Approves: ...

    @property
    def ctx(self) -> ParentBilling: ...

    @property
    def thought_level(self) -> str: ...

    def persist(self, entry: en.Entry) -> None: ...

    async def send(self, update: w.SessionUpdate) -> None: ...


@dataclass
class TaskRecord:
    """One task of a session, for `_ama/session_stats` `tasks` and `/tasks`."""

    id: str  # the task call's toolCallId
    agent: str
    description: str
    model: str
    meter: ContextMeter
    billing: Billing = field(default_factory=Billing)
    status: str = "waiting"  # waiting → running → completed | failed | cancelled
    error: str | None = None
    lines: list[str] = field(default_factory=list)  # its tool calls, as the person sees them
    text: str = ""  # its latest reply's text
    session_id: str | None = None  # the child's own session id, when the editor sees it as one (subagents.py)

    def figures(self) -> dict[str, object]:
        """The child's own meter and cost; unknown figures left out (never 0)."""
        f = self.meter.figures()
        t = self.billing.totals()
        out: dict[str, object] = {
            "id": self.id,
            "agent": self.agent,
            "description": self.description,
            "model": self.model,
            "status": self.status,
            "requests": t.requests,
            "tokens": t.total,
            "contextTokens": f.used,
        }
        if f.window is not None:
            out["contextWindow"] = f.window
        if f.percent is not None:
            out["contextPercent"] = f.percent
        if self.billing.cost is not None:
            out["cost"] = {"amount": round(self.billing.cost, 6), "currency": "USD"}
        if self.error is not None:
            out["error"] = self.error
        if self.session_id is not None:
            out["sessionId"] = self.session_id
        return out


class ShowsChild(Protocol):
    """What the person sees of one child, told by its host (`ChildHost`) and its runner (session/tasks/runner.py)."""

    @property
    def approver(self) -> Approves:
        """Who approves the child's calls (the parent's approval, asked in the child's name or the parent's)."""
        ...

    async def started(self) -> None:
        """The child got its slot and starts (`record.status` is "running")."""

    def live(self) -> AbstractAsyncContextManager[None]:
        """The child's turn runs inside this (a view may merge streamed text meanwhile)."""
        ...

    async def event(self, event: ev.AgentEvent) -> None:
        """One event of the child's loop, after the host recorded it in the task record."""

    async def replied(self) -> None:
        """A reply of the child was billed and measured."""

    async def ended(self, stop: str) -> None:
        """The child is done: `record.status` is final (completed, failed, cancelled); `stop` its turn's stop
        reason. Called shielded, also on cancel."""


class ChildView:
    """What the person sees of a running child without `clientCapabilities.subagents`: the task call's content
    (its tool calls as lines, its latest text) and its figures in the call's `_meta.ama.task`."""

    def __init__(self, parent: ChildParent, record: TaskRecord) -> None:
        self._parent = parent
        self._record = record

    @property
    def approver(self) -> Approves:
        return self._parent.approver  # the request names the parent's session and `<task call id>.<n>`

    async def started(self) -> None:
        await self.show()

    def live(self) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    async def event(self, event: ev.AgentEvent) -> None:
        if isinstance(event, ev.ToolCallRequested | ev.ToolCallFinished):
            await self.show()

    async def replied(self) -> None:
        await self.show()

    async def ended(self, stop: str) -> None:
        return None  # the task call's own final update (the answer, or why there is none) says it

    async def show(self) -> None:
        r = self._record
        parts = r.lines[-LINES_SHOWN:]
        if r.text:
            text = r.text if len(r.text) <= TEXT_SHOWN else "…" + r.text[-TEXT_SHOWN:]
            parts = [*parts, "", text] if parts else [text]
        content: list[w.ToolCallContent] | None = None
        if parts:
            content = [w.Content(content=w.TextContent(text="\n".join(parts)))]
        f = r.figures()
        keys = ("agent", "model", "status", "tokens", "contextTokens", "contextWindow", "contextPercent", "cost")
        figures = {k: f[k] for k in keys if k in f}
        await self._parent.send(w.ToolCallUpdate(tool_call_id=r.id, content=content, meta={"ama": {"task": figures}}))


class ChildHost:
    """agent/loop.py `TurnHost` for one child conversation."""

    def __init__(
        self,
        runtime: ChildRuntime,
        parent: ChildParent,
        record: TaskRecord,
        system: str,
        tool_names: Sequence[str] | None,
        view: ShowsChild | None = None,
    ) -> None:
        self._rt = runtime
        self._p = parent
        self.record = record
        self._system = system
        self._names = None if tool_names is None else frozenset(tool_names)
        self.max_turn_requests = runtime.config.max_turn_requests
        self.messages: list[Message] = []
        self.failure: str | None = None  # why the child's turn stopped short, if it did
        self.view: ShowsChild = view if view is not None else ChildView(parent, record)
        self._provider: pb.Provider | None = None
        self._calls = 0
        self._titles: dict[str, int] = {}  # child wire id → its line

    # --- requests -----------------------------------------------------------------------------------------

    def provider(self) -> pb.Provider:
        if self._provider is None:  # the child's model is fixed when it starts: a switch of the parent's waits
            self._provider = self._rt.provider_for(self.record.model)
        return self._provider

    def specs(self) -> list[ToolSpec]:
        """The tools the child may use: its agent's, never `task` (no recursion)."""
        return [
            s for s in self._p.tools.tool_specs() if s.name != "task" and (self._names is None or s.name in self._names)
        ]

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
        return None  # a child is not compacted: its task is meant to fit; its results are cut to its window

    # --- its conversation ---------------------------------------------------------------------------------

    async def append(self, message: Message) -> None:
        self.messages.append(message)
        self.record.meter.append(message)

    async def emit(self, event: ev.AgentEvent) -> None:
        r = self.record
        if isinstance(event, ev.TextChunk):
            r.text += event.text
        elif isinstance(event, ev.ToolCallRequested):
            r.text = ""  # the reply before a call is shown with it; the next reply starts afresh
            self._titles[event.wire_id] = len(r.lines)
            r.lines.append(f"→ {_line(event.title)}")
        elif isinstance(event, ev.ToolCallFinished):
            at = self._titles.pop(event.wire_id, None)
            if at is not None:
                mark = "✗" if event.result.is_error else "✓"
                r.lines[at] = mark + r.lines[at][1:]
        await self.view.event(event)

    def wire_id(self, provider_id: str) -> str:
        # Unique across the session: the task call's id and the child's count (shown in permission requests).
        self._calls += 1
        return f"{self.record.id}.{self._calls}"

    # --- tools --------------------------------------------------------------------------------------------

    def _allowed(self, name: str) -> bool:
        return name != "task" and (self._names is None or name in self._names)

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
        # The child's own window decides how much of a result it can take; the editor does not know the child's
        # call ids: a terminal is not embedded in a call it never saw.
        meter = self.record.meter
        return await run_tool(tool, args, self._p.tool_ctx, room(meter, meter.figures(), self.messages), None)

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


def _line(title: str) -> str:
    line = " ".join(title.split())
    return line if len(line) <= 120 else line[:119] + "…"
