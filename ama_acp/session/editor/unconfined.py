"""One run of a command outside the sandbox (`run_command` with `outside_sandbox`, docs/tools.md "The sandbox"):
which calls ask for it, and the question the person is asked about each one.

Such a run has the person's full rights, so only the person grants it, every time: the approver asks in every
mode that runs commands (Full access too), no allow rule or "always" answer covers it, and the question offers
no "always". A deny rule and Read only or Plan still refuse it before it is asked.
"""

from __future__ import annotations

from collections.abc import Mapping

from ama_acp.agent.loop import Refusal
from ama_acp.tools.context import ToolContext
from ama_acp.tools.shell import ShellTool, outside_sandbox
from ama_acp.wire import types as w

DECLINED = Refusal(
    "The user declined to run this command outside the sandbox; it did not run. Do not ask again for it: work "
    "within what the sandbox allows, or tell the user what you need and why.",
    "Not run: you declined to run it outside the sandbox.",
)

# Said before the command in the question: what the person grants.
WARNING = (
    "This command would run OUTSIDE ama's sandbox, once, with your full rights: it can write anywhere you can "
    "and reach the network. Allow it only if you would run it yourself."
)

OPTIONS = [
    w.PermissionOption(option_id="allow_once", name="Allow once, outside the sandbox", kind="allow_once"),
    w.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
]


def wanted(name: str, args: Mapping[str, object], ctx: ToolContext) -> bool:
    """Whether this call asks to run outside a sandbox that is on. Where none is (mode "off", no Landlock) the
    command runs unconfined anyway, and the flag changes nothing: the call is asked about as any command.
    Raises ToolError when the flag is not a boolean, as the tool would."""
    return name == ShellTool.name and outside_sandbox(args) and ctx.sandboxed


def title(call_title: str) -> str:
    return f"{call_title} outside the sandbox, with your full rights"


def declined(answer: w.RequestPermissionResponse) -> bool:
    outcome = answer.outcome
    return isinstance(outcome, w.SelectedPermissionOutcome) and outcome.option_id == "reject_once"
