"""The tools a session declares follow its model's window (session/turn/toolset.py): on a small window the heavy ones
(web_fetch, task) are left out, on a bigger or unknown one every tool is declared, and a switch between the two
is a changed tool set (the version moves, so the meter's prefix is counted again)."""

from __future__ import annotations

from ama_acp.conversation.tools import ToolSpec
from ama_acp.session.turn.toolset import HEAVY_TOOLS, SMALL_WINDOW, SessionTools
from ama_acp.tools.base import Tool, ToolResult
from ama_acp.tools.plan_exit import ExitPlanTool
from ama_acp.tools.registry import default_tools, tool_specs


class Own:
    def __init__(self) -> None:
        self.tools = {t.name: t for t in default_tools()}

    def tool(self, name: str) -> Tool | None:  # the Protocol's shape
        return self.tools.get(name)

    def tool_specs(self) -> list[ToolSpec]:
        return tool_specs(list(self.tools.values()))


def test_a_small_window_leaves_the_heavy_tools_out_and_a_switch_changes_the_version() -> None:
    window: list[int | None] = [8_192]
    tools = SessionTools(Own(), lambda: window[0])
    small = {s.name for s in tools.tool_specs()}
    assert HEAVY_TOOLS <= {t.name for t in default_tools()}  # they exist: only not declared
    assert not small & HEAVY_TOOLS and {"read_file", "edit_file", "run_command"} <= small
    assert tools.tool("web_fetch") is not None  # a call from before a switch still finds its tool
    version_small = tools.tools_version()
    window[0] = SMALL_WINDOW  # the bound itself is not small
    assert HEAVY_TOOLS <= {s.name for s in tools.tool_specs()}
    assert tools.tools_version() != version_small
    window[0] = None  # an unknown window: every tool
    assert HEAVY_TOOLS <= {s.name for s in tools.tool_specs()}


def test_the_tools_are_declared_sorted_by_name_whatever_order_they_come_in() -> None:
    """Seed 001_: the tools lead the cached prefix, so their order depends on their names only."""

    class Reversed(Own):
        def tool_specs(self) -> list[ToolSpec]:
            return super().tool_specs()[::-1]

    for own in (Own(), Reversed()):
        tools = SessionTools(own)
        tools.offer_plan_exit(ExitPlanTool(_no_offer), lambda: True)  # the session's own tool, appended last
        names = [s.name for s in tools.tool_specs()]
        assert names == sorted(names) and "exit_plan_mode" in names and len(names) == len(own.tools) + 1


async def _no_offer(plan: str) -> ToolResult:
    return ToolResult("not offered")
