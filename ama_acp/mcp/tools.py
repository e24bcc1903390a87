"""An MCP server's tools as the model sees them: names both providers accept, bounded descriptions.

Anthropic and OpenAI both require a tool name to match ^[a-zA-Z0-9_-]{1,64}$. A server's own names may hold
dots, slashes, spaces or anything else, and two servers may offer the same tool, so every tool gets a wire
name `mcp__<server>__<tool>` made of allowed characters, clipped to 64, and made unique in the session.
"""

from __future__ import annotations

import hashlib
import re

import msgspec

from ama_acp.tools.base import JSONObject

__all__ = [
    "DESCRIPTION_BUDGET",
    "MAX_SCHEMA_BYTES",
    "MAX_SERVER_DECLARATION_BYTES",
    "MAX_TOOLS_PER_SERVER",
    "WIRE_NAME_PATTERN",
    "McpTool",
    "cap_declarations",
    "sanitize",
    "tools_from_listing",
    "wire_names",
]

WIRE_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_WIRE_NAME = 64
PREFIX = "mcp__"
SEPARATOR = "__"
# The server part keeps at most this much when the whole name is too long, so the tool's own name (what
# tells the model what the tool does) keeps the rest.
SERVER_PART_WHEN_CLIPPED = 16
# Characters of a description the model reads (each tool's declaration is sent with every request).
DESCRIPTION_BUDGET = 1024
# A server offering more than this is broken or hostile; the rest are left out (and logged by the hub).
MAX_TOOLS_PER_SERVER = 512
# Every declaration goes into the prefix of every request: a server may not fill the window with schemas. One
# tool's input schema (as JSON) at most MAX_SCHEMA_BYTES, and all of one server's declarations (name,
# description, schema) at most MAX_SERVER_DECLARATION_BYTES; past either, tools are left out and the person told.
MAX_SCHEMA_BYTES = 64 * 1024
MAX_SERVER_DECLARATION_BYTES = 256 * 1024

_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]+")


class McpTool(msgspec.Struct, frozen=True):
    server: str
    name: str  # the server's own tool name: what tools/call sends
    wire_name: str  # what the model calls it
    description: str
    input_schema: JSONObject  # an object schema (`object_schema`), as the server listed it
    read_only: bool  # annotations.readOnlyHint is true
    title: str | None = None


def sanitize(text: str) -> str:
    """Runs of characters providers refuse become one `_`; an empty result becomes `_`."""
    return _NOT_ALLOWED.sub("_", text) or "_"


def _base(server: str, tool: str) -> str:
    server_part, tool_part = sanitize(server), sanitize(tool)
    name = f"{PREFIX}{server_part}{SEPARATOR}{tool_part}"
    if len(name) <= MAX_WIRE_NAME:
        return name
    server_part = server_part[:SERVER_PART_WHEN_CLIPPED]
    room = MAX_WIRE_NAME - len(PREFIX) - len(server_part) - len(SEPARATOR)
    return f"{PREFIX}{server_part}{SEPARATOR}{tool_part[:room]}"


