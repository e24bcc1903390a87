"""todo_write: the session's task list, shown to the person as an ACP `plan`."""

from __future__ import annotations

from typing import TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import closed_object, validate
from ama_acp.tools.context import ToolContext

_MARK = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


class TodoItem(TypedDict):
    content: str
    status: str  # one of _MARK's keys (the schema's enum)
    priority: str  # high, medium (the default, filled in) or low


class TodoArgs(TypedDict):
    todos: list[TodoItem]


class TodoTool:
    name = "todo_write"
    kind: ToolKind = "think"
    description = (
        "Keep a task list for work with several steps; the person sees it as your plan. Each call replaces the "
        "whole list, so send every item each time with its current status. Mark an item `in_progress` when you "
        "start it (one at a time) and `completed` as soon as it is done. Skip it for simple one-step requests."
    )
    parameters: JSONObject = closed_object(
        {
            "todos": {
                "type": "array",
                "description": "The complete list, in order.",
                "items": closed_object(
                    {
                        "content": {"type": "string", "description": "The task, in a short imperative sentence."},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "priority": {"type": "string", "enum": ["high", "medium", "low"], "default": "medium"},
                    },
                    "content",
                    "status",
                ),
            },
        },
        "todos",
    )

    def title(self, args: ToolArgs) -> str:
        todos = args.get("todos") if isinstance(args, dict) else None
        if not isinstance(todos, list):
            return "Update plan"
        done = sum(1 for t in todos if isinstance(t, dict) and t.get("status") == "completed")
        return f"Update plan ({done}/{len(todos)} done)"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, TodoArgs)
        todos: list[dict[str, str]] = []
        for i, item in enumerate(checked["todos"]):
            content = item["content"].strip()
            if not content:
                raise ToolError(f"`todos[{i}].content` is empty.")
            todos.append({"content": content, "status": item["status"], "priority": item["priority"]})
        if not todos:
            return ToolResult(text="The plan is now empty.", plan=[])
        lines = [f"{_MARK[t['status']]} {t['content']}" for t in todos]
        done = sum(t["status"] == "completed" for t in todos)
        text = f"Plan updated ({done}/{len(todos)} done):\n" + "\n".join(lines)
        return ToolResult(text=text, plan=[dict(t) for t in todos])
