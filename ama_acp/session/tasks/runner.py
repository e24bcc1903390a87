"""The `task` tool's runner for one session: which agent, on which model, with which tools; how many children
run at once (`[tasks] max_parallel`) and for how long (`[tasks] timeout`); the records `_ama/session_stats`
and `/tasks` show.

A child runs inside its task call, so it lives and dies with the parent's turn: a cancel, a session/close or
the end of the connection cancels the turn's scope and every child in it (their open calls get their results
and final lines, the loop's invariant). An agent with a `command` is another ACP agent, run by
session/tasks/external/agent.py in the same slots and under the same timeout (docs/tools.md "External ACP agents").
"""

from __future__ import annotations

from typing import Protocol

import anyio

from ama_acp.agent.instructions import SessionInstructions
from ama_acp.agent.loop import run_turn
from ama_acp.agent.prompt import system_prompt
from ama_acp.config import AgentConfig
from ama_acp.context.meter import ContextMeter
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, UserMessage
from ama_acp.session.accounting.session_context import shared_estimator
from ama_acp.session.store.task_journal import TaskJournal, journal_path
from ama_acp.session.tasks.child import ChildHost, ChildRuntime, TaskRecord, answer_text
from ama_acp.session.tasks.external.agent import ExternalTask, ExternalTaskRecord, shown_command
from ama_acp.session.tasks.external.view import ExternalSubagentView
from ama_acp.session.tasks.subagent_view import SubagentParent, child_view
from ama_acp.tools.base import ToolError, ToolResult

# The built-in read-only agent's tools: it reads and searches the project, and nothing leaves the machine.
EXPLORE_TOOLS = ("read_file", "list_dir", "find_files", "search")

CHILD_NOTE = """
# Your task
You are a helper agent: another agent handed you one task, written below as the user's message. You cannot see
its conversation, and it sees only your final message, which is returned to it as your answer — make that
message complete and self-contained (what you found, with `path:line` references, or what you did and its
result). You cannot start tasks of your own.
"""


