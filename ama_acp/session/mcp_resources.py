"""The MCP servers' resources as two tools of the session (docs/tools.md "MCP resources"): `list_mcp_resources`
lists what the ready servers that advertise resources offer, `read_mcp_resource` reads one by server and URI.

Declared only while such a server is ready, so a session without one pays nothing for them in its prefix. Both
are of kind `read`: resources/read is the protocol's read of what the editor's server publishes for reading (a
tool is an action the server chose to offer; a resource is data), so like `read_file` it runs unasked in every
mode. Their results are bounded (mcp/resources.py) and, like every tool result, enter the context and the meter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ama_acp.errors import ToolError
from ama_acp.tools.base import JSONObject, Location, ToolKind, ToolResult

if TYPE_CHECKING:
    from ama_acp.mcp.hub import McpHub
    from ama_acp.tools.context import ToolContext

__all__ = ["LIST_RESOURCES", "READ_RESOURCE", "ListResourcesTool", "ReadResourceTool", "resource_tools"]

LIST_RESOURCES = "list_mcp_resources"
READ_RESOURCE = "read_mcp_resource"
MAX_URI = 8192  # characters of a URI the model may ask for: far past a real one


def _text_arg(args: dict[str, object], name: str) -> str | None:
    value = args.get(name)
    return value if isinstance(value, str) and value else None


class ListResourcesTool:
    name = LIST_RESOURCES
    description = (
        "List the resources (and resource templates) the editor's MCP servers offer: one line each, with its URI. "
        "Read one with read_mcp_resource. Give `server` to list one server's only."
    )
    parameters: JSONObject = {
        "type": "object",
        "properties": {"server": {"type": "string", "description": "Only this MCP server's resources."}},
    }
    kind: ToolKind = "read"

    def __init__(self, hub: McpHub) -> None:
        self._hub = hub

    def title(self, args: dict[str, object]) -> str:
        server = _text_arg(args, "server")
        return f"MCP resources of {server[:80]}" if server else "MCP resources"

    def locations(self, args: dict[str, object], cwd: str) -> list[Location]:
        return []

    def deadline_seconds(self, args: object) -> float:
        # One resources/list per server, each within `[mcp] call_timeout`.
        return self._hub.call_timeout * max(1, len(self._hub.resource_servers())) + 5.0

    async def run(self, args: dict[str, object], ctx: ToolContext) -> ToolResult:
        server = args.get("server")
        if server is not None and not isinstance(server, str):
            raise ToolError("`server` must be a string: an MCP server's name")
        return ToolResult(await self._hub.list_resources(server or None))


class ReadResourceTool:
    name = READ_RESOURCE
    description = (
        "Read one resource of an editor's MCP server by its URI (from list_mcp_resources, or filled in from one of "
        "its templates). Text comes back as text; binary contents are described, not shown."
    )
    parameters: JSONObject = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "The MCP server's name, as list_mcp_resources shows it."},
            "uri": {"type": "string", "description": "The resource's URI."},
        },
        "required": ["server", "uri"],
    }
    kind: ToolKind = "read"

    def __init__(self, hub: McpHub) -> None:
        self._hub = hub

    def title(self, args: dict[str, object]) -> str:
        server, uri = _text_arg(args, "server") or "?", _text_arg(args, "uri") or "?"
        shown = uri if len(uri) <= 120 else uri[:119] + "…"
        return f"{server[:80]}: read {shown}"

    def locations(self, args: dict[str, object], cwd: str) -> list[Location]:
        return []

    def deadline_seconds(self, args: object) -> float:
        return self._hub.call_timeout + 5.0

    async def run(self, args: dict[str, object], ctx: ToolContext) -> ToolResult:
        server, uri = _text_arg(args, "server"), _text_arg(args, "uri")
        if server is None or uri is None:
            raise ToolError("read_mcp_resource needs `server` and `uri`, both non-empty strings")
        if len(uri) > MAX_URI:
            raise ToolError(f"the URI is {len(uri)} characters long; at most {MAX_URI} are read")
        read = await self._hub.read_resource(server, uri)
        return ToolResult(read.text, images=read.images)


def resource_tools(hub: McpHub) -> list[ListResourcesTool | ReadResourceTool]:
    """The two tools, while a ready server advertises resources; none otherwise."""
    if not hub.resource_servers():
        return []
    return [ListResourcesTool(hub), ReadResourceTool(hub)]
