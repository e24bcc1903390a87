"""Plan mode's way out (docs/tools.md "Plan mode"): the model's `exit_plan_mode` call (tools/plan_exit.py) asks
the person, through `session/request_permission`, whether to leave Plan for a mode that can edit.

The options are a small, safe set: Accept edits and Manual, never Full access (one click on a plan must not
also waive every later question), and "Keep planning". An accepted switch goes through the session's own
`set_mode`, so the editor hears `current_mode_update` and the options as after `session/set_mode`, the file
keeps it, and the model is told of it before its next request like any switch; the turn goes on in the new
mode. Whatever else comes back — a refusal, an answer that cannot be had (`ama -p`, a client that cannot ask),
a mode changed meanwhile — leaves the mode as it is, and the model is told why.
"""

from __future__ import annotations

from typing import Protocol

from ama_acp.agent.loop import CANCELLED_FOR_MODEL, Refusal
from ama_acp.session.editor.workspaces import current_tool_call
from ama_acp.session.options import MODE_NAMES
from ama_acp.tools.base import ToolResult
from ama_acp.tools.plan_exit import NAME
from ama_acp.wire import types as w

PLAN = "plan"
# optionId → the mode it switches to; the first is what a client that allows by default picks.
SWITCHES = {"switch_accept_edits": "accept_edits", "switch_manual": "manual"}
KEEP_PLANNING = "keep_planning"

KEEP_FOR_MODEL = (
    "The user chose to keep planning: the session stays in plan mode. Do not edit files or run commands. Ask "
    "them what to change in the plan, or refine it, and offer it again when it is ready."
)


class Asks(Protocol):
    """session/editor/approval.py `Approver`."""

    async def ask(self, request: w.RequestPermissionRequest) -> w.RequestPermissionResponse | Refusal | None: ...


class PlanSession(Protocol):
    """What the offer needs of its session (session/live.py `Session`)."""

    @property
    def id(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def approver(self) -> Asks: ...

    async def set_mode(self, mode: str, announce_options: bool = True) -> None: ...

    def cancel(self) -> None: ...


class PlanOffer:
    """The `offer` of the session's exit_plan_mode tool: one question, then the switch or the reason not to."""

    def __init__(self, session: PlanSession) -> None:
        self._s = session

    async def __call__(self, plan: str) -> ToolResult:
        if self._s.mode != PLAN:
            return ToolResult(
                f"The session is not in plan mode (it is in `{self._s.mode}`), so there is nothing to leave. "
                "Go on under the current mode.",
                is_error=True,
            )
        answer = await self._s.approver.ask(self._request(plan))
        if answer is None:  # the turn was cancelled while the person was asked
            self._s.cancel()
            return ToolResult(CANCELLED_FOR_MODEL, is_error=True)
        if isinstance(answer, Refusal):
            return ToolResult(
                f"The user could not be asked ({answer.for_person}). The session stays in plan mode: give the "
                "plan as your answer and let them switch the mode themselves.",
                is_error=True,
            )
        outcome = answer.outcome
        if isinstance(outcome, w.CancelledPermissionOutcome):
            self._s.cancel()  # the client cancelled the turn while asking (R113)
            return ToolResult(CANCELLED_FOR_MODEL, is_error=True)
        target = SWITCHES.get(outcome.option_id)
        if target is None:  # "Keep planning", or an option never offered: the safe reading is to stay
            return ToolResult(KEEP_FOR_MODEL)
        if self._s.mode != PLAN:  # switched while the dialog was open: the person's later choice stands
            return ToolResult(
                f"The mode was changed to `{self._s.mode}` while the user was asked; it stays so. Go on under it."
            )
        await self._s.set_mode(target)
        name = MODE_NAMES[target][0]
        return ToolResult(
            f"The user approved the plan and switched the session to `{target}` ({name}). Carry the plan out now, "
            "keeping the todo list up to date."
        )

    def _request(self, plan: str) -> w.RequestPermissionRequest:
        options = [
            w.PermissionOption(option_id=oid, name=f"Switch to {MODE_NAMES[mode][0]}", kind="allow_once")
            for oid, mode in SWITCHES.items()
        ]
        options.append(w.PermissionOption(option_id=KEEP_PLANNING, name="Keep planning", kind="reject_once"))
        return w.RequestPermissionRequest(
            session_id=self._s.id,
            tool_call=w.ToolCallFields(
                tool_call_id=current_tool_call.get() or NAME,  # the call the editor was shown
                title="Plan ready: switch to a mode that can edit?",
                kind="switch_mode",
                status="pending",
                content=[w.Content(content=w.TextContent(text=plan))],
                raw_input={"plan": plan},
            ),
            options=options,
        )
