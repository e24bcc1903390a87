"""The tools every test server offers, on one `MCPServer`.

`MCP_TEST_DIR` (environment; `build_server(test_dir=...)` for a server in the test's own process) is where
`write_note` writes and where `slow` leaves its markers, so a test can see what the server did (a note written,
a call that started, a call that was cancelled).

The SDK is imported by `build_server`, not by this module: `PIXEL_PNG` is read by test modules that every pytest
worker collects, where importing `mcp` would cost about a second of CPU each.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import CallToolResult

# A 1x1 transparent PNG: a real image, small enough to compare whole.
PIXEL_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


def _env_test_dir() -> Path:
    # Without one, the system's temp directory: never the working directory (the repository, in tests).
    return Path(os.environ.get("MCP_TEST_DIR") or tempfile.gettempdir())


def build_server(name: str = "testserver", *, test_dir: Path | None = None, in_process: bool = False) -> MCPServer:
    """The server. `test_dir` overrides `MCP_TEST_DIR`; `in_process` (a server in a thread of the test's
    process) makes `crash` fail its call instead of ending the process, which is the test runner's."""
    global Context, CallToolResult  # the tools' annotations are resolved in this module's namespace
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import (
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        TextContent,
        TextResourceContents,
        ToolAnnotations,
    )

    def _test_dir() -> Path:
        return test_dir if test_dir is not None else _env_test_dir()

    server = MCPServer(name, log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def echo(text: str) -> str:
        """Return the text as given."""
        return text

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def pid() -> str:
        """The server's process id (the tests check the process is gone after close)."""
        return str(os.getpid())

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def environ() -> str:
        """The names of the server's environment variables, one a line, and LANG's value."""
        return "\n".join(sorted(os.environ)) + f"\nLANG={os.environ.get('LANG', '')}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False), structured_output=False)
    def write_note(name: str, text: str) -> str:
        """Write a note file into the test directory."""
        target = _test_dir() / Path(name).name
        target.write_text(text, encoding="utf-8")
        return f"wrote {target.name}"

    @server.tool(structured_output=False)
    async def slow(seconds: float = 60.0, tag: str = "slow") -> str:
        """Sleep, leaving `<tag>.started` and (when cancelled) `<tag>.cancelled` in the test directory."""
        (_test_dir() / f"{tag}.started").write_text("started", encoding="utf-8")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            (_test_dir() / f"{tag}.cancelled").write_text("cancelled", encoding="utf-8")
            raise
        return f"slept {seconds}"

    @server.tool(structured_output=False)
    def fail(why: str = "it failed on purpose") -> CallToolResult:
        """A tool that reports its own failure (isError)."""
        return CallToolResult(content=[TextContent(text=why)], is_error=True)

    @server.tool(structured_output=False)
    def crash() -> str:
        """The process exits in the middle of the call."""
        if in_process:
            raise RuntimeError("crash: a server in the test's process does not end it")
        sys.stderr.write("crash: exiting mid-call\n")
        sys.stderr.flush()
        os._exit(7)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def image() -> CallToolResult:
        """An image content item (and a line of text)."""
        return CallToolResult(
            content=[TextContent(text="a pixel"), ImageContent(data=PIXEL_PNG, mime_type="image/png")]
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def resource() -> CallToolResult:
        """An embedded text resource."""
        contents = TextResourceContents(uri="file:///notes/readme.txt", mime_type="text/plain", text="resource body")
        return CallToolResult(content=[EmbeddedResource(resource=contents)])

    @server.tool(structured_output=False)
    async def add_tool(name: str, ctx: Context) -> str:
        """Register another tool (`name`, an echo) and tell the client the list changed."""

        def extra(text: str) -> str:
            return f"{name}: {text}"

        server.add_tool(extra, name=name, description=f"added at run time: {name}", structured_output=False)
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    return server