class TaskSession(SubagentParent, Protocol):
    """What the runner needs of its session (session/live.py `Session`)."""

    @property
    def cwd(self) -> str: ...

    @property
    def additional_directories(self) -> list[str]: ...

    @property
    def mode(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    @property
    def instructions(self) -> SessionInstructions: ...


class TaskRunner:
    def __init__(self, runtime: ChildRuntime, session: TaskSession) -> None:
        self._rt = runtime
        self._s = session
        self.records: list[TaskRecord] = []
        # The children of earlier connections, and each child here once it ends (session/store/task_journal.py).
        self.journal = TaskJournal(
            lambda: journal_path(runtime.store.sessions_dir.parent, session.id),
            lambda: session.journal.saving,
            lambda line: runtime.store.redactor().redact_line(line),
        )
        self._limiter: anyio.CapacityLimiter | None = None  # made in the event loop, at the first task

    async def run(self, args: dict[str, object], wire_id: str) -> ToolResult:
        """Run one task call to its end: the child's final answer, or a ToolError saying why there is none."""
        prompt, description, agent = _arguments(args)
        spec = self._agent(agent)
        cfg = self._rt.config
        if spec.command is not None:  # another ACP agent, started for this task (session/tasks/external/agent.py)
            return await self._external(spec, wire_id, prompt, description, agent)
        model = spec.model or self._s.model_id  # the session's model now: a later switch does not move the child
        tools = EXPLORE_TOOLS if agent == "explore" else spec.tools
        if tools is not None:
            known = {s.name for s in self._s.tools.tool_specs()}
            missing = [t for t in tools if t not in known]
            if missing:
                raise ToolError(f"Agent {agent!r} names tools this session does not have: {', '.join(missing)}.")
        record = TaskRecord(
            id=wire_id,
            agent=agent,
            description=description,
            model=model,
            meter=ContextMeter(
                shared_estimator(cfg.context.estimator),
                window=self._rt.context_window(model),
                reserve_tokens=cfg.compaction.reserve_tokens,
                compaction_enabled=cfg.compaction.enabled,
                caps=cfg.tiers.caps,
            ),
        )
        self.records.append(record)
        number = len(self.journal.previous()) + len(self.records)  # unique across loads: `<session>.task-<n>`
        # Every child has its id, shown by /tasks and the stats and loadable later (child_sessions.py), whether or
        # not the editor sees it as a session now.
        record.session_id = f"{self._s.id}.task-{number}"
        view = child_view(self._rt, self._s, record, prompt, number)  # its own session, or the call's lines
        child = ChildHost(self._rt, self._s, record, self._system(spec), tools, view)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(cfg.tasks.max_parallel)
        timeout = cfg.tasks.timeout
        stop = "end_turn"
        try:
            try:
                async with self._limiter:
                    record.status = "running"
                    await child.view.started()
                    with anyio.move_on_after(timeout) as scope:
                        async with view.live():
                            stop = await run_turn(child, UserMessage(content=[TextPart(prompt)]))
            except anyio.get_cancelled_exc_class():  # the parent's turn was cancelled (or closed): so is the child
                record.status = "cancelled"
                raise
            except Exception as exc:
                raise _failed(record, f"The task could not run: {type(exc).__name__}: {exc}") from exc
            if scope.cancelled_caught:
                raise _failed(
                    record, f"The task did not finish within {timeout:g} s ([tasks] timeout) and was stopped."
                )
            if child.failure is not None:
                raise _failed(record, f"The helper agent stopped: {child.failure}")
            last = next((m for m in reversed(child.messages) if isinstance(m, AssistantMessage)), None)
            answer = answer_text(last) if last is not None else ""
            if not answer:
                why = "" if stop == "end_turn" else f" (it stopped: {stop})"
                raise _failed(record, f"The helper agent ended without an answer{why}.")
            record.status = "completed"
            if stop != "end_turn":  # max_tokens, refusal, max_turn_requests: the model should know the answer is short
                answer += f"\n\n[ama: the helper agent stopped early ({stop}); this answer may be incomplete.]"
            return ToolResult(text=answer)
        finally:  # the child's last state, however it ended (shielded: a cancel must not swallow it)
            with anyio.CancelScope(shield=True):
                await view.ended(stop)
            self.journal.append(record.figures(), child.messages)

    async def _external(self, spec: AgentConfig, wire_id: str, prompt: str, description: str, agent: str) -> ToolResult:
        cfg = self._rt.config
        meter = ContextMeter(shared_estimator(cfg.context.estimator))  # unused: the agent reports its own figures
        record = ExternalTaskRecord(wire_id, agent, description, shown_command(spec), meter)
        self.records.append(record)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(cfg.tasks.max_parallel)
        view = None  # the task call's content; a session of its own for an editor with `subagents`
        number = len(self.journal.previous()) + len(self.records)
        record.session_id = f"{self._s.id}.task-{number}"  # as for ama's own children: /tasks shows it, load opens it
        if isinstance(self._rt.client_caps.subagents, dict):
            view = ExternalSubagentView(self._rt, self._s, record, prompt, record.session_id)
        task = ExternalTask(cfg, self._s, record, spec, view, terminals=self._rt.client_caps.terminal)
        try:
            return await task.run(prompt, self._limiter)
        finally:  # kept like ama's own children; its conversation is its agent's: ama keeps what it saw of it
            seen: list[Message] = [UserMessage(content=[TextPart(prompt)])]
            if task.answer:
                seen.append(AssistantMessage(content=[TextPart(task.answer)], model=record.model))
            self.journal.append(record.figures(), seen)

    def _agent(self, name: str) -> AgentConfig:
        if name in ("general", "explore"):
            return AgentConfig()
        spec = self._rt.config.agents.get(name)
        if spec is None:
            names = ", ".join(["general", "explore", *self._rt.config.agents])
            raise ToolError(f"There is no agent named {name[:64]!r}; the agents are: {names}.")
        return spec

    def _system(self, spec: AgentConfig) -> str:
        s = self._s
        text = system_prompt(s.cwd, list(s.additional_directories), s.mode) + CHILD_NOTE
        if spec.instructions.strip():
            text += "\n# Your agent's instructions\n" + spec.instructions.strip() + "\n"
        return text + s.instructions.block()

    def stats(self) -> list[dict[str, object]]:
        return [*(t.figures() for t in self.journal.previous()), *(r.figures() for r in self.records)]

    def describe(self) -> str:
        """`/tasks`: each task of the session, its state, tokens, context and cost."""
        if not self.records and not self.journal.previous():
            return "No tasks in this session yet. The model starts one with the `task` tool."
        lines = ["**Tasks of this session**", ""]
        for t in self.journal.previous():  # kept from earlier connections (session/store/task_journal.py)
            lines += t.lines()
        for r in self.records:
            if isinstance(r, ExternalTaskRecord):
                lines += [r.line(), *([f"  {r.error}"] if r.error else [])]
                continue
            f = r.figures()
            context = f"{f['contextTokens']:,} tokens"
            if "contextWindow" in f:
                context += f" of {f['contextWindow']:,}"
            cost = f"${r.billing.cost:.4f}" if r.billing.cost is not None else "cost unknown"
            title = r.description or "(no description)"
            lines.append(
                f"- `{r.agent}` — {title}: {r.status}; {f['requests']} requests, {f['tokens']:,} tokens billed; "
                f"context {context}; {cost} ({r.model})"
            )
            if r.error:
                lines.append(f"  {r.error}")
        return "\n".join(lines)


def _failed(record: TaskRecord, reason: str) -> ToolError:
    record.status = "failed"
    record.error = reason
    return ToolError(reason)


def _arguments(args: dict[str, object]) -> tuple[str, str, str]:
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
    return prompt, " ".join(description.split())[:200], agent
