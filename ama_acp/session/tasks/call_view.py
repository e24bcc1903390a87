"""What the person sees of a task without `clientCapabilities.subagents`, whatever carries it out: the task
call's content — its tool calls as lines (`→` running, `✓` done, `✗` failed), its latest text — and its figures
in the call's `_meta.ama.task`, sent on each change. The call's own final update (the answer, or why there is
none) says how it ended.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, nullcontext

from ama_acp.agent import events as ev
from ama_acp.session.tasks.record import TaskRecord
from ama_acp.session.tasks.worker import TaskParent
from ama_acp.session.turn.host import Approves
from ama_acp.wire import types as w

LINES_SHOWN = 20  # the task's latest tool calls shown in the task call
TEXT_SHOWN = 1500  # characters of its latest reply shown there
FIGURES = ("agent", "model", "status", "tokens", "contextTokens", "contextWindow", "contextPercent", "cost")


class CallView:
    """session/tasks/host.py `ShowsLoop` and session/tasks/external/view.py `ShowsExternal`."""

    subagent: None = None  # no session of its own: an external agent's requests name the parent's session

    def __init__(self, parent: TaskParent, record: TaskRecord) -> None:
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

    def take(self, update: w.SessionUpdate) -> bool:
        return True  # an external agent's updates are read into the record only: nothing waits here

    async def ended(self, stop: str) -> None:
        return None

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
        figures = {k: f[k] for k in FIGURES if k in f}
        await self._parent.send(w.ToolCallUpdate(tool_call_id=r.id, content=content, meta={"ama": {"task": figures}}))
