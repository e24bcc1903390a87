"""The built-in tools, and how the model sees them.

The tools' modules are imported when a tool is first made (make_tool, default_tools), not with this module: what
a session declares to the model before any tool runs comes from declared.py's table (issue 41: importing the ten
modules, the regular-expression engine and the file walker among them, was ~15 ms of a fresh ama's first answer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from ama_acp.conversation.tools import ToolSpec
from ama_acp.tools.base import DEFAULT_DEADLINE_SECONDS, HasDeadline, Tool, ToolArgs, ToolError, ToolResult
from ama_acp.tools.context import ToolContext

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ama_acp.config import WebConfig


def default_tools(web: WebConfig | None = None, agents: Mapping[str, str] | None = None) -> list[Tool]:
    """Fresh instances of every built-in tool, in the order the model sees them; `web` is the config's `[web]`,
    `agents` the configured agents the task tool offers (name → description)."""
    from ama_acp.tools.edit import EditTool
    from ama_acp.tools.ls import ListTool
    from ama_acp.tools.read import ReadTool
    from ama_acp.tools.search.glob import GlobTool
    from ama_acp.tools.search.grep import GrepTool
    from ama_acp.tools.shell import ShellTool
    from ama_acp.tools.task import TaskTool
    from ama_acp.tools.todo import TodoTool
    from ama_acp.tools.web.fetch import WebFetchTool
    from ama_acp.tools.write import WriteTool

    return [
        ReadTool(),
        WriteTool(),
        EditTool(),
        ListTool(),
        GlobTool(),
        GrepTool(),
        ShellTool(),
        TodoTool(),
        WebFetchTool(web.allow_hosts if web is not None else None),
        TaskTool(agents),
    ]


def deadline_for(tool: Tool, args: object) -> float:
    """Seconds the call may take: the tool's own `deadline_seconds(args)` or DEFAULT_DEADLINE_SECONDS."""
    if isinstance(tool, HasDeadline):
        return tool.deadline_seconds(args)
    return DEFAULT_DEADLINE_SECONDS


async def run_with_deadline(tool: Tool, args: ToolArgs, ctx: ToolContext) -> ToolResult:
    """Run one tool call; past its deadline it is cancelled (its threads told to stop, its processes
    killed by their own cleanup) and the call fails with a ToolError saying so. Every tool call goes
    through here, so no tool, however it misbehaves, can hold a turn forever."""
    seconds = deadline_for(tool, args)
    result: ToolResult | None = None
    with anyio.move_on_after(seconds):
        result = await tool.run(args, ctx)
    if result is None:
        raise ToolError(
            f"{tool.name} timed out after {seconds:g} s and was stopped. Try a narrower request "
            "(a smaller path, a more specific pattern, a shorter command)."
        )
    return result


def by_name(tools: Sequence[Tool] | None = None) -> dict[str, Tool]:
    return {t.name: t for t in (default_tools() if tools is None else tools)}


def tool_specs(tools: Sequence[Tool] | None = None) -> list[ToolSpec]:
    return [
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
        for t in (default_tools() if tools is None else tools)
    ]


def declared_specs(agents: Mapping[str, str] | None = None) -> list[ToolSpec]:
    """What `tool_specs(default_tools(web, agents))` gives, in the same order and with the same bytes, without
    importing the tools' modules: declared.py's table, and `task`'s declaration (it lists `agents`)."""
    from ama_acp.tools.declared import DECLARED
    from ama_acp.tools.task import TaskTool

    specs = [ToolSpec(name=name, description=d, parameters=p) for name, (_, _, d, p) in DECLARED.items()]
    task = TaskTool(agents)
    return [*specs, ToolSpec(name=task.name, description=task.description, parameters=task.parameters)]


def make_tool(name: str, web: WebConfig | None = None, agents: Mapping[str, str] | None = None) -> Tool | None:
    """A fresh instance of the built-in tool `name` (None when there is none), its module imported now: as
    default_tools makes it, with `web` (web_fetch's allowed hosts) and `agents` (task's)."""
    import importlib

    from ama_acp.tools.declared import DECLARED
    from ama_acp.tools.task import NAME, TaskTool

    if name == NAME:
        return TaskTool(agents)
    if name not in DECLARED:  # a model's made-up name: never a key of the table used as a module path
        return None
    module, cls, _, _ = DECLARED[name]
    made = getattr(importlib.import_module(module), cls)
    if name == "web_fetch":
        tool: Tool = made(web.allow_hosts if web is not None else None)
        return tool
    tool = made()
    return tool
