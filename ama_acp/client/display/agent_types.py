"""What the client shows of an agent's messages, as lenient msgspec structs.

An agent is someone else's program: any member may be missing, of another type, or joined by members of
its own. Each struct here is read with `lenient()`: unknown members are ignored, a missing one takes its
default, and a member of the wrong type reads as missing — so junk in one member never hides the others.
A member the client shows whatever it holds (`str()` of it, as an editor would print it) is typed `object`;
a nested object is typed `object` too and read with `lenient()` where it is used, so that junk inside it
stays inside it. `UNSET` marks members whose absence means something else than `null`.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["UNSET", "UnsetType", "lenient"]


class Lenient(msgspec.Struct, rename="camel", kw_only=True):
    """Every member optional; names in camelCase on the wire."""


S = TypeVar("S", bound=Lenient)


def lenient(cls: type[S], value: object) -> S:
    """`value` read as a `cls`; anything that is not an object reads as an empty one."""
    if not isinstance(value, dict):
        return cls()
    try:
        return msgspec.convert(value, cls)
    except (msgspec.ValidationError, UnicodeError):  # UnicodeError: a lone surrogate (`"\ud800"` in the JSON)
        pass
    # Some member has the wrong type (or text no UTF-8 can hold): keep those that are right, each checked alone.
    kept = {}
    for info in msgspec.structs.fields(cls):
        name = info.encode_name
        if name in value:
            try:
                msgspec.convert({name: value[name]}, cls)
            except (msgspec.ValidationError, UnicodeError):
                continue
            kept[name] = value[name]
    return msgspec.convert(kept, cls)


# --- content ---------------------------------------------------------------------------------------------


class ContentBlock(Lenient):
    type: object = None
    text: object = ""
    mime_type: object = ""
    name: object = ""
    uri: object = ""
    resource: object = None  # an embedded resource: `uri` is read from it


class ResourceRef(Lenient):
    uri: object = ""


class ToolCallContent(Lenient):
    """An item of a tool call's `content`: a content block, a diff or a client terminal."""

    type: object = None
    content: object = None  # type "content": a ContentBlock
    path: object = UNSET  # type "diff"
    old_text: str | None = None  # None: a new file
    new_text: object = UNSET
    terminal_id: object = None  # type "terminal"


# --- session/update ------------------------------------------------------------------------------------------


class ContentChunk(Lenient):
    content: object = None
    message_id: object = None


class ToolCall(Lenient):
    """tool_call and tool_call_update (the update's members all optional)."""

    tool_call_id: object = None
    title: object = None
    kind: object = None
    status: object = None
    content: object = None  # a list of ToolCallContent


class PlanEntry(Lenient):
    content: object = ""
    status: object = None


class Plan(Lenient):
    """plan_update's `plan`: its entries (type `items`), or a document elsewhere (`uri`) or inline."""

    type: object = None
    entries: object = None
    uri: object = None
    content: object = ""


class CurrentMode(Lenient):
    current_mode_id: object = None


class SessionInfo(Lenient):
    title: object = UNSET  # null is a title too (the agent cleared it)


class AvailableCommand(Lenient):
    name: object = None


class Notice(Lenient):
    severity: object = "info"
    title: object = ""
    description: object = None


class Compaction(Lenient):
    status: object = None
    error: object = None
    summary: object = None  # a list of ContentBlock


# --- usage_update (the meter) -----------------------------------------------------------------------------------


class Cost(Lenient):
    amount: int | float | None = None
    currency: object = None


class Usage(Lenient):
    used: int | None = None
    size: int | None = None
    cost: object = None
    meta: object = msgspec.field(default=None, name="_meta")


class AmaMeta(Lenient):
    """`_meta.ama` of a usage_update: where ama's figure came from, and the tier it is in."""

    source: str | None = None
    tier: object = None
    cost_lower_bound: object = None  # `costLowerBound`: what was spent at least, while `cost` is null


# --- session/list -------------------------------------------------------------------------------------------


class ListedSession(Lenient):
    session_id: str = ""
    updated_at: str | None = None
    title: str | None = None
    cwd: str | None = None
