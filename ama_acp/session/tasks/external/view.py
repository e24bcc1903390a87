"""What the person sees of an external agent's task (session/tasks/external/agent.py).

Without `clientCapabilities.subagents`: the task call's content and `_meta` (session/tasks/call_view.py
`CallView`, as for a task of ama's own loop). With it: a session of its own like a task of ama's own loop
(session/tasks/subagent_view.py), `ExternalSubagentView` — announced with `subagent_update` on the parent before
any update under its id, the task as its user message, then the agent's own updates re-built from typed values
(session/tasks/external/updates.py) under the task's session id: a `tool_call_update` only for a call announced
there, its `usage_update` only when it changed; at the end the final state (`idle` with the stop reason, `error`
with the reason, or `cancelled`). What the agent asks of the editor (a permission, a file read or write) names
the task's session and a tool call announced there: the agent's own call when it announced one, else a call ama
announces for the request and settles when it is answered.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio
import msgspec

from ama_acp.agent import events as ev
from ama_acp.session.tasks.record import ExternalTaskRecord
from ama_acp.session.tasks.subagent_view import FINAL_SEND_S, AnnouncedSubagent, SubagentParent
from ama_acp.session.tasks.worker import ShowsTask, TaskRuntime
from ama_acp.session.turn.host import Approves
from ama_acp.wire import subagents as sw
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

# What may wait to go out to the editor, in updates and in bytes as sent; past either a flood is dropped (its
# answer and figures still count: the record reads them), and the person is told once (session/tasks/external/agent.py).
MAX_QUEUED = 10_000
MAX_QUEUED_BYTES = 16 * 1024 * 1024
MAX_CALLS = 1000  # tool call ids kept for one task
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


class SubagentSession(Protocol):
    """The task's session at the editor, where the agent's requests are asked (session/tasks/external/
    requests.py)."""

    @property
    def session_id(self) -> str: ...

    @property
    def approver(self) -> Approves: ...

    async def call_for(self, call: ev.ToolCallRequested, own: str | None = None) -> str:
        """The tool call id the editor is asked about: `own` (the agent's) when announced, else `call` announced."""
        ...

    async def settle(self, call_id: str, ok: bool) -> None:
        """The end of a call ama announced for a request (`call_for`); nothing for the agent's own."""
        ...


class ShowsExternal(ShowsTask, Protocol):
    """What the person sees of an external agent's task, told by its worker."""

    @property
    def subagent(self) -> SubagentSession | None:
        """The task's session at the editor; None: the agent's requests name the parent's session."""
        ...

    async def show(self) -> None:
        """Send what changed: the updates taken since, the figures."""

    def take(self, update: w.SessionUpdate) -> bool:
        """One decoded update of the agent (called from the connection's reader: no await). False: dropped
        because too much already waits to go out (a flood); repeated or unannounced ones are not that."""


class ExternalSubagentView(AnnouncedSubagent[ExternalTaskRecord]):
    """`ShowsExternal` with `subagents`: the task's session at the editor."""

    FAILED = "The external agent failed."

    def __init__(
        self, rt: TaskRuntime, parent: SubagentParent, record: ExternalTaskRecord, prompt: str, session_id: str
    ) -> None:
        super().__init__(rt, parent, record, prompt, session_id)  # asks in the task's name, the parent's memory
        self._queue: list[tuple[w.SessionUpdate, int]] = []  # each with its size as sent
        self._queued_bytes = 0
        self._ids: set[str] = set()  # the agent's tool calls taken (queued or sent)
        self._sent: set[str] = set()  # the tool calls the editor has seen in the task's session
        self._ours: set[str] = set()  # the calls ama announced for a request
        self._usage: w.UsageUpdate | None = None  # the last one forwarded (deduplication)
        self._dropped = 0
        self._lock = anyio.Lock()

    def take(self, update: w.SessionUpdate) -> bool:
        """One decoded update of the agent, queued for the pump (called from the connection's reader)."""
        if isinstance(update, w.ToolCall):
            if update.tool_call_id in self._ids or len(self._ids) >= MAX_CALLS:
                log.info("an external agent's tool_call was repeated or past the bound; not forwarded")
                return True
        elif isinstance(update, w.ToolCallUpdate):
            if update.tool_call_id not in self._ids:
                log.info("an external agent's tool_call_update names a call it never announced; not forwarded")
                return True
        elif isinstance(update, w.UsageUpdate):
            if update == self._usage:
                return True  # the same figures again: the editor has them
        size = len(msgspec.json.encode(update))
        if len(self._queue) >= MAX_QUEUED or self._queued_bytes + size > MAX_QUEUED_BYTES:
            self._dropped += 1
            return False
        if isinstance(update, w.ToolCall):  # taken only once queued: its updates follow it or are dropped
            self._ids.add(update.tool_call_id)
        elif isinstance(update, w.UsageUpdate):
            self._usage = update
        self._queue.append((update, size))
        self._queued_bytes += size
        return True

    async def _flush(self) -> None:
        async with self._lock:
            while self._queue:
                update, size = self._queue.pop(0)
                self._queued_bytes -= size
                await self._out(update)
                if isinstance(update, w.ToolCall):
                    self._sent.add(update.tool_call_id)
        if self._dropped:
            log.warning("%d updates of %s were dropped (a flood)", self._dropped, self.session_id)
            self._dropped = 0

    @property
    def subagent(self) -> SubagentSession:
        return self

    async def show(self) -> None:
        if self._announced:
            await self._flush()
            await self._figures()

    async def call_for(self, call: ev.ToolCallRequested, own: str | None = None) -> str:
        await self._flush()
        if own is not None and own in self._sent:
            return own
        self._ours.add(call.wire_id)
        async with self._lock:
            await self._out(
                w.ToolCall(
                    tool_call_id=call.wire_id,
                    title=call.title,
                    kind=call.kind,
                    status="pending",
                    locations=[w.ToolCallLocation(path=loc.path) for loc in call.locations] or None,
                ),
            )
        return call.wire_id

    async def settle(self, call_id: str, ok: bool) -> None:
        if call_id not in self._ours:
            return
        self._ours.discard(call_id)
        status: w.ToolCallStatus = "completed" if ok else "failed"
        async with self._lock:
            await self._out(w.ToolCallUpdate(tool_call_id=call_id, status=status))

    async def _out(self, update: w.SessionUpdate) -> None:
        """One update under the task's session id, whole: the pump is cancelled when the agent's turn ends, and a cancel
        in the middle of a write would lose an update already taken from the queue (its tool call, its end)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(FINAL_SEND_S):
            await self._rt.send_update(self.session_id, update)

    def _completed(self, stop: str) -> sw.SubagentState:
        return sw.SubagentState(state="idle", stop_reason=stop if stop in STOP_REASONS else "end_turn")

    async def _last_words(self) -> None:
        await self._flush()  # what it said last, before its end
        for call_id in sorted(self._ours):  # asked about when it was cancelled: nothing of it ran
            await self.settle(call_id, False)
        await self._figures()
