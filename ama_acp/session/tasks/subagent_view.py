"""A task of ama's own loop shown as a session of its own, for an editor that advertises
`clientCapabilities.subagents` (UNSTABLE in the pinned schema: `SubagentUpdate`, `StateUpdate`); and what that
view shares with an external agent's (session/tasks/external/view.py): `AnnouncedSubagent`.

The order is the schema's: the task's session is announced with a `subagent_update` on the PARENT session (its
title, its description, state `running`, its cwd) before any update carrying its id; then its own updates go out
under its id — the task as its user message, its text, its thoughts, its tool calls, its plan, its
`usage_update`s (its own meter: deduplicated, none while its window is unknown, rules D1/D3); and a last
`subagent_update` ends it: `idle` with the stop reason (`end_turn`, …), `error` with the reason, or `cancelled`.
The task call on the parent still ends with the task's answer, and carries its figures and session id in
`_meta.ama.task`. The task's permission requests name its session id and its own tool call id, which the editor
has seen as a `tool_call` of that session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Generic, Protocol, TypeVar

import anyio
import msgspec

from ama_acp.agent import events as ev
from ama_acp.context.reporter import UsageReporter
from ama_acp.rpc.errors import INTERNAL_ERROR
from ama_acp.session.accounting.session_context import wire_usage
from ama_acp.session.editor.approval import ApprovalSession, Approver
from ama_acp.session.editor.client import ClientRequests
from ama_acp.session.editor.coalesce import ChunkCoalescer
from ama_acp.session.editor.updates import plan_update, to_update
from ama_acp.session.facets import Rooted
from ama_acp.session.store.journal import Journal
from ama_acp.session.tasks.record import LoopTaskRecord, TaskRecord
from ama_acp.session.tasks.worker import TaskParent, TaskRuntime
from ama_acp.session.turn.toolcalls import SHOWN_AS_PLAN
from ama_acp.tools.base import Tool
from ama_acp.tools.context import ToolContext
from ama_acp.wire import subagents as sw
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

# The JSON-RPC code of a failed task's `error` (internal error): the reason is in its message.
FAILED_CODE = INTERNAL_ERROR
FIGURES = (
    "sessionId",
    "agent",
    "model",
    "status",
    "tokens",
    "contextTokens",
    "contextWindow",
    "contextPercent",
    "cost",
)
FINAL_SEND_S = 2.0  # how long the last state may take to go out on a cancel (the connection may be closing)


class SubagentParent(TaskParent, ApprovalSession, Rooted, Protocol):
    """The parent session as the subagent view uses it (session/live.py `Session`)."""

    @property
    def approver(self) -> Approver: ...

    @property
    def journal(self) -> Journal:
        """The session file: a session that runs unsaved keeps no tasks either (session/store/task_journal.py)."""
        ...


class SubagentApproval:
    """The parent's approval session under the task's session id: the same mode, cancel and editor; only the
    request's `sessionId` differs (session/editor/approval.py reads `id` for it)."""

    def __init__(self, parent: SubagentParent, session_id: str) -> None:
        self._p = parent
        self._id = session_id

    @property
    def id(self) -> str:
        return self._id

    @property
    def mode(self) -> str:
        return self._p.mode

    @property
    def cancelled(self) -> bool:
        return self._p.cancelled

    @property
    def tool_ctx(self) -> ToolContext:
        return self._p.tool_ctx

    @property
    def rt(self) -> ClientRequests:
        return self._p.rt

    def tool(self, name: str) -> Tool | None:
        return self._p.tool(name)

    def cancel(self) -> None:
        self._p.cancel()

    def graceful(self, timeout: float, grace: float) -> AbstractContextManager[anyio.CancelScope]:
        return self._p.graceful(timeout, grace)


def subagent_approver(parent: SubagentParent, session_id: str) -> Approver:
    """The parent's "always" answers cover the task's calls too: one memory, asked in the task's name."""
    approver = Approver(SubagentApproval(parent, session_id))
    approver.memory = parent.approver.memory
    approver.rules = parent.approver.rules
    return approver


def announcement(record: TaskRecord, prompt: str, session_id: str, cwd: str) -> sw.SubagentUpdate:
    """The `subagent_update` that announces a task on its parent: the task's title, the prompt's first line."""
    first = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    return sw.SubagentUpdate(
        session_id=session_id,
        title=record.description or f"Task ({record.agent})",
        description=first[:200] if first else msgspec.UNSET,
        state=sw.SubagentState(state="running"),
        cwd=cwd,
    )


def end_state(record: TaskRecord, failure: str, completed: Callable[[], sw.SubagentState]) -> sw.SubagentState:
    """A task's last state from its record: `completed()` when it answered, else cancelled, else the error (its
    reason, or `failure` when none was recorded)."""
    if record.status == "completed":
        return completed()
    if record.status == "cancelled":
        return sw.SubagentState(state="idle", stop_reason="cancelled")
    error = sw.SubagentError(code=FAILED_CODE, message=record.error or failure)
    return sw.SubagentState(state="idle", stop_reason="error", error=error)


