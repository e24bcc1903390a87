"""Plan mode's parts on their own (docs/tools.md "Plan mode"): its policy is Read only's, what it tells the model,
and `exit_plan_mode` declared only while the session plans. The whole over the wire: tests/integration/
test_plan_mode_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ama_acp.agent.prompt import MODE_RULES, Setting, setting_reminder, system_prompt
from ama_acp.config import MODES
from ama_acp.permissions import decide, deny_reason
from ama_acp.session.options import MODE_NAMES
from ama_acp.session.turn.toolset import SessionTools
from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.plan_exit import NAME, ExitPlanTool
from ama_acp.tools.workspace import LocalWorkspace
from tests.unit.test_toolset_window import Own

pytestmark = pytest.mark.anyio

KINDS = ["read", "search", "edit", "delete", "move", "execute", "think", "fetch", "switch_mode", "other"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("inside", [True, False])
def test_plan_decides_as_read_only(kind: str, inside: bool) -> None:
    assert decide("plan", kind, inside) == decide("read_only", kind, inside)


def test_plan_refuses_with_its_own_reason_and_every_mode_is_known_everywhere() -> None:
    assert "Plan mode" in deny_reason("plan", "edit") and "Read only" in deny_reason("read_only", "edit")
    assert set(MODE_NAMES) == set(MODES) == set(MODE_RULES)
    assert "plan mode" in system_prompt("/w", [], "plan") and "plan mode" not in system_prompt("/w", [], "manual")
    note = setting_reminder(Setting("manual"), Setting("plan"))
    assert "`plan`" in note and "exit_plan_mode" in note


async def _no_offer(plan: str) -> ToolResult:
    raise AssertionError("not to be asked")


def test_exit_plan_mode_is_declared_only_while_planning() -> None:
    mode = ["manual"]
    tools = SessionTools(Own())
    tools.offer_plan_exit(ExitPlanTool(_no_offer), lambda: mode[0] == "plan")
    assert NAME not in {s.name for s in tools.tool_specs()}
    before = tools.tools_version()
    mode[0] = "plan"
    assert NAME in {s.name for s in tools.tool_specs()}
    assert tools.tools_version() != before  # the meter counts the changed prefix
    mode[0] = "accept_edits"
    assert tools.tool(NAME) is not None  # a call from a request built while planning still finds it


@pytest.mark.parametrize("args", [{"plan": "  "}, {"plan": "x" * 20_001}, {}, {"plan": 3}, {"plan": "a", "b": 1}])
async def test_exit_plan_mode_refuses_a_missing_or_unreadable_plan(args: dict[str, object], tmp_path: Path) -> None:
    ctx = ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))
    with pytest.raises(ToolError):
        await ExitPlanTool(_no_offer).run(args, ctx)
