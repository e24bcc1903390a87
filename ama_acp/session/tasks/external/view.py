"""What the person sees of an external agent's task (session/tasks/external/agent.py).

Without `clientCapabilities.subagents`: the task call's content and `_meta` (`CallView`, session/tasks/child.py
`ChildView`). With it: a child session like ama's own children (session/tasks/subagent_view.py), `ExternalSubagentView` —
announced with `subagent_update` on the parent before any update under its id, the task as its user message, then
the agent's own updates re-built from typed values (session/tasks/external/updates.py) under the child's id: a
`tool_call_update` only for a call announced there, its `usage_update` only when it changed; at the end the final
state (`idle` with the stop reason, `error` with the reason, or `cancelled`). What the agent asks of the editor
(a permission, a file read or write) names the child's session and a tool call announced there: the agent's own
call when it announced one, else a call ama announces for the request and settles when it is answered.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio

from ama_acp.agent import events as ev
from ama_acp.session.tasks.child import ChildRuntime, ChildView, TaskRecord
from ama_acp.session.tasks.subagent_view import (
    FINAL_SEND_S,
    AnnouncedChild,
    SubagentParent,
    end_state,
)
from ama_acp.session.turn.host import Approves
from ama_acp.wire import subagents as sw
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

MAX_QUEUED = 10_000  # updates waiting to go out; past this a flood is dropped (its figures still count)
MAX_CALLS = 1000  # tool call ids kept for one child
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


class ChildSession(Protocol):
    """The child session the agent's requests are asked in (session/tasks/external/requests.py)."""

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


class ShowsExternal(Protocol):
    child: ChildSession | None

    async def started(self) -> None: ...

    async def show(self) -> None: ...

    def take(self, update: w.SessionUpdate) -> None: ...

    async def ended(self, stop: str) -> None: ...


class CallView:
    """The task call's content and `_meta` (no subagents): the agent's updates are read into the record only."""

    child: ChildSession | None = None

    def __init__(self, view: ChildView) -> None:
        self._view = view

    async def started(self) -> None:
        await self._view.show()

    async def show(self) -> None:
        await self._view.show()

    def take(self, update: w.SessionUpdate) -> None:
        return None

    async def ended(self, stop: str) -> None:
        return None


class ExternalSubagentView(AnnouncedChild):
    def __init__(
        self, rt: ChildRuntime, parent: SubagentParent, record: TaskRecord, prompt: str, child_id: str
    ) -> None:
        super().__init__(rt, parent, record, prompt, child_id)  # asks in the child's name, the parent's memory
        self.child: ChildSession | None = self
        self._queue: list[w.SessionUpdate] = []
        self._ids: set[str] = set()  # the agent's tool calls taken (queued or sent)
        self._sent: set[str] = set()  # the tool calls the editor has seen in the child's session
        self._ours: set[str] = set()  # the calls ama announced for a request
        self._usage: w.UsageUpdate | None = None  # the last one forwarded (deduplication)
        self._dropped = 0
        self._lock = anyio.Lock()

    def take(self, update: w.SessionUpdate) -> None:
        """One decoded update of the agent, queued for the pump (called from the connection's reader)."""
        if isinstance(update, w.ToolCall):
            if update.tool_call_id in self._ids or len(self._ids) >= MAX_CALLS:
                log.info("an external agent's tool_call was repeated or past the bound; not forwarded")
                return
            self._ids.add(update.tool_call_id)
        elif isinstance(update, w.ToolCallUpdate):
            if update.tool_call_id not in self._ids:
                log.info("an external agent's tool_call_update names a call it never announced; not forwarded")
                return
        elif isinstance(update, w.UsageUpdate):
            if update == self._usage:
                return  # the same figures again: the editor has them
            self._usage = update
        if len(self._queue) >= MAX_QUEUED:
            self._dropped += 1
            return
        self._queue.append(update)

    async def _flush(self) -> None:
        async with self._lock:
            while self._queue:
                update = self._queue.pop(0)
                await self._out(update)
                if isinstance(update, w.ToolCall):
                    self._sent.add(update.tool_call_id)
        if self._dropped:
            log.warning("%d updates of %s were dropped (a flood)", self._dropped, self.session_id)
            self._dropped = 0

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
        """One update under the child's id, whole: the pump is cancelled when the agent's turn ends, and a cancel
        in the middle of a write would lose an update already taken from the queue (its tool call, its end)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(FINAL_SEND_S):
            await self._rt.send_update(self.session_id, update)

    async def ended(self, stop: str) -> None:
        if not self._announced:  # cancelled while it waited for a slot: the editor never heard of it
            return
        reason = stop if stop in STOP_REASONS else "end_turn"
        state = end_state(
            self._record, "The external agent failed.", lambda: sw.SubagentState(state="idle", stop_reason=reason)
        )
        try:
            with anyio.move_on_after(FINAL_SEND_S):
                await self._flush()  # what it said last, before its end
                for call_id in sorted(self._ours):  # asked about when it was cancelled: nothing of it ran
                    await self.settle(call_id, False)
                await self._figures()
                await self._p.send(sw.SubagentUpdate(session_id=self.session_id, state=state))
        except Exception as exc:  # the connection is gone (a close, the end of input): the child's end still stands
            log.info("the last state of %s was not sent: %s", self.session_id, exc)
