"""read_file: a file's lines, numbered, a window at a time."""

from __future__ import annotations

import mimetypes
from typing import NotRequired, TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import (
    FILE_PATH_PARAM,
    arg_int,
    arg_str,
    display_path,
    human_size,
    missing_file_error,
    os_errors_as_tool_errors,
    path_locations,
    require_regular,
    validate,
)
from ama_acp.tools.context import ToolContext, result_chars
from ama_acp.tools.workspace import BinaryFileError

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
# Above this a file is read only in slices, streamed, never whole.
HUGE_FILE_BYTES = 10 * 1024 * 1024
# What one call may hand the model, whatever the line count (about 25k tokens).
MAX_OUTPUT_CHARS = 100_000


class ReadArgs(TypedDict):
    path: str
    offset: NotRequired[int]
    limit: NotRequired[int]


class ReadTool:
    name = "read_file"
    kind: ToolKind = "read"
    description = (
        "Read a text file from the workspace. Returns its lines numbered from 1 ('     7\\tcode'); the numbers "
        "are not part of the file. Reads up to 2000 lines from `offset`; for longer files the result says how "
        "to continue. Use it before editing a file, and prefer reading the relevant part of a large file (find "
        "it with `search`) over reading everything. Directories: use list_dir."
    )
    parameters: JSONObject = {
        "type": "object",
        "properties": {
            "path": FILE_PATH_PARAM,
            "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Default 1."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"How many lines to read. Default {DEFAULT_LIMIT}.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def title(self, args: ToolArgs) -> str:
        path = arg_str(args, "path", "file")
        offset, limit = arg_int(args, "offset"), arg_int(args, "limit")
        if limit:
            start = offset or 1
            return f"Read {path} (lines {start}–{start + limit - 1})"
        if offset:
            return f"Read {path} (from line {offset})"
        return f"Read {path}"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return path_locations(args, cwd, line=arg_int(args, "offset"))

    @os_errors_as_tool_errors
    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, ReadArgs)
        resolved = ctx.resolve(checked["path"])
        path = resolved.path
        shown = display_path(path, ctx.cwd)
        st = await ctx.workspace.stat(path)
        if st is None:
            raise await missing_file_error(ctx.workspace, path, ctx.cwd)
        if st.is_dir:
            raise ToolError(f"{shown} is a directory. Use list_dir to see what it holds.")
        require_regular(resolved, st, shown, "read")
        sliced = "offset" in checked or "limit" in checked
        offset = checked.get("offset", 1)
        limit = checked.get("limit", DEFAULT_LIMIT)
        huge = st.size > HUGE_FILE_BYTES
        if huge and not sliced:
            raise ToolError(
                f"{shown} is {human_size(st.size)}, too large to read whole. Read a part with `offset` and "
                f"`limit` (for example offset=1, limit={DEFAULT_LIMIT}), or find the lines you need with search."
            )

        try:
            # One line beyond the window tells whether more follows without counting the whole huge file.
            if huge:
                text = await ctx.workspace.read_text(path, offset, limit + 1)
            else:
                text = await ctx.workspace.read_text(path)
        except BinaryFileError:
            kind = mimetypes.guess_type(path)[0] or "binary data"
            return ToolResult(
                text=f"{shown} is a binary file ({kind}, {human_size(st.size)}); it cannot be shown as text.",
                locations=[Location(path)],
            )
        except FileNotFoundError:
            raise await missing_file_error(ctx.workspace, path, ctx.cwd) from None

        lines = _split_lines(text)
        if huge:
            window, more, total = lines[:limit], len(lines) > limit, None
        else:
            total = len(lines)
            if total == 0:
                return ToolResult(text=f"{shown} is empty.", locations=[Location(path)])
            if offset > total:
                raise ToolError(f"offset {offset} is past the end: {shown} has {total} lines.")
            window = lines[offset - 1 : offset - 1 + limit]
            more = offset - 1 + len(window) < total
        if not window:
            raise ToolError(f"offset {offset} is past the end of {shown}.")

        room = result_chars.get()
        cap = MAX_OUTPUT_CHARS if room is None else max(min(room, MAX_OUTPUT_CHARS), 1)
        body, shown_count = _number(window, offset, cap)
        last = offset + shown_count - 1
        capped = shown_count < len(window)
        if capped or more:
            of = f" of {total}" if total is not None else f" of a {human_size(st.size)} file"
            why = ""
            if capped:
                why = " (output size limit)" if cap == MAX_OUTPUT_CHARS else " (cut to fit the model's context window)"
            body += (
                f"\n\n[Showing lines {offset}–{last}{of}{why}. To read more, call read_file with offset={last + 1}.]"
            )
        return ToolResult(text=body, locations=[Location(path, offset)])


def _split_lines(text: str) -> list[str]:
    # Only "\n" ends a line (as in editors); str.splitlines would also split on \f, \x1c, U+2028, ...
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _number(lines: list[str], first: int, cap: int = MAX_OUTPUT_CHARS) -> tuple[str, int]:
    """Numbered lines, cut to `cap` characters (at least one line); returns the text and how many lines it
    holds."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        line = line.removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]} … [line cut: {len(line)} characters]"
        entry = f"{first + i:6d}\t{line}"
        if out and used + len(entry) + 1 > cap:
            break
        out.append(entry)
        used += len(entry) + 1
    return "\n".join(out), len(out)
