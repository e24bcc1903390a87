"""A task carried out by ama's own agent loop (session/tasks/worker.py `TaskWorker`): one turn of a conversation
of its own (session/tasks/host.py `TaskHost`) on its agent's model and tools, whose last reply is its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ama_acp.agent.loop import run_turn
from ama_acp.agent.prompt import system_prompt
from ama_acp.config import AgentConfig
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, UserMessage
from ama_acp.session.tasks.host import ShowsLoop, TaskHost, answer_text
from ama_acp.session.tasks.record import LoopTaskRecord
from ama_acp.session.tasks.worker import TaskParent, TaskRuntime
from ama_acp.session.turn.host import SessionSetting
from ama_acp.session.turn.toolset import SessionTools
from ama_acp.shaping.skill_tool import NAME as SKILL
from ama_acp.tools.base import ToolError

# The built-in read-only agent's tools: it reads and searches the project, and nothing leaves the machine.
EXPLORE_TOOLS = ("read_file", "list_dir", "find_files", "search")

TASK_NOTE = """
# Your task
You are a helper agent: another agent handed you one task, written below as the user's message. You cannot see
its conversation, and it sees only your final message, which is returned to it as your answer — make that
message complete and self-contained (what you found, with `path:line` references, or what you did and its
result). You cannot start tasks of your own.
"""


class LoopParent(TaskParent, SessionSetting, Protocol):
    """What a task of ama's own loop uses of its session (session/live.py `Session`): a task's parts, and where
    and how the session works, for the task's system prompt."""


def allowed_tools(tools: SessionTools, agent: str, spec: AgentConfig) -> Sequence[str] | None:
    """The tools `agent` may use (None: the session's); an agent naming a tool the session lacks fails the call
    before any task starts."""
    allowed = EXPLORE_TOOLS if agent == "explore" else spec.tools
    if allowed is not None:
        known = {s.name for s in tools.tool_specs()}
        missing = [t for t in allowed if t not in known]
        if missing:
            raise ToolError(f"Agent {agent!r} names tools this session does not have: {', '.join(missing)}.")
    return allowed


class LoopWorker:
    def __init__(
        self,
        runtime: TaskRuntime,
        parent: LoopParent,
        record: LoopTaskRecord,
        spec: AgentConfig,
        tools: Sequence[str] | None,
        prompt: str,
        view: ShowsLoop,
    ) -> None:
        self.record = record
        self.view = view
        self._prompt = prompt
        self._host = TaskHost(runtime, parent, record, _system(parent, spec, tools), tools, view)

    async def work(self) -> str:
        async with self.view.live():
            return await run_turn(self._host, UserMessage(content=[TextPart(self._prompt)]))

    def why_failed(self, exc: Exception) -> str:
        return f"The task could not run: {type(exc).__name__}: {exc}"

    def fault(self, stop: str) -> str | None:
        if self._host.failure is not None:
            return f"The helper agent stopped: {self._host.failure}"
        if not self.answer():
            why = "" if stop == "end_turn" else f" (it stopped: {stop})"
            return f"The helper agent ended without an answer{why}."
        return None

    def answer(self) -> str:
        last = next((m for m in reversed(self._host.messages) if isinstance(m, AssistantMessage)), None)
        return answer_text(last) if last is not None else ""

    def kept(self) -> list[Message]:
        return self._host.messages  # its whole conversation


def _system(s: LoopParent, spec: AgentConfig, tools: Sequence[str] | None) -> str:
    text = system_prompt(s.cwd, list(s.additional_directories), s.mode) + TASK_NOTE
    if spec.instructions.strip():
        text += "\n# Your agent's instructions\n" + spec.instructions.strip() + "\n"
    # The parent's skills, when the task's agent has the `skill` tool (the parent's own, session/turn/toolset.py).
    skills = s.skills.block if tools is None or SKILL in tools else ""
    return text + skills + s.instructions.current_block()  # a fresh context: the files of now
