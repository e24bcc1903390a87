"""The built-in tools, and how the model sees them."""

from __future__ import annotations

from collections.abc import Sequence

from ama_acp.providers.base import ToolSpec
from ama_acp.tools.base import Tool
from ama_acp.tools.edit import EditTool
from ama_acp.tools.glob import GlobTool
from ama_acp.tools.grep import GrepTool
from ama_acp.tools.ls import ListTool
from ama_acp.tools.read import ReadTool
from ama_acp.tools.shell import ShellTool
from ama_acp.tools.todo import TodoTool
from ama_acp.tools.write import WriteTool


def default_tools() -> list[Tool]:
    """Fresh instances of every built-in tool, in the order the model sees them."""
    return [
        ReadTool(),
        WriteTool(),
        EditTool(),
        ListTool(),
        GlobTool(),
        GrepTool(),
        ShellTool(),
        TodoTool(),
    ]


def by_name(tools: Sequence[Tool] | None = None) -> dict[str, Tool]:
    return {t.name: t for t in (default_tools() if tools is None else tools)}


def tool_specs(tools: Sequence[Tool] | None = None) -> list[ToolSpec]:
    return [
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
        for t in (default_tools() if tools is None else tools)
    ]
