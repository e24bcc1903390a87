"""exit_plan_mode: the model offers its plan and asks the person to leave plan mode for a mode that can edit.

This module is the declaration and the arguments' check. The question and the switch happen where the session
is (session/plan_mode.py): a tool cannot reach the editor or the session's mode (tools/ sits below session/ in
docs/architecture.md), so the session hands the tool its `offer`. The session declares the tool only while it is
in plan mode (session/turn/toolset.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import closed_object, validate
from ama_acp.tools.context import ToolContext

NAME = "exit_plan_mode"
MAX_PLAN_CHARS = 20_000  # what a person can read in a dialog; a longer plan belongs in the reply itself


class PlanArgs(TypedDict):
    plan: str


# The session's side: asks the person with the plan, switches the mode when they agree, and says what happened.
Offer = Callable[[str], Awaitable[ToolResult]]


class ExitPlanTool:
    name = NAME
    kind: ToolKind = "switch_mode"
    description = (
        "Only in plan mode: when your plan is ready, offer it to the user and ask to switch to a mode that can "
        "edit files and run commands. `plan` is the plan as the user should read it (Markdown, concise). If they "
        "agree, the mode changes and you carry the plan out in this same turn; if not, keep planning and ask "
        "them what to change. Do not call it before the plan is complete, nor to ask anything else."
    )
    parameters: JSONObject = closed_object(
        {"plan": {"type": "string", "description": "The plan to carry out, in Markdown."}},
        "plan",
    )

    def __init__(self, offer: Offer) -> None:
        self._offer = offer

    def title(self, args: ToolArgs) -> str:
        return "Plan ready: switch to a mode that can edit?"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []

    def deadline_seconds(self, args: object) -> float:
        """A person decides: no deadline (tools/base.py `HasDeadline`), as for any permission question."""
        return float("inf")

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        plan = validate(self.parameters, args, PlanArgs)["plan"].strip()
        if not plan:
            raise ToolError("`plan` is empty: write the plan the user is asked to approve.")
        if len(plan) > MAX_PLAN_CHARS:
            raise ToolError(
                f"`plan` is {len(plan)} characters; keep it under {MAX_PLAN_CHARS} (the steps, not every detail)."
            )
        return await self._offer(plan)
