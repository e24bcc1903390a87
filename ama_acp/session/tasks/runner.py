"""The `task` tool's runner for one session: which agent carries a task out, on which model, with which tools;
how many tasks run at once (`[tasks] max_parallel`) and for how long (`[tasks] timeout`); the records
`_ama/session_stats` and `/tasks` show, and the journal that keeps them.

Every task runs the same way (`TaskRunner._carry_out`), whatever carries it out (session/tasks/worker.py
`TaskWorker`): ama's own loop (session/tasks/loop_worker.py) or, for an agent with a `command`, another ACP agent
(session/tasks/external/agent.py, docs/tools.md "External ACP agents"). A task runs inside its task call, so it
lives and dies with the parent's turn: a cancel, a session/close or the end of the connection cancels the turn's
scope and every task in it (their open calls get their results and final lines, the loop's invariant).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio
import msgspec

from ama_acp.config import AgentConfig
from ama_acp.session.store.task_journal import TaskJournal, journal_path
from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.wire.warning import takes_notices

# What carries a task out and shows it (~10 ms of imports) is imported by the first task: every session builds
# its runner, few sessions run a task, and a fresh ama's first answer waits on none of it (issue 41).
if TYPE_CHECKING:
    from ama_acp.session.facets import UsesModel
    from ama_acp.session.tasks.external.agent import ExternalTaskParent, ExternalWorker
    from ama_acp.session.tasks.external.view import ShowsExternal
    from ama_acp.session.tasks.host import ShowsLoop
    from ama_acp.session.tasks.loop_worker import LoopParent, LoopWorker
    from ama_acp.session.tasks.record import TaskRecord
    from ama_acp.session.tasks.subagent_view import SubagentParent
    from ama_acp.session.tasks.worker import TaskRuntime, TaskWorker

    class TaskSession(SubagentParent, LoopParent, ExternalTaskParent, UsesModel, Protocol):
        """What the runner needs of its session (session/live.py `Session`): what each worker and view uses, and
        the session's model (a task's unless its agent names another)."""


class TaskCall(msgspec.Struct, frozen=True):
    """A `task` call's arguments, parsed, and its toolCallId."""

    id: str
    prompt: str
    description: str
    agent: str


