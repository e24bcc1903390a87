"""read_file: a file's lines, numbered, a window at a time."""

from __future__ import annotations

import mimetypes
from typing import NotRequired, TypedDict

import msgspec

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import (
    FILE_PATH_PARAM,
    Target,
    arg_int,
    arg_str,
    closed_object,
    human_size,
    locate,
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
    parameters: JSONObject = closed_object(
        {
            "path": FILE_PATH_PARAM,
            "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Default 1."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"How many lines to read. Default {DEFAULT_LIMIT}.",
            },
        },
        "path",
    )

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
        target = await locate(ctx, checked["path"])
        path, shown = target.path, target.shown
        size = await _readable_size(ctx, target)
        offset = checked.get("offset", 1)
        limit = checked.get("limit", DEFAULT_LIMIT)
        huge = size > HUGE_FILE_BYTES
        if huge and "offset" not in checked and "limit" not in checked:
            raise ToolError(
                f"{shown} is {human_size(size)}, too large to read whole. Read a part with `offset` and "
                f"`limit` (for example offset=1, limit={DEFAULT_LIMIT}), or find the lines you need with search."
            )
        try:
            # One line beyond the window tells whether more follows without counting the whole huge file.
            text = await _read(ctx, path, (offset, limit + 1) if huge else None)
        except BinaryFileError:
            return ToolResult(text=_binary_note(target, size), locations=[Location(path)])

        lines = _split_lines(text)
        total = None if huge else len(lines)
        if total == 0:
            return ToolResult(text=f"{shown} is empty.", locations=[Location(path)])
        window = _window(lines, offset, limit, total, shown)
        # A huge file was read only in part: its size stands for the line count no one counted.
        of = f" of a {human_size(size)} file" if total is None else f" of {total}"
        return ToolResult(text=_numbered(window, offset, of), locations=[Location(path, offset)])


async def _readable_size(ctx: ToolContext, target: Target) -> int:
    """The size of the regular file `target` names; a ToolError when it is missing, a directory or special."""
    st = target.stat
    if st is None:
        raise await missing_file_error(ctx.workspace, target.path, ctx.cwd)
    if st.is_dir:
        raise ToolError(f"{target.shown} is a directory. Use list_dir to see what it holds.")
    require_regular(target.resolved, st, target.shown, "read")
    return st.size


def _binary_note(target: Target, size: int) -> str:
    kind = mimetypes.guess_type(target.path)[0] or "binary data"
    return f"{target.shown} is a binary file ({kind}, {human_size(size)}); it cannot be shown as text."


async def _read(ctx: ToolContext, path: str, part: tuple[int, int] | None) -> str:
    """The file's text, or only `part` (first line, line count) of it. BinaryFileError for binary data."""
    try:
        if part is None:
            return await ctx.workspace.read_text(path)
        return await ctx.workspace.read_text(path, *part)
    except FileNotFoundError:
        raise await missing_file_error(ctx.workspace, path, ctx.cwd) from None


class _Window(msgspec.Struct, frozen=True):
    lines: list[str]
    more: bool  # lines follow the window


def _window(lines: list[str], offset: int, limit: int, total: int | None, shown: str) -> _Window:
    """The lines to show from `offset`. `lines`: the whole file (`total` its line count), or for a huge file
    (`total` None) what was read from `offset` on, one line beyond `limit`."""
    if total is None:
        window = _Window(lines[:limit], len(lines) > limit)
    else:
        if offset > total:
            raise ToolError(f"offset {offset} is past the end: {shown} has {total} lines.")
        cut = lines[offset - 1 : offset - 1 + limit]
        window = _Window(cut, offset - 1 + len(cut) < total)
    if not window.lines:
        raise ToolError(f"offset {offset} is past the end of {shown}.")
    return window


def _numbered(window: _Window, offset: int, of: str) -> str:
    """The window's lines numbered, cut to what the model may take, with a note on how to read on when there
    is more. `of`: " of N" lines of the file, for the note."""
    room = result_chars.get()
    cap = MAX_OUTPUT_CHARS if room is None else max(min(room, MAX_OUTPUT_CHARS), 1)
    body, shown_count = _number(window.lines, offset, cap)
    capped = shown_count < len(window.lines)
    if not capped and not window.more:
        return body
    last = offset + shown_count - 1
    why = ""
    if capped:
        why = " (output size limit)" if cap == MAX_OUTPUT_CHARS else " (cut to fit the model's context window)"
    return body + f"\n\n[Showing lines {offset}–{last}{of}{why}. To read more, call read_file with offset={last + 1}.]"


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