def wire_names(server: str, names: list[str], taken: set[str]) -> list[str]:
    """A wire name for each of `names` (in order), none in `taken` and none twice.

    A name that collides (after sanitising or clipping) ends in a short hash of the server's own names, so
    the same tool keeps the same wire name across a re-listing; a counter settles the (hostile) rest.
    """
    used = set(taken)
    out: list[str] = []
    for tool in names:
        name = _base(server, tool)
        if name in used:
            digest = hashlib.sha256(f"{server}\x00{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:8]
            name = f"{name[: MAX_WIRE_NAME - 9]}_{digest}"
            counter = 2
            while name in used:
                suffix = f"_{counter}"
                name = f"{name[: MAX_WIRE_NAME - len(suffix)]}{suffix}"
                counter += 1
        used.add(name)
        out.append(name)
    return out


def clip_description(text: str, budget: int = DESCRIPTION_BUDGET) -> str:
    return text if len(text) <= budget else text[: budget - 1] + "…"


def object_schema(schema: object) -> JSONObject:
    """The input schema as given when it describes an object; anything else becomes `{"type": "object"}`
    (providers refuse a tool whose parameters are not an object schema)."""
    if not isinstance(schema, dict):
        return {"type": "object"}
    kind = schema.get("type")
    if kind == "object":
        return schema
    if kind is None and isinstance(schema.get("properties"), dict):
        return {"type": "object", **schema}
    return {"type": "object"}


def tools_from_listing(server: str, raw_tools: object, taken: set[str]) -> tuple[list[McpTool], list[str]]:
    """The entries of a tools/list result (JSON, already decoded) → McpTools with wire names not in `taken`,
    in the server's order; and a line for the log about each entry left out (no name, a repeated name, over
    the limit)."""
    if not isinstance(raw_tools, list):
        return [], ["the tool list is not a list"]
    dropped: list[str] = []
    entries = named_entries(raw_tools, "tool", MAX_TOOLS_PER_SERVER, dropped)
    names = wire_names(server, [name for name, _ in entries], taken)
    return [_tool(server, wire, *entry) for wire, entry in zip(names, entries, strict=True)], dropped


def named_entries(
    raw: list[object], kind: str, cap: int, dropped: list[str], max_name: int | None = None
) -> list[tuple[str, dict[str, object]]]:
    """(the server's name for it, its entry) for each entry of a tools/prompts listing kept, in the server's
    order: at most `cap`, the first of a name listed twice; a line in `dropped` for each left out. `kind` names
    the entries in those lines ("tool", "prompt")."""
    entries: list[tuple[str, dict[str, object]]] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(name, str) or not name or len(name) > (max_name or len(name)):
            dropped.append(f"{kind} #{index + 1} has no usable name")
            continue
        if name in seen:
            dropped.append(f"{kind} {name[:80]!r} is listed twice (the first is kept)")
            continue
        if len(entries) >= cap:
            dropped.append(f"more than {cap} {kind}s: {len(raw) - index} left out")
            break
        seen.add(name)
        entries.append((name, item))
    return entries


def _tool(server: str, wire_name: str, name: str, raw: dict[str, object]) -> McpTool:
    description = raw.get("description")
    annotations = raw.get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    title = raw.get("title")
    if not isinstance(title, str) or not title:
        title = annotations.get("title") if isinstance(annotations.get("title"), str) else None
    return McpTool(
        server=server,
        name=name,
        wire_name=wire_name,
        description=clip_description(description if isinstance(description, str) else ""),
        input_schema=object_schema(raw.get("inputSchema")),
        read_only=annotations.get("readOnlyHint") is True,
        title=title or None,
    )


def _size(value: object) -> int | None:
    """Bytes of a value as JSON; None for one that cannot be encoded (too deep, not JSON)."""
    try:
        return len(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        return None


def _shown(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB" if size >= 1024 * 1024 else f"{size / 1024:.0f} KiB"


def cap_declarations(
    server: str,
    tools: list[McpTool],
    *,
    schema_limit: int = MAX_SCHEMA_BYTES,
    server_limit: int = MAX_SERVER_DECLARATION_BYTES,
) -> tuple[list[McpTool], str | None]:
    """The tools whose declarations fit the caps, in the server's order, and (when some were left out) one
    sentence for the person naming the server, the tools and the sizes."""
    kept: list[McpTool] = []
    big: list[str] = []
    over: list[str] = []
    total = 0
    for tool in tools:
        schema = _size(tool.input_schema)
        if schema is None or schema > schema_limit:
            size = "cannot be encoded" if schema is None else _shown(schema)
            big.append(f"{tool.name[:80]!r} ({size})")
            continue
        declaration = schema + len(tool.wire_name) + len(tool.description.encode("utf-8", "replace")) + 64
        if total + declaration > server_limit:
            over.append(repr(tool.name[:80]))
            continue
        total += declaration
        kept.append(tool)
    if not big and not over:
        return kept, None
    return kept, _left_out(server, big, over, schema_limit, server_limit)


def _left_out(server: str, big: list[str], over: list[str], schema_limit: int, server_limit: int) -> str:
    """The sentence for the person: which tools' declarations were too large, and why."""
    parts: list[str] = []
    if big:
        parts.append(
            f"input schemas over {_shown(schema_limit)}: {', '.join(big[:10])}" + (" …" if len(big) > 10 else "")
        )
    if over:
        parts.append(
            f"past the {_shown(server_limit)} its declarations may take in every request: "
            + ", ".join(over[:10])
            + (f" and {len(over) - 10} more" if len(over) > 10 else "")
        )
    return f"MCP server {server!r}: tools left out, their declarations are too large ({'; '.join(parts)})."
