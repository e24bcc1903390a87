"""list_dir: one directory's entries."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import (
    DirectoryTool,
    Target,
    arg_str,
    closed_object,
    directory_path_param,
    human_size,
    plural,
)
from ama_acp.tools.context import ToolContext
from ama_acp.tools.workspace import DirEntry

MAX_ENTRIES = 500


class ListArgs(TypedDict):
    path: NotRequired[str]


class ListTool(DirectoryTool[ListArgs]):
    name = "list_dir"
    kind: ToolKind = "read"
    description = (
        "List the entries of one directory (not recursive): subdirectories first, marked with a trailing '/', "
        "then files with their sizes. To find files by name across the tree use find_files."
    )
    parameters: JSONObject = closed_object(
        {
            "path": directory_path_param("Directory, absolute or relative to the working directory."),
        },
    )
    checked_as = ListArgs

    def title(self, args: ToolArgs) -> str:
        return f"List {arg_str(args, 'path') or '.'}"

    async def look(self, checked: ListArgs, target: Target, ctx: ToolContext) -> ToolResult:
        path, shown = target.path, target.shown
        if target.stat is None:
            raise ToolError(f"Directory not found: {shown}.")
        if not target.stat.is_dir:
            raise ToolError(f"{shown} is a file, not a directory. Use read_file to read it.")
        try:
            entries = await ctx.workspace.list_dir(path)
        except PermissionError:
            raise ToolError(f"Permission denied: {shown}.") from None

        entries.sort(key=lambda e: (not e.is_dir, e.name.lower(), e.name))
        dirs = sum(e.is_dir for e in entries)
        files = len(entries) - dirs
        header = (
            f"{shown}/ — {plural(dirs, 'directory')}, {plural(files, 'file')}" if entries else f"{shown}/ is empty."
        )
        text = "\n".join([header, *map(_entry_line, entries[:MAX_ENTRIES])])
        if len(entries) > MAX_ENTRIES:
            text += f"\n[... {len(entries) - MAX_ENTRIES} more entries not shown. Use find_files to narrow down.]"
        return ToolResult(text=text, locations=[Location(path)])


def _entry_line(e: DirEntry) -> str:
    link = " (symlink)" if e.is_symlink else ""
    if e.is_dir:
        return f"{e.name}/{link}"
    if e.special:  # listed so the model knows it is there, with why it cannot be read
        return f"{e.name}  ({e.special}, not readable){link}"
    return f"{e.name}  {human_size(e.size)}{link}"
