"""The tools one session offers the model: ama's own (shared by every session of the runtime) and the
session's MCP servers' (`mcp__server__tool`, session/mcp.py), as one set that changes when a server comes up,
fails or changes its tools.

On a small window (under SMALL_WINDOW tokens) the heaviest of ama's own tools are not declared: `web_fetch` and
`task` cost about 540 tokens of every request between them, and what they bring back (a web page, a helper's
whole answer) could hardly fit; on an 8K window that room is what a compaction's handoff needs. The set follows
the current model, so a switch to a bigger window declares them again (a changed set, like an MCP server's).

`exit_plan_mode` (tools/plan_exit.py) is the session's own, not the runtime's: it is declared only while the
session is in plan mode, so the set changes when the mode enters or leaves Plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


SMALL_WINDOW = 16_384
HEAVY_TOOLS = frozenset({"web_fetch", "task"})  # left out of the declarations on a small window


class SessionTools:
    def __init__(self, runtime: OwnTools, window: Callable[[], int | None] = lambda: None) -> None:
        self._rt = runtime
        self._window = window  # the current model's window (None: unknown, every tool is declared)
        self.mcp: SessionMcp | None = None  # the editor's MCP servers for this session, once connected
        self._plan_exit: Tool | None = None
        self._planning: Callable[[], bool] = lambda: False
        self._skill: Tool | None = None  # the session's `skill` tool (shaping/skill_tool.py), when it has skills

    def offer_plan_exit(self, tool: Tool, planning: Callable[[], bool]) -> None:
        """The session's `exit_plan_mode`, declared while `planning()` (the session is in plan mode). It is found
        by name in any mode: a call from a request built in plan mode may run after a switch, and says so."""
        self._plan_exit = tool
        self._planning = planning

    def offer_skill(self, tool: Tool) -> None:
        """The session's `skill` tool, declared for the session's life (its skills are read once, at the open)."""
        self._skill = tool

    def connect(self, mcp: SessionMcp) -> None:
        self.mcp = mcp

    def tool(self, name: str) -> Tool | None:
        """ama's own tool of that name, or an MCP server's (`mcp__server__tool`)."""
        if self.mcp is not None:
            found = self.mcp.tool(name)
            if found is not None:
                return found
        if self._plan_exit is not None and name == self._plan_exit.name:
            return self._plan_exit
        if self._skill is not None and name == self._skill.name:
            return self._skill
        return self._rt.tool(name)

    def tool_specs(self) -> list[ToolSpec]:
        """Every tool the next request declares."""
        specs = list(self._rt.tool_specs())
        if self._small_window():
            specs = [s for s in specs if s.name not in HEAVY_TOOLS]
        if (skill := self._skill) is not None:
            specs.append(ToolSpec(name=skill.name, description=skill.description, parameters=skill.parameters))
        plan_exit = self._plan_exit
        if plan_exit is not None and self._planning():
            specs.append(
                ToolSpec(name=plan_exit.name, description=plan_exit.description, parameters=plan_exit.parameters)
            )
        if self.mcp is not None:
            specs += self.mcp.tool_specs()
        return sorted(specs, key=lambda s: s.name)

    def tools_version(self) -> int:
        """Changes whenever `tool_specs()` does (an MCP server became ready, failed, or changed its tools; a
        switch between a small and a bigger window; the mode entering or leaving Plan)."""
        servers = self.mcp.version if self.mcp is not None else 0
        planning = self._plan_exit is not None and self._planning()
        return (servers * 2 + self._small_window()) * 2 + planning

    def _small_window(self) -> bool:
        window = self._window()
        return window is not None and window < SMALL_WINDOW

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
