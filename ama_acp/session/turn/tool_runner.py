"""One tool call run for a conversation: the session's (session/turn/host.py `SessionHost`) and a task's
(session/tasks/host.py `TaskHost`) alike.

A result may take only what the conversation's context can still hold (agent/result_fit.py): the room is
measured before the tool runs, the tool's output is cut to it while it runs (`result_chars`), and the result is
fitted to it after. The call's id is set for the editor's terminals (a terminal is embedded in the call the
editor knows), and a command a cancel cuts short leaves what it printed in the caller's `CutShort`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal
from ama_acp.agent.result_fit import fit_result, result_budget, tool_chars
from ama_acp.context.meter import ContextFigures, ContextMeter
from ama_acp.conversation.messages import AssistantMessage, Message
from ama_acp.session.editor.workspaces import current_tool_call
from ama_acp.tools.base import Tool, ToolError, ToolResult
from ama_acp.tools.common import short
from ama_acp.tools.context import RedirectJudge, ToolContext, redirect_judge, result_chars
from ama_acp.tools.registry import run_with_deadline
from ama_acp.tools.workspace import CutShort, cut_short

if TYPE_CHECKING:  # a session has hooks only when the config lists some: made by live.py then
    from ama_acp.shaping.hook_points import SessionHooks


class Room(msgspec.Struct, frozen=True):
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
    judge: RedirectJudge | None = None,
    hooks: SessionHooks | None = None,
) -> ToolResult:
    """Run one call within `space`. `call_id`: the call as the editor knows it, None for one it never saw;
    `cut`: filled by a command a cancel cuts short (None: nobody shows what it left); `judge`: how a step to
    an origin the call was not approved for is judged (`redirect_judge` below; None: refused); `hooks`: the
    person's `pre_tool` and `post_tool` hooks around it (`hooked`)."""
    return await hooked(hooks, tool.name, args, lambda: _run(tool, args, ctx, space, call_id, cut, judge))


async def hooked(
    hooks: SessionHooks | None, name: str, args: dict[str, object], run: Callable[[], Awaitable[ToolResult]]
) -> ToolResult:
    """`run` between the `pre_tool` hooks (one that exits 2 blocks it: its result is the hook's) and the
    `post_tool` hooks, which see its result (shaping/hook_points.py)."""
    if hooks is None:
        return await run()
    blocked = await hooks.pre_tool(name, args)
    if blocked is not None:
        return blocked
    try:
        result = await run()
    except ToolError as exc:  # a failed call is a result too: the loop would make it this one
        result = ToolResult(str(exc), is_error=True)
    return await hooks.post_tool(name, args, result)


async def _run(
    tool: Tool,
    args: dict[str, object],
    ctx: ToolContext,
    space: Room,
    call_id: str | None,
    cut: CutShort | None,
    judge: RedirectJudge | None,
) -> ToolResult:
    call = current_tool_call.set(call_id)
    chars = result_chars.set(tool_chars(space.budget))
    cut_token = cut_short.set(cut)
    judge_token = redirect_judge.set(judge)
    try:
        result = await run_with_deadline(tool, args, ctx)
    finally:
        redirect_judge.reset(judge_token)
        cut_short.reset(cut_token)
        result_chars.reset(chars)
        current_tool_call.reset(call)
    return space.fit(result)


Approve = Callable[[ev.ToolCallRequested, dict[str, object]], Awaitable[Refusal | None]]
Emit = Callable[[ev.AgentEvent], Awaitable[None]]


def judge_redirects(tool: Tool, wire_id: str, approve: Approve, emit: Emit) -> RedirectJudge:
    """A redirect of `tool`'s call (web_fetch) to a new origin, judged by `approve` — the host's permissions — as a
    call of its own to that URL, under the call's id: the rules, the mode and the "always" answers, and the
    person asked where they would be for a first request. Allowed, the call is marked running again (a question
    shows it pending)."""

    async def judge(url: str, came_from: str) -> str | None:
        args: dict[str, object] = {"url": url}
        title = f"{tool.title(args)} (redirected from {short(came_from, 200)})"
        refusal = await approve(ev.ToolCallRequested(wire_id, tool.name, title, tool.kind, [], args), args)
        if refusal is not None:
            return refusal.for_model
        await emit(ev.ToolCallStarted(wire_id))
        return None

    return judge
