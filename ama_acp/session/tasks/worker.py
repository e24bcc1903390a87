"""What carries out a task (`TaskWorker`), and what a task needs of its session and of the runtime.

A task — the work a `task` call hands over — is carried out by one of two workers: ama's own agent loop with a
fresh context (session/tasks/loop_worker.py `LoopWorker`) or an external ACP agent started as a process
(session/tasks/external/agent.py `ExternalWorker`). The runner (session/tasks/runner.py `TaskRunner`) runs
either the same way: its slot (`[tasks] max_parallel`), its timeout, the parent's cancel, its final state, the
view's start and end, its journal line. It asks the worker only what differs: the work itself, why it failed,
its answer, and what the journal keeps of its conversation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ama_acp.config import Price
from ama_acp.context.billing import Billing
from ama_acp.conversation.messages import Message, Usage
from ama_acp.session.tasks.record import TaskRecord
from ama_acp.session.turn.host import HostRuntime, SessionParts
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.store.session_store import SessionStore


class TaskRuntime(HostRuntime, Protocol):
    """What a task needs of the runtime: the host's, and the prices (session/manager.py `SessionManager`)."""

    def price(self, model_id: str, usage: Usage | None) -> Price | None: ...

    def context_window(self, model_id: str) -> int | None: ...

    @property
    def client_caps(self) -> w.ClientCapabilities: ...

    @property
    def store(self) -> SessionStore:
        """Where the session's tasks are kept (session/store/task_journal.py, beside the session files)."""
        ...

    async def send_update(self, session_id: str, update: w.SessionUpdate) -> None: ...


class ParentBilling(Protocol):
    """The parent session's accounting (session/accounting/session_context.py `SessionContext`): a task's requests
    are billed there too, as requests that do not enter the parent's context, so the session's cost is its own
    plus every task's (unknown when any part is)."""

    @property
    def billing(self) -> Billing: ...

    def meter_state(self) -> dict[str, object]: ...

    def budget_stop(self) -> str | None:
        """Why no request may reach the provider now: the session's cost, its tasks' included, reached its budget
        (session/accounting/budget.py); None while it may."""
        ...

    def billing_state(self) -> dict[str, object]: ...


class TaskParent(SessionParts, Protocol):
    """What a task uses of its parent session (session/live.py `Session`): what the session's own host works
    through, and its accounting."""

    @property
    def ctx(self) -> ParentBilling: ...


class ShowsTask(Protocol):
    """What the person sees of a task, as far as the runner tells it: the task call's content
    (session/tasks/call_view.py `CallView`) or, for an editor with `clientCapabilities.subagents`, a session of its
    own (session/tasks/subagent_view.py, session/tasks/external/view.py)."""

    async def started(self) -> None:
        """The task got its slot and starts (`record.status` is "running")."""

    async def ended(self, stop: str) -> None:
        """The task is done: `record.status` is final (completed, failed, cancelled); `stop` its turn's stop
        reason. Called shielded, also on cancel."""


class TaskWorker(Protocol):
    """What carries out one task: ama's own loop or an external ACP agent."""

    @property
    def record(self) -> TaskRecord: ...

    @property
    def view(self) -> ShowsTask: ...

    async def work(self) -> str:
        """Carry the task out, in its slot and under its timeout: the stop reason of its turn."""
        ...

    def why_failed(self, exc: Exception) -> str:
        """The reason the task call gives when `work` raised `exc`."""
        ...

    def fault(self, stop: str) -> str | None:
        """Why the task failed although its work returned (a failure it met, no answer); None: it answered."""
        ...

    def answer(self) -> str:
        """The text of its answer ("" when it gave none)."""
        ...

    def kept(self) -> list[Message]:
        """What the journal keeps of its conversation."""
        ...
