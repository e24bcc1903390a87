"""task: hand a piece of work — a task — to a helper agent with a fresh context of its own.

This module is the declaration only (what the model sees, how a call is shown). The task runs where the
session is: session/turn/host.py hands a `task` call to the session's task runner (session/tasks/runner.py),
which has the model, the tools, the approval and the meter a task needs; a tool cannot reach them (tools/ sits
below session/ in docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import closed_object, short
from ama_acp.tools.context import ToolContext

NAME = "task"
BUILT_IN = {
    "general": "the session's tools and permission mode (the default)",
    "explore": "read-only: read_file, list_dir, find_files and search; no edits, no commands, no web",
}


class TaskTool:
    name = NAME
    kind: ToolKind = "think"

    def __init__(self, agents: Mapping[str, str] | None = None) -> None:
        """`agents`: the configured agents (`[agents.NAME]`), name → description."""
        known = dict(BUILT_IN)
        for name, description in (agents or {}).items():
            known[name] = description or "configured by the user"
        listed = "\n".join(f"- `{name}`: {what}" for name, what in known.items())
        self.description = (
            "Hand a self-contained piece of work to a helper agent that starts with a fresh, empty context: it "
            "sees only your `prompt` (and the project instructions), works with its own tools, and returns its "
            "final answer as this call's result. Use it for research or work whose details you do not need in "
            "your own context (searching a large codebase, reading many files, an independent sub-task). Write a "
            "complete prompt: the helper cannot see this conversation. Several task calls in one response run at "
            "the same time. A helper cannot start tasks of its own.\n\nAgents:\n" + listed
        )
        self.parameters: JSONObject = closed_object(
            {
                "prompt": {"type": "string", "description": "The whole task, with everything the helper needs."},
                "description": {"type": "string", "description": "A short title (3–8 words) shown to the user."},
                "agent": {"type": "string", "enum": list(known), "description": "Which agent; default `general`."},
            },
            "prompt",
        )

    def title(self, args: ToolArgs) -> str:
        description = args.get("description") if isinstance(args, dict) else None
        agent = args.get("agent") if isinstance(args, dict) else None
        who = short(agent, 40) if isinstance(agent, str) and agent else "general"
        if isinstance(description, str) and description.strip():
            return f"Task ({who}): {short(description, 80)}"
        return f"Task ({who})"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        # Reached only where no session runs the call (a task's tool set never has this tool).
        raise ToolError("The task tool is not available here: a helper agent cannot start tasks of its own.")