def figures_update(record: TaskRecord) -> w.ToolCallUpdate:
    """The task's figures and session id on the parent's task call (`_meta.ama.task`; no lines)."""
    f = record.figures()
    return w.ToolCallUpdate(tool_call_id=record.id, meta={"ama": {"task": {k: f[k] for k in FIGURES if k in f}}})


Record = TypeVar("Record", bound=TaskRecord)


class AnnouncedSubagent(Generic[Record]):
    """What the views of ama's own and of an external agent's task as a session share: the approver that asks in
    the task's name; its start — announced on the parent (through the parent's outbox, after what the parent
    streamed, and awaited before any update of the task), its figures on the task call, then the task as its user
    message —; and its end, a last `subagent_update` on the parent after the view's last words (`_last_words`)."""

    FAILED = "The helper agent failed."  # the error's message when the record holds no reason

    def __init__(self, rt: TaskRuntime, parent: SubagentParent, record: Record, prompt: str, session_id: str) -> None:
        self._rt = rt
        self._p = parent
        self._record = record
        self._prompt = prompt
        self.session_id = session_id
        self._announced = False
        self._approver = subagent_approver(parent, session_id)

    @property
    def approver(self) -> Approver:
        return self._approver

    async def started(self) -> None:
        await self._p.send(announcement(self._record, self._prompt, self.session_id, self._p.cwd))
        self._announced = True
        await self._figures()
        await self._rt.send_update(self.session_id, w.UserMessageChunk(content=w.TextContent(text=self._prompt)))

    async def _figures(self) -> None:
        await self._p.send(figures_update(self._record))

    async def ended(self, stop: str) -> None:
        if not self._announced:  # cancelled while it waited for a slot: the editor never heard of it
            return
        state = end_state(self._record, self.FAILED, lambda: self._completed(stop))
        try:
            with anyio.move_on_after(FINAL_SEND_S):
                await self._last_words()
                await self._p.send(sw.SubagentUpdate(session_id=self.session_id, state=state))
        except Exception as exc:  # the connection is gone (a close, the end of input): the task's end still stands
            log.info("the last state of %s was not sent: %s", self.session_id, exc)

    def _completed(self, stop: str) -> sw.SubagentState:
        """The last state of a task that answered."""
        return sw.SubagentState(state="idle", stop_reason=stop)

    async def _last_words(self) -> None:
        """What goes out under the task's id before its end."""


class SubagentView(AnnouncedSubagent[LoopTaskRecord]):
    """session/tasks/host.py `ShowsLoop` with `subagents`."""

    def __init__(
        self, rt: TaskRuntime, parent: SubagentParent, record: LoopTaskRecord, prompt: str, session_id: str
    ) -> None:
        super().__init__(rt, parent, record, prompt, session_id)
        stream = rt.config.stream
        self._chunks = ChunkCoalescer(
            self._send, window=stream.coalesce_window_ms / 1000, max_chars=stream.coalesce_max_chars
        )
        self._reporter = UsageReporter(rt.config.tiers.caps)  # the task's own D1: its meter is not the parent's
        self._hidden: set[str] = set()  # calls shown as the plan (todo_write), as on the parent

    async def _send(self, update: w.SessionUpdate) -> None:
        await self._rt.send_update(self.session_id, update)

    def live(self) -> AbstractAsyncContextManager[None]:
        return self._chunks.turn()  # its text merged at the editor's pace, flushed when its turn ends

    async def event(self, event: ev.AgentEvent) -> None:
        if isinstance(event, ev.ToolCallRequested) and event.name in SHOWN_AS_PLAN:
            self._hidden.add(event.wire_id)
        hidden = isinstance(event, ev.ToolCallRequested | ev.ToolCallStarted | ev.ToolCallFinished) and (
            event.wire_id in self._hidden
        )
        update = None if hidden else to_update(event)
        if update is not None:
            await self._chunks.send(update)
        if isinstance(event, ev.ToolCallFinished):
            self._hidden.discard(event.wire_id)
            if event.result.plan is not None:
                await self._chunks.send(plan_update(list(event.result.plan)))

    async def replied(self) -> None:
        r = self._record
        payload = self._reporter.update(r.meter.figures(), r.billing.cost, bound=r.billing.lower_bound)
        if payload is not None:
            update = wire_usage(payload)
            with anyio.CancelScope(shield=True):  # counted as sent by the reporter (D1): a cancel must not cut it
                await self._chunks.send(update)
        await self._figures()

    def _completed(self, stop: str) -> sw.SubagentState:
        totals = self._record.billing.totals()
        usage = None
        if totals.requests and not totals.unreported:  # a figure not reported is unknown, not 0
            usage = msgspec.convert(totals.prompt_usage(), sw.SubagentUsage)
        return sw.SubagentState(state="idle", stop_reason=stop, usage=usage)
