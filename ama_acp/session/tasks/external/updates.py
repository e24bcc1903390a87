"""An external agent's `session/update`s, decoded and re-built for the editor (session/tasks/external/view.py).

The agent is another vendor's program and hostile like any input: each update is decoded into typed values and
a new update is built from them — never the agent's JSON forwarded as it came. What ama forwards: its text and
thoughts (text blocks only), its tool calls and their updates (title, kind, status, locations, and content
re-built as text blocks and diffs; terminals and other blocks left out), its plan, and its `usage_update` (used,
size, and its cost unless it is a USD figure past `MAX_TASK_COST_USD`, which ama does not believe). Anything else (its commands, its modes, an unknown kind) is not the editor's business in a task's
session and is dropped quietly; a known kind that does not decode is dropped with a log line.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import partial
from typing import Annotated, Literal

import msgspec

from ama_acp.rpc.dispatch import JSONObject
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

ID_CHARS = 200  # a tool call id past this is not an id ama keeps
TITLE_CHARS = 300
MAX_ITEMS = 100  # content blocks, locations, plan entries of one update
# The most one task's reported (cumulative) USD cost can be and be believed: well past what any model's price makes
# of a task within `[tasks] timeout`, far below an absurd figure. A cost past it is unknown (session/tasks/external/
# agent.py), not forwarded here. A cap, not a price check: its tokens are rarely reported with its cost.
MAX_TASK_COST_USD = 1000.0
KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})

Status = Literal["pending", "in_progress", "completed", "failed"]
Count = Annotated[int, msgspec.Meta(ge=0, lt=2**53)]


class _In(msgspec.Struct, rename="camel", frozen=True):
    pass  # unknown fields are skipped, never carried along


class _Block(_In, frozen=True):
    type: str
    text: str | None = None


class _Item(_In, frozen=True):
    """A ToolCallContent: `content` (a block), `diff` (path, oldText, newText) or another kind (dropped)."""

    type: str
    content: _Block | None = None
    path: str | None = None
    old_text: str | None = None
    new_text: str | None = None


class _Location(_In, frozen=True):
    path: str
    line: Count | None = None


class _Call(_In, frozen=True):
    tool_call_id: Annotated[str, msgspec.Meta(min_length=1, max_length=ID_CHARS)]
    title: str | None = None
    kind: str | None = None
    status: Status | None = None
    content: Annotated[list[_Item], msgspec.Meta(max_length=MAX_ITEMS)] | None = None
    locations: Annotated[list[_Location], msgspec.Meta(max_length=MAX_ITEMS)] | None = None


class _Chunk(_In, frozen=True):
    content: _Block


class _PlanEntry(_In, frozen=True):
    content: str
    priority: Literal["high", "medium", "low"]
    status: Literal["pending", "in_progress", "completed"]


class _Plan(_In, frozen=True):
    entries: Annotated[list[_PlanEntry], msgspec.Meta(max_length=MAX_ITEMS)]


class _Cost(_In, frozen=True):
    amount: Annotated[float, msgspec.Meta(ge=0)]
    currency: Annotated[str, msgspec.Meta(min_length=1, max_length=8)]


class _Usage(_In, frozen=True):
    used: Count
    size: Count
    cost: _Cost | None = None


def decode_update(update: object) -> w.SessionUpdate | None:
    """The update re-built from typed values, or None (not forwarded)."""
    if not isinstance(update, dict):
        return None
    kind = update.get("sessionUpdate")
    decode = _DECODERS.get(kind) if isinstance(kind, str) else None
    if decode is None:
        return None
    try:
        return decode(update)
    except msgspec.ValidationError as exc:
        log.warning("an external agent's %s was malformed and not forwarded: %s", kind, str(exc)[:200])
        return None


def _chunk(
    shown_as: type[w.AgentMessageChunk] | type[w.AgentThoughtChunk], update: JSONObject
) -> w.SessionUpdate | None:
    block = msgspec.convert(update, _Chunk).content
    if block.type != "text" or block.text is None:
        return None  # images, resources of a helper: not shown (the answer is its text)
    return shown_as(content=w.TextContent(text=block.text))


def _plan(update: JSONObject) -> w.SessionUpdate:
    plan = msgspec.convert(update, _Plan)
    return w.Plan(entries=[w.PlanEntry(_title(e.content, 2000), e.priority, e.status) for e in plan.entries])


def _usage(update: JSONObject) -> w.SessionUpdate:
    u = msgspec.convert(update, _Usage)
    # Left out when the agent gave none (or none believable): its silence is passed on as silence, not as null.
    cost: w.Cost | msgspec.UnsetType = msgspec.UNSET
    believed = u.cost is not None and (u.cost.currency != "USD" or u.cost.amount <= MAX_TASK_COST_USD)
    if u.cost is not None and believed and math.isfinite(u.cost.amount):
        cost = w.Cost(amount=u.cost.amount, currency=_title(u.cost.currency, 8))
    return w.UsageUpdate(used=u.used, size=u.size, cost=cost)


def _tool_call(update: JSONObject) -> w.SessionUpdate:
    call = msgspec.convert(update, _Call)
    return w.ToolCall(
        tool_call_id=_title(call.tool_call_id, ID_CHARS),
        title=_title(call.title or "A tool call", TITLE_CHARS),
        kind=_kind(call) or "other",
        status=call.status or "pending",
        content=_content(call.content),
        locations=_locations(call),
    )


def _tool_call_update(update: JSONObject) -> w.SessionUpdate:
    call = msgspec.convert(update, _Call)
    return w.ToolCallUpdate(
        tool_call_id=_title(call.tool_call_id, ID_CHARS),
        status=call.status,
        title=_title(call.title, TITLE_CHARS) if call.title is not None else None,
        kind=_kind(call),
        content=_content(call.content),
        locations=_locations(call),
    )


# What ama forwards, kind by kind; any other kind is dropped quietly.
_DECODERS: dict[str, Callable[[JSONObject], w.SessionUpdate | None]] = {
    "agent_message_chunk": partial(_chunk, w.AgentMessageChunk),
    "agent_thought_chunk": partial(_chunk, w.AgentThoughtChunk),
    "tool_call": _tool_call,
    "tool_call_update": _tool_call_update,
    "plan": _plan,
    "usage_update": _usage,
}


def _kind(call: _Call) -> str | None:
    return call.kind if call.kind in KINDS else None


def _locations(call: _Call) -> list[w.ToolCallLocation] | None:
    return [w.ToolCallLocation(path=loc.path, line=loc.line) for loc in call.locations or []] or None


def _content(items: list[_Item] | None) -> list[w.ToolCallContent] | None:
    if items is None:
        return None
    out: list[w.ToolCallContent] = []
    for item in items:
        if item.type == "content" and item.content is not None and item.content.type == "text":
            out.append(w.Content(content=w.TextContent(text=item.content.text or "")))
        elif item.type == "diff" and item.path is not None and item.new_text is not None:
            out.append(w.Diff(path=item.path, old_text=item.old_text, new_text=item.new_text))
    return out


def _title(text: str, limit: int) -> str:
    """One line of printable characters, at most `limit` long."""
    line = " ".join(text.split())
    line = "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in line)
    return line if len(line) <= limit else line[: limit - 1] + "…"
