"""What an agent sends, as lines of text: content blocks, diffs, the details of a permission request, a config
option's value. Every string an agent sends passes through `terminal_safe` (ama_acp/textsafe.py: controls made
visible, `^[` for ESC) before it is shown — the renderer does that to each payload first; a field shown on a
line with others goes through `field` (`one_line`) as well.
"""

from __future__ import annotations

import difflib

from ama_acp.client.display.agent_types import UNSET, ContentBlock, ResourceRef, ToolCallContent, lenient
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.textsafe import one_line

MAX_TEXT_LINES = 8
MAX_DIFF_LINES = 60


def as_list(value: object) -> list[JSONValue]:
    """`value` if it is a list, else none: an agent's array field may be anything (`"options": 5`)."""
    return value if isinstance(value, list) else []


def objects(value: object) -> list[JSONObject]:
    """The members of an agent's array that are objects (the others are junk: skipped)."""
    return [item for item in as_list(value) if isinstance(item, dict)]


def field(value: object) -> str:
    """An agent's value shown inside a line (a name, a title, a stop reason): one line, controls visible."""
    return one_line(str(value))


def block_text(block: object) -> str:
    """A content block as text: the text itself, or a short placeholder for other kinds."""
    if not isinstance(block, dict):
        return ""
    given = lenient(ContentBlock, block)
    match given.type:
        case "text":
            return str(given.text)
        case "image" | "audio":
            return f"[{given.type} {given.mime_type}]".replace(" ]", "]")
        case "resource_link":
            return f"[link {given.name} {given.uri}]"
        case "resource":
            res = given.resource
            return f"[resource {lenient(ResourceRef, res).uri if isinstance(res, dict) else ''}]"
    return f"[{given.type}]"


def compact_diff(path: str, old: str | None, new: str, max_lines: int = MAX_DIFF_LINES) -> list[str]:
    """A short unified diff (one line of context); every line `+` for a new file."""
    if old is None:
        body = ["+" + line for line in new.splitlines()]
    else:
        body = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=1, lineterm=""))[2:]
    if len(body) > max_lines:
        body = body[:max_lines] + [f"… {len(body) - max_lines} more diff lines"]
    return body


def clip_lines(text: str, limit: int = MAX_TEXT_LINES) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= limit:
        return lines
    head, tail = limit // 2, limit - limit // 2 - 1
    return lines[:head] + [f"… {len(lines) - head - tail} more lines"] + lines[len(lines) - tail :]


def permission_details(tool_call: object) -> list[str]:
    """What a permission request asks about, beyond its title: the text it carries (the whole command) and
    the diff an edit or write would apply — so the person judges the call itself, not a summary."""
    if not isinstance(tool_call, dict):
        return []
    lines: list[str] = []
    for item in objects(tool_call.get("content")):
        given = lenient(ToolCallContent, item)
        if given.type == "diff" and isinstance(given.new_text, str):
            path = "" if given.path is UNSET else str(given.path)
            lines.append(path)
            lines += compact_diff(path, given.old_text, given.new_text)
        elif given.type == "content" and isinstance(given.content, dict):
            text = given.content.get("text")
            if isinstance(text, str):
                lines += clip_lines(text)
    return lines


def flat_options(options: object) -> list[JSONObject]:
    """A select option's choices, groups (`{"group", "options": [...]}`) flattened; anything not an object dropped."""
    flat: list[JSONObject] = []
    for item in objects(options):
        group = item.get("options")
        if isinstance(group, list):
            flat.extend(o for o in group if isinstance(o, dict))
        else:
            flat.append(item)
    return flat


def option_value(option: JSONObject) -> str:
    """A config option's current value as shown: `on`/`off` for a boolean, `Name (value)` for a named choice."""
    value = option.get("currentValue")
    if isinstance(value, bool):
        return "on" if value else "off"
    for choice in flat_options(option.get("options")):
        name = choice.get("name")
        if choice.get("value") == value and name and name != value:
            return f"{name} ({value})"
    return str(value)
