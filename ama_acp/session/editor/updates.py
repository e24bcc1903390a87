"""Agent events → ACP `session/update` payloads, and the checks that narrow ama's strings to the wire's
enumerations (a value outside one is a bug or a damaged file, and gets the safe value instead)."""

from __future__ import annotations

import typing
from typing import TypeGuard

from ama_acp.agent import events as ev
from ama_acp.tools.base import Location, ToolResult
from ama_acp.tools.common import diff_too_big
from ama_acp.wire import types as w

_STOP_REASONS = frozenset(typing.get_args(w.StopReason))
_TOOL_STATUSES = frozenset(typing.get_args(w.ToolCallStatus))
_PLAN_PRIORITIES = frozenset(typing.get_args(w.PlanPriority))
_PLAN_STATUSES = frozenset(typing.get_args(w.PlanStatus))


def is_stop_reason(value: str) -> TypeGuard[w.StopReason]:
    return value in _STOP_REASONS


def is_tool_status(value: str) -> TypeGuard[w.ToolCallStatus]:
    return value in _TOOL_STATUSES


def is_plan_priority(value: object) -> TypeGuard[w.PlanPriority]:
    return isinstance(value, str) and value in _PLAN_PRIORITIES


def is_plan_status(value: object) -> TypeGuard[w.PlanStatus]:
    return isinstance(value, str) and value in _PLAN_STATUSES


EDITOR_TEXT_LIMIT = 4096  # the editor sees the first 4 KB of a tool's text; the model gets it all


def clip_text(text: str, limit: int = EDITOR_TEXT_LIMIT) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + f"\n… ({len(data) - limit} more bytes)"


def tool_content(result: ToolResult, shown: str | None = None) -> list[w.ToolCallContent]:
    """`[diff?, text]` for a finished call (docs/protocol.md); `shown` replaces the model's text for the person."""
    content: list[w.ToolCallContent] = []
    for diff in result.diffs:
        old, new = diff.old_text, diff.new_text
        if not diff_too_big(old, new):  # the one limit (tools/common.py DIFF_LIMIT, UTF-8 bytes)
            content.append(w.Diff(path=diff.path, old_text=old, new_text=new))
    text = result.text if shown is None else shown
    if text:
        content.append(w.Content(content=w.TextContent(text=clip_text(text))))
    for image in result.images:
        content.append(w.Content(content=w.ImageContent(data=image.data, mime_type=image.mime_type)))
    return content


def cut_short_update(event: ev.ToolCallFinished, output: str, terminal_id: str | None) -> tuple[str, w.ToolCallUpdate]:
    """A command cancelled while it ran (issue 25): (the text its record keeps, its final update). The update
    keeps what the person was watching — the editor's terminal, or the output so far (clipped like any output) —
    and says it was cancelled; the record keeps the output as text, which is all a replay can show. The line
    comes first so that clipping a long output never cuts it."""
    said = event.shown or event.result.text
    kept = f"{said} Its output so far:\n\n{output}" if output else said
    content: list[w.ToolCallContent]
    if terminal_id is not None:
        content = [w.TerminalRef(terminal_id=terminal_id), w.Content(content=w.TextContent(text=said))]
    else:
        content = [w.Content(content=w.TextContent(text=clip_text(kept)))]
    update = w.ToolCallUpdate(tool_call_id=event.wire_id, status="failed", title=event.title, content=content)
    return kept, update


UINT32_MAX = 2**32 - 1


def wire_line(line: object) -> int | None:
    """A location's line as the schema allows it (uint32), else none: the line comes from the model's
    arguments (`offset: -1`, `10**30`), and a client may reject the whole update over one bad number."""
    if isinstance(line, int) and not isinstance(line, bool) and 0 <= line <= UINT32_MAX:
        return line
    return None


def locations(result_locations: list[Location]) -> list[w.ToolCallLocation]:
    return [w.ToolCallLocation(path=loc.path, line=wire_line(loc.line)) for loc in result_locations]


def to_update(event: ev.AgentEvent) -> w.SessionUpdate | None:
    if isinstance(event, ev.TextChunk):
        return w.AgentMessageChunk(content=w.TextContent(text=event.text), message_id=event.message_id)
    if isinstance(event, ev.ThoughtChunk):
        return w.AgentThoughtChunk(content=w.TextContent(text=event.text), message_id=event.message_id)
    if isinstance(event, ev.ToolCallRequested):
        from ama_acp.mcp.shown import shown_input  # with the secret patterns: a first tool call's, not every turn's

        return w.ToolCall(
            tool_call_id=event.wire_id,
            title=event.title,
            kind=event.kind,
            status="pending",
            locations=locations(event.locations),
            raw_input=shown_input(event.name, event.raw_input),  # an MCP call's: without secrets (mcp/shown.py)
        )
    if isinstance(event, ev.ToolCallStarted):
        return w.ToolCallUpdate(tool_call_id=event.wire_id, status="in_progress")
    if isinstance(event, ev.ToolCallFinished):
        result = event.result
        return w.ToolCallUpdate(
            tool_call_id=event.wire_id,
            status="failed" if result.is_error else "completed",
            title=event.title,
            content=tool_content(result, event.shown),
            locations=locations(result.locations) if result.locations else None,
        )
    if isinstance(event, ev.Retrying):
        note = f"\n\n_(The model provider failed: {event.reason}. Retrying in {event.delay:.0f} s…)_\n\n"
        return w.AgentMessageChunk(content=w.TextContent(text=note))


def plan_update(entries: list[dict[str, str]]) -> w.Plan:
    return w.Plan(
        entries=[
            w.PlanEntry(
                content=e.get("content", ""),
                priority=priority if is_plan_priority(priority := e.get("priority")) else "medium",
                status=status if is_plan_status(status := e.get("status")) else "pending",
            )
            for e in entries
        ]
    )
