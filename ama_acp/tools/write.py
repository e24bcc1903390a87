"""write_file: create a file or replace its whole content."""

from __future__ import annotations

from typing import TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolKind, ToolResult
from ama_acp.tools.common import (
    FILE_PATH_PARAM,
    Target,
    arg_str,
    closed_object,
    count_lines,
    diff_too_big,
    file_to_change,
    first_changed_line,
    make_diff,
    os_errors_as_tool_errors,
    path_locations,
    plural,
    validate,
)
from ama_acp.tools.context import ToolContext
from ama_acp.tools.workspace import BinaryFileError


class WriteArgs(TypedDict):
    path: str
    content: str


class WriteTool:
    name = "write_file"
    kind: ToolKind = "edit"
    description = (
        "Write a file: create it, or replace everything in it. Missing parent directories are created. For "
        "changes to an existing file prefer edit_file, which sends only the changed parts; read a file before "
        "overwriting it. `content` is written exactly as given (no line numbers)."
    )
    parameters: JSONObject = closed_object(
        {
            "path": FILE_PATH_PARAM,
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "path",
        "content",
    )

    def title(self, args: ToolArgs) -> str:
        return f"Write {arg_str(args, 'path', 'file')}"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return path_locations(args, cwd)

    @os_errors_as_tool_errors
    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, WriteArgs)
        content = checked["content"]
        target = await file_to_change(ctx, checked["path"], "written")
        old, replaced_binary = await _old_content(ctx, target)
        await ctx.workspace.write_text(target.path, content)

        text = _summary(target, old, replaced_binary, content)
        # A binary original has no text to show as the old side: no diff rather than a false "new file".
        diffs = [] if replaced_binary else make_diff(target.path, old, content)
        if not replaced_binary and diff_too_big(old, content):
            text += " (No diff shown: the file is larger than 256 KiB.)"
        line = first_changed_line(old, content)
        return ToolResult(text=text, diffs=diffs, locations=[Location(target.path, line)])


async def _old_content(ctx: ToolContext, target: Target) -> tuple[str | None, bool]:
    """The text the file holds before the write (None: none), and whether it held binary data instead."""
    if target.stat is None:
        return None, False
    try:
        return await ctx.workspace.read_text(target.path), False
    except BinaryFileError:
        return None, True
    except FileNotFoundError:
        return None, False


def _summary(target: Target, old: str | None, replaced_binary: bool, content: str) -> str:
    lines = plural(count_lines(content), "line")
    if target.stat is None:
        return f"Created {target.shown} ({lines})."
    if replaced_binary:
        return f"Replaced the binary file {target.shown} with text ({lines})."
    if old == content:
        return f"{target.shown} already had this content; nothing changed."
    return f"Wrote {target.shown} ({lines}; it had {count_lines(old or '')})."
