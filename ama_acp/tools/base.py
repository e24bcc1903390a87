"""The tool interface. One tool a module; each declares its JSON schema, its ACP tool kind and how to
describe a call to a person. Tools touch files and processes only through a `Workspace`, so the same tool
runs against the local disk or the editor's buffers and terminals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import msgspec

# Re-exported (`as`): callers import it from here.
from ama_acp.conversation.messages import ImagePart
from ama_acp.errors import ToolError as ToolError

if TYPE_CHECKING:  # tools/context.py stands on the workspace; the interface need not import it
    from ama_acp.tools.context import ToolContext

# How long a tool call may take unless the tool says otherwise (tools.registry.run_with_deadline).
DEFAULT_DEADLINE_SECONDS = 60.0

# A JSON value: a tool's schema as written, an MCP server's as listed.
JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject = dict[str, JSONValue]

# A call's arguments as the model wrote them: a JSON object, of any shape until the tool checks it (`run` does,
# with tools.common.validate, into the tool's own TypedDict; `title` and `locations` read them defensively).
ToolArgs = dict[str, object]

# ACP ToolKind values.
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]


class Location(msgspec.Struct, frozen=True, omit_defaults=True):
    path: str  # absolute
    line: int | None = None  # 1-based


class FileDiff(msgspec.Struct, frozen=True):
    path: str
    old_text: str | None  # None: the file is new
    new_text: str


class ToolResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a tool returns. `text` goes to the model in full; the editor sees its first 4 KB."""

    text: str
    is_error: bool = False
    diffs: list[FileDiff] = []
    locations: list[Location] = []
    # A todo tool sets this to the whole list: [{"content", "status", "priority"}].
    plan: list[dict[str, str]] | None = None
    # Images the tool returned (an MCP server's image content): to the model with the text, and to the editor.
    images: list[ImagePart] = []


class Tool(Protocol):
    name: str
    description: str
    parameters: JSONObject  # the JSON schema of the arguments object
    kind: ToolKind

    def title(self, args: ToolArgs) -> str:
        """A line a person understands: 'Read src/app.py', 'Run pytest -q'. Never raises, whatever `args` hold."""
        ...

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]: ...

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult: ...


@runtime_checkable
class HasDeadline(Protocol):
    """A tool whose time limit depends on its arguments (run_command: its own `timeout` plus the kill)."""

    def deadline_seconds(self, args: object) -> float:
        """Never raises, whatever `args` hold: it runs before the arguments are checked."""
        ...
