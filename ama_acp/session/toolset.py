"""The tools one session offers the model: ama's own (shared by every session of the runtime) and the
session's MCP servers' (`mcp__server__tool`, session/mcp.py), as one set that changes when a server comes up,
fails or changes its tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ama_acp.agent import events as ev
from ama_acp.conversation.tools import ToolSpec
from ama_acp.tools.base import Tool

if TYPE_CHECKING:
    from ama_acp.session.mcp import SessionMcp


class OwnTools(Protocol):
    """ama's own tools, as the runtime holds them (session/manager.py `SessionManager`)."""

    def tool(self, name: str) -> Tool | None: ...

    def tool_specs(self) -> Sequence[ToolSpec]: ...


class SessionTools:
    def __init__(self, runtime: OwnTools) -> None:
        self._rt = runtime
        self.mcp: SessionMcp | None = None  # the editor's MCP servers for this session, once connected

    def connect(self, mcp: SessionMcp) -> None:
        self.mcp = mcp

    def tool(self, name: str) -> Tool | None:
        """ama's own tool of that name, or an MCP server's (`mcp__server__tool`)."""
        if self.mcp is not None:
            found = self.mcp.tool(name)
            if found is not None:
                return found
        return self._rt.tool(name)

    def tool_specs(self) -> list[ToolSpec]:
        """Every tool the next request declares."""
        specs = list(self._rt.tool_specs())
        if self.mcp is not None:
            specs += self.mcp.tool_specs()
        return specs

    def tools_version(self) -> int:
        """Changes whenever `tool_specs()` does (an MCP server became ready, failed, or changed its tools)."""
        return self.mcp.version if self.mcp is not None else 0

    def mcp_declarations(self) -> dict[str, list[ToolSpec]]:
        """The MCP servers' declarations, by server (empty without servers)."""
        return self.mcp.by_server() if self.mcp is not None else {}

    def describe(self, name: str, args: dict[str, object], cwd: str) -> ev.ToolCallRequested | None:
        return describe_call(self.tool(name), name, args, cwd)


def describe_call(tool: Tool | None, name: str, args: dict[str, object], cwd: str) -> ev.ToolCallRequested | None:
    """Title, kind and locations of a call of `tool` (without its wire id); None when there is no such tool."""
    if tool is None:
        return None
    try:
        title = tool.title(args)
        locs = tool.locations(args, cwd)
    except Exception:  # bad arguments: the tool will say so when run; a plain title will do
        title, locs = name, []
    return ev.ToolCallRequested("", name, title, tool.kind, locs, args)
