"""One task of a session, as `_ama/session_stats` `tasks`, `/tasks` and the journal know it (session/store/
task_journal.py): what carried it out, its state, and its figures — a task of ama's own loop measures and bills
itself (`LoopTaskRecord`), an external agent's has only what the agent reported (`ExternalTaskRecord`). Either way
a figure not known is left out of `figures`, never 0. The record also holds what the person sees of the task
without `clientCapabilities.subagents` (session/tasks/call_view.py): its tool calls as lines, its latest text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from ama_acp.context.billing import Billing
from ama_acp.context.meter import ContextMeter


@dataclass(kw_only=True)
class TaskRecord(ABC):
    id: str  # the task call's toolCallId
    agent: str
    description: str
    model: str
    status: str = "waiting"  # waiting → running → completed | failed | cancelled
    error: str | None = None
    lines: list[str] = field(default_factory=list)  # its tool calls, as the person sees them
    text: str = ""  # its latest reply's text
    # `<parent id>.task-<n>` (session/tasks/stored.py `TaskSessionId`): its session at an editor with
    # `subagents`, and its id in the journal, where session/load finds it.
    session_id: str | None = None
    calls: dict[str, int] = field(default_factory=dict, init=False, repr=False)  # a tool call's id → its line

    external: ClassVar[bool] = False

    @abstractmethod
    def counts(self) -> dict[str, object]:
        """`requests`, then `tokens`, `contextTokens`, `contextWindow`, `contextPercent` when known."""

    @abstractmethod
    def cost(self) -> float | None:
        """Its cost in USD; None when unknown."""

    def figures(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "agent": self.agent}
        if self.external:
            out["external"] = True
        out.update(description=self.description, model=self.model, status=self.status)
        out.update(self.counts())
        cost = self.cost()
        if cost is not None:
            out["cost"] = {"amount": round(cost, 6), "currency": "USD"}
        if self.error is not None:
            out["error"] = self.error
        if self.session_id is not None:
            out["sessionId"] = self.session_id
        return out

    def call_started(self, call_id: str, title: str) -> None:
        """One of its tool calls starts: a line `→ title`. The reply before the call is shown with it: the next
        reply starts afresh."""
        self.text = ""
        self.calls[call_id] = len(self.lines)
        self.lines.append(f"→ {_line(title)}")

    def call_ended(self, call_id: str, ok: bool) -> None:
        at = self.calls.get(call_id)
        if at is not None:
            self.lines[at] = ("✓" if ok else "✗") + self.lines[at][1:]


@dataclass(kw_only=True)
class LoopTaskRecord(TaskRecord):
    """A task carried out by ama's own loop: its own meter and its own billing."""

    meter: ContextMeter
    billing: Billing = field(default_factory=Billing)

    def counts(self) -> dict[str, object]:
        f = self.meter.figures()
        t = self.billing.totals()
        out: dict[str, object] = {"requests": t.requests, "tokens": t.total, "contextTokens": f.used}
        if f.window is not None:
            out["contextWindow"] = f.window
        if f.percent is not None:
            out["contextPercent"] = f.percent
        return out

    def cost(self) -> float | None:
        return self.billing.cost


@dataclass(kw_only=True)
class ExternalTaskRecord(TaskRecord):
    """A task handed to an external agent: its figures are the ones it reported, nothing else."""

    external: ClassVar[bool] = True

    prompts: int = 0  # the prompts ama sent it (its own model requests are its business)
    tokens: int | None = None  # its turn's `usage.totalTokens`, when its prompt response carried one
    context_used: int | None = None
    context_size: int | None = None
    cost_usd: float | None = None  # its latest cumulative cost in USD; None: unknown

    def counts(self) -> dict[str, object]:
        out: dict[str, object] = {"requests": self.prompts}
        if self.tokens is not None:
            out["tokens"] = self.tokens
        if self.context_used is not None:
            out["contextTokens"] = self.context_used
        if self.context_size:
            out["contextWindow"] = self.context_size
            if self.context_used is not None:
                # Capped as the meter caps its own (U12): a child's `used` past its `size` is a full window.
                out["contextPercent"] = min(100.0, round(100 * self.context_used / self.context_size, 1))
        return out

    def cost(self) -> float | None:
        return self.cost_usd


def _line(title: str) -> str:
    line = " ".join(title.split())
    return line if len(line) <= 120 else line[:119] + "…"