class TaskRunner:
    def __init__(self, runtime: TaskRuntime, session: TaskSession) -> None:
        self._rt = runtime
        self._s = session
        self.records: list[TaskRecord] = []
        # The tasks of earlier connections, and each task here once it ends (session/store/task_journal.py).
        self.journal = TaskJournal(
            lambda: journal_path(runtime.store.sessions_dir.parent, session.id),
            lambda: session.journal.saving,
            lambda line: runtime.store.redactor().redact_line(line),
        )
        self._limiter: anyio.CapacityLimiter | None = None  # made in the event loop, at the first task

    async def run(self, args: dict[str, object], wire_id: str) -> ToolResult:
        """Run one task call to its end: the task's final answer, or a ToolError saying why there is none."""
        call = _arguments(args, wire_id)
        spec = self._agent(call.agent)
        why = self._s.ctx.budget_stop()  # an external agent's spending cannot be stopped midway: it does not start
        if why is not None:
            raise ToolError(f"The task did not start: {why}")
        worker = self._external(spec, call) if spec.command is not None else self._loop(spec, call)
        return await self._carry_out(worker)

    def _loop(self, spec: AgentConfig, call: TaskCall) -> LoopWorker:
        from ama_acp.context.meter import ContextMeter
        from ama_acp.session.accounting.session_context import shared_estimator
        from ama_acp.session.tasks.call_view import CallView
        from ama_acp.session.tasks.loop_worker import LoopWorker, allowed_tools
        from ama_acp.session.tasks.record import LoopTaskRecord
        from ama_acp.session.tasks.subagent_view import SubagentView

        cfg = self._rt.config
        model = spec.model or self._s.model_id  # the session's model now: a later switch does not move the task
        tools = allowed_tools(self._s.tools, call.agent, spec)
        meter = ContextMeter(
            shared_estimator(cfg.context.estimator),
            window=self._rt.context_window(model),
            reserve_tokens=cfg.compaction.reserve_tokens,
            compaction_enabled=cfg.compaction.enabled,
            caps=cfg.tiers.caps,
        )
        record = LoopTaskRecord(id=call.id, agent=call.agent, description=call.description, model=model, meter=meter)
        session_id = self._register(record)
        view: ShowsLoop = CallView(self._s, record)  # the task call's content, or a session of its own
        if self._subagents():
            view = SubagentView(self._rt, self._s, record, call.prompt, session_id)
        return LoopWorker(self._rt, self._s, record, spec, tools, call.prompt, view)

    def _external(self, spec: AgentConfig, call: TaskCall) -> ExternalWorker:
        from ama_acp.session.tasks.call_view import CallView
        from ama_acp.session.tasks.external.agent import ExternalWorker, shown_command
        from ama_acp.session.tasks.external.view import ExternalSubagentView
        from ama_acp.session.tasks.record import ExternalTaskRecord

        model = shown_command(spec)
        record = ExternalTaskRecord(id=call.id, agent=call.agent, description=call.description, model=model)
        session_id = self._register(record)
        view: ShowsExternal = CallView(self._s, record)
        if self._subagents():
            view = ExternalSubagentView(self._rt, self._s, record, call.prompt, session_id)
        caps = self._rt.client_caps
        return ExternalWorker(
            self._rt.config,
            self._s,
            record,
            spec,
            call.prompt,
            view,
            terminals=caps.terminal,
            notices=takes_notices(caps),
        )

    def _register(self, record: TaskRecord) -> str:
        """The task listed, and its session id: `<session>.task-<n>`, n counting the session's tasks across loads.
        Every task has one, shown by /tasks and the stats and loadable later (session/tasks/stored.py), whether or
        not the editor sees it as a session now."""
        from ama_acp.session.tasks.stored import TaskSessionId

        self.records.append(record)
        number = len(self.journal.previous()) + len(self.records)
        record.session_id = TaskSessionId(self._s.id, number).session_id
        return record.session_id

    def _subagents(self) -> bool:
        """Whether the editor sees each task as a session of its own. An object (`{}`, or with `_meta`); omitted,
        null or malformed is "not advertised" (the schema defaults it)."""
        return isinstance(self._rt.client_caps.subagents, dict)

    async def _carry_out(self, worker: TaskWorker) -> ToolResult:
        """A task run to its end, whatever carries it out: it waits for a slot, works under the timeout, and ends
        completed with its answer, or failed (a ToolError with the reason), or cancelled with the parent's turn.
        However it ends, its view shows the end and the journal keeps it."""
        record, view = worker.record, worker.view
        timeout = self._rt.config.tasks.timeout
        stop = "end_turn"
        try:
            try:
                async with self._slots():
                    record.status = "running"
                    await view.started()
                    with anyio.move_on_after(timeout) as scope:
                        stop = await worker.work()
            except anyio.get_cancelled_exc_class():  # the parent's turn was cancelled (or closed): so is the task
                record.status = "cancelled"
                raise
            except Exception as exc:
                raise _failed(record, worker.why_failed(exc)) from exc
            if scope.cancelled_caught:
                raise _failed(
                    record, f"The task did not finish within {timeout:g} s ([tasks] timeout) and was stopped."
                )
            fault = worker.fault(stop)
            if fault is not None:
                raise _failed(record, fault)
            record.status = "completed"
            answer = worker.answer()
            if stop != "end_turn":  # max_tokens, refusal, max_turn_requests: the model should know the answer is short
                answer += f"\n\n[ama: the helper agent stopped early ({stop}); this answer may be incomplete.]"
            return ToolResult(text=answer)
        finally:  # the task's last state, however it ended (shielded: a cancel must not swallow it)
            with anyio.CancelScope(shield=True):
                await view.ended(stop)
            self.journal.append(record.figures(), worker.kept())

    def _slots(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._rt.config.tasks.max_parallel)
        return self._limiter

    def _agent(self, name: str) -> AgentConfig:
        if name in ("general", "explore"):
            return AgentConfig()
        spec = self._rt.config.agents.get(name)
        if spec is None:
            names = ", ".join(["general", "explore", *self._rt.config.agents])
            raise ToolError(f"There is no agent named {name[:64]!r}; the agents are: {names}.")
        return spec

    def stats(self) -> list[dict[str, object]]:
        """`_ama/session_stats` `tasks`: those kept from earlier connections first, then this connection's."""
        return [*(t.figures() for t in self.journal.previous()), *(r.figures() for r in self.records)]

    def describe(self) -> str:
        """`/tasks`: each task of the session, its state, tokens, context and cost."""
        from ama_acp.session.tasks.figures import describe

        return describe(self.stats())


def _failed(record: TaskRecord, reason: str) -> ToolError:
    record.status = "failed"
    record.error = reason
    return ToolError(reason)


def _arguments(args: dict[str, object], wire_id: str) -> TaskCall:
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ToolError("`prompt` is required: the whole task, as text.")
    description = args.get("description", "")
    agent = args.get("agent", "general")
    if not isinstance(description, str):
        raise ToolError("`description` must be a string (a short title).")
    if not isinstance(agent, str) or not agent:
        raise ToolError("`agent` must be an agent's name.")
    extra = sorted(set(args) - {"prompt", "description", "agent"})
    if extra:
        raise ToolError(f"Unknown argument(s): {', '.join(extra)[:200]}.")
    return TaskCall(wire_id, prompt, " ".join(description.split())[:200], agent)
