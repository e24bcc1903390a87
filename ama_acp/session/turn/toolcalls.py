"""The tool calls of one session as the person sees them: their wire ids (unique across the session's history,
session/turn/wire_ids.py) and, for each call that settles, the record a replay shows (`ToolCallEntry`).

A call of a tool shown as a plan (`todo_write`) is hidden: the person sees the plan it produces, not a tool
call as well; the model still gets its result.
"""

from __future__ import annotations

from ama_acp.agent import events as ev
from ama_acp.session.store import entries as en
from ama_acp.session.turn.wire_ids import WireIds

# Tools whose calls the person sees only as the plan they produce (the model still gets the tool result).
SHOWN_AS_PLAN = frozenset({"todo_write"})


class ToolCallRecords:
    def __init__(self, wire_ids: WireIds | None = None) -> None:
        # Every toolCallId the session has used (restored on load).
        self._wire_ids = wire_ids if wire_ids is not None else WireIds()
        self._provider_ids: dict[str, str] = {}  # wire id → provider id
        self._calls: dict[str, ev.ToolCallRequested] = {}  # wire id → the call as requested, until it settles
        self._hidden: set[str] = set()  # wire ids of calls shown as a plan

    def wire_id(self, provider_id: str) -> str:
        """Unique across the session's history: a provider id used before gets the first free `#n`
        (docs/tools.md "Tool call ids")."""
        wid = self._wire_ids.allocate(provider_id)
        self._provider_ids[wid] = provider_id
        return wid

    def shown(self, event: ev.AgentEvent) -> bool:
        """Whether the person sees this event of a call (every other event: yes). Records a requested call."""
        if isinstance(event, ev.ToolCallRequested):
            if event.name in SHOWN_AS_PLAN:
                self._hidden.add(event.wire_id)
            else:
                self._calls[event.wire_id] = event
        if isinstance(event, ev.ToolCallRequested | ev.ToolCallStarted | ev.ToolCallFinished):
            return event.wire_id not in self._hidden
        return True

    def settled(self, event: ev.ToolCallFinished) -> en.ToolCallEntry | None:
        """The replay record of a call that ended (None for a hidden call, or one never requested)."""
        if event.wire_id in self._hidden:
            self._hidden.discard(event.wire_id)
            self._provider_ids.pop(event.wire_id, None)
            return None
        call = self._calls.pop(event.wire_id, None)
        if call is None:
            return None
        result, shown = event.result, event.shown
        return en.ToolCallEntry(
            wire_id=event.wire_id,
            provider_id=self._provider_ids.pop(event.wire_id, event.wire_id),
            name=call.name,
            title=call.title,
            kind=call.kind,
            status="failed" if result.is_error else "completed",
            locations=list(result.locations or call.locations),
            raw_input=call.raw_input if isinstance(call.raw_input, dict) else None,
            content_text=en.clip_replay_text(result.text if shown is None else shown),
            diff_paths=[d.path for d in result.diffs],
        )
