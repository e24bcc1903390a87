"""One tool call run for a conversation: the session's (session/turn/host.py `SessionHost`) and a task's
(session/tasks/host.py `TaskHost`) alike.

A result may take only what the conversation's context can still hold (agent/result_fit.py): the room is
measured before the tool runs, the tool's output is cut to it while it runs (`result_chars`), and the result is
fitted to it after. The call's id is set for the editor's terminals (a terminal is embedded in the call the
editor knows), and a command a cancel cuts short leaves what it printed in the caller's `CutShort`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ama_acp.agent.result_fit import fit_result, result_budget, tool_chars
from ama_acp.context.meter import ContextFigures, ContextMeter
from ama_acp.conversation.messages import AssistantMessage, Message
from ama_acp.session.editor.workspaces import current_tool_call
from ama_acp.tools.base import Tool, ToolResult
from ama_acp.tools.context import ToolContext, result_chars
from ama_acp.tools.registry import run_with_deadline
from ama_acp.tools.workspace import CutShort, cut_short


@dataclass(frozen=True)
class Room:
    """What the next tool result may take: `budget` tokens of `window` (both None while the window is unknown:
    nothing is cut), counted by `count` (the meter's estimator)."""

    budget: int | None
    window: int | None
    count: Callable[[str], int]

    def fit(self, result: ToolResult) -> ToolResult:
        if self.window is None:
            return result
        return fit_result(result, self.budget, self.count, self.window)


def room(meter: ContextMeter, figures: ContextFigures, messages: Sequence[Message], pending: int = 0) -> Room:
    """The room in a conversation measured by `meter` (its `figures` now, its `messages`). `pending`: tokens of
    results sized but not yet in the conversation (calls that run side by side, session/turn/host.py)."""
    auto, _ = meter.thresholds()  # held or not: a compaction may still have to keep the result
    unseen = 0
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            break
        unseen += meter.estimator.message(message)
    budget = result_budget(figures.window, auto, figures.used + pending, unseen + pending)
    return Room(budget, figures.window, meter.estimator.text)


async def run_tool(
    tool: Tool,
    args: dict[str, object],
    ctx: ToolContext,
    space: Room,
    call_id: str | None,
    cut: CutShort | None = None,
) -> ToolResult:
    """Run one call within `space`. `call_id`: the call as the editor knows it, None for one it never saw;
    `cut`: filled by a command a cancel cuts short (None: nobody shows what it left)."""
    call = current_tool_call.set(call_id)
    chars = result_chars.set(tool_chars(space.budget))
    cut_token = cut_short.set(cut)
    try:
        result = await run_with_deadline(tool, args, ctx)
    finally:
        cut_short.reset(cut_token)
        result_chars.reset(chars)
        current_tool_call.reset(call)
    return space.fit(result)
