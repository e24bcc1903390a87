"""write_file: create a file or replace its whole content."""

from __future__ import annotations

from typing import TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import (
    FILE_PATH_PARAM,
    arg_str,
    count_lines,
    diff_too_big,
    display_path,
    first_changed_line,
    make_diff,
    os_errors_as_tool_errors,
    path_locations,
    plural,
    refuse_git_internals,
    require_regular,
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
    parameters: JSONObject = {
        "type": "object",
        "properties": {
            "path": FILE_PATH_PARAM,
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }

    def title(self, args: ToolArgs) -> str:
        return f"Write {arg_str(args, 'path', 'file')}"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return path_locations(args, cwd)

    @os_errors_as_tool_errors
    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, WriteArgs)
        resolved = ctx.resolve(checked["path"])
        path = resolved.path
        content = checked["content"]
        shown = display_path(path, ctx.cwd)
        refuse_git_internals(resolved, shown)
        st = await ctx.workspace.stat(path)
        if st is not None and st.is_dir:
            raise ToolError(f"{shown} is a directory.")
        require_regular(resolved, st, shown, "written")

        old: str | None = None
        replaced_binary = False
        if st is not None:
            try:
                old = await ctx.workspace.read_text(path)
            except BinaryFileError:
                replaced_binary = True
            except FileNotFoundError:
                old = None
        await ctx.workspace.write_text(path, content)

        lines = plural(count_lines(content), "line")
        if st is None:
            text = f"Created {shown} ({lines})."
        elif replaced_binary:
            text = f"Replaced the binary file {shown} with text ({lines})."
        elif old == content:
            text = f"{shown} already had this content; nothing changed."
        else:
            text = f"Wrote {shown} ({lines}; it had {count_lines(old or '')})."
        # A binary original has no text to show as the old side: no diff rather than a false "new file".
        diffs = [] if replaced_binary else make_diff(path, old, content)
        if not replaced_binary and diff_too_big(old, content):
            text += " (No diff shown: the file is larger than 256 KiB.)"
        line = first_changed_line(old, content)
        return ToolResult(text=text, diffs=diffs, locations=[Location(path, line)])
