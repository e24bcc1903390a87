"""find_files: file paths matching a glob, newest first, .gitignore respected."""

from __future__ import annotations

import os
import stat
from typing import NotRequired, TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.budget import Budget, run_bounded
from ama_acp.tools.common import (
    DirectoryTool,
    Target,
    arg_str,
    closed_object,
    directory_path_param,
    display_path,
)
from ama_acp.tools.context import ToolContext
from ama_acp.tools.search.filewalk import glob_regex, list_files
from ama_acp.tools.search.globs import GlobError

MAX_RESULTS = 200
# Matching and dating the listed files (at most MAX_WALK_FILES of them) in a worker thread.
FILTER_SECONDS = 20.0


class GlobArgs(TypedDict):
    pattern: str
    path: NotRequired[str]


class GlobTool(DirectoryTool[GlobArgs]):
    name = "find_files"
    kind: ToolKind = "search"
    description = (
        "Find files whose path matches a glob pattern, such as `**/*.py`, `src/**/test_*.ts` or "
        "`*.{json,toml}`. `*` matches within one directory level and `**` across levels, so `*.md` matches only "
        "files directly in `path` and `**/*.md` matches at any depth. Files ignored by .gitignore are left out. "
        "Results are sorted by modification time, newest first. To search file contents use search."
    )
    parameters: JSONObject = closed_object(
        {
            "pattern": {"type": "string", "description": "Glob, relative to `path`."},
            "path": directory_path_param("Directory to search in."),
        },
        "pattern",
    )
    checked_as = GlobArgs

    def title(self, args: ToolArgs) -> str:
        return f"Find `{arg_str(args, 'pattern', '*')}`{self.where(args)}"

    async def look(self, checked: GlobArgs, target: Target, ctx: ToolContext) -> ToolResult:
        root, shown_root = target.path, target.shown
        if target.stat is None or not target.stat.is_dir:
            raise ToolError(f"Not a directory: {shown_root}.")
        pattern = _relative_pattern(checked["pattern"], root)
        try:
            glob_regex(pattern.rstrip("/"))
        except GlobError as e:
            raise ToolError(f"Unusable `pattern`: {e}.") from None

        files, stopped = await list_files(root, workspace_roots=ctx.policy.roots)
        matched, cut, note = await _match(pattern, files, shown_root)
        found = await run_bounded(FILTER_SECONDS, _newest_first, root, matched)
        if not found:
            return ToolResult(text=f"No files match `{pattern}` in {shown_root}.", locations=[Location(root)])
        lines = [display_path(os.path.join(root, rel), ctx.cwd) for rel in found[:MAX_RESULTS]]
        text = note + "\n".join(lines)
        if len(found) > MAX_RESULTS:
            text += f"\n[... {len(found) - MAX_RESULTS} more files not shown. Use a narrower pattern or path.]"
        if stopped or cut:
            text += "\n[The directory is very large; the search stopped early and may have missed files.]"
        return ToolResult(text=text, locations=[Location(root)])


async def _match(pattern: str, files: list[str], shown_root: str) -> tuple[list[str], bool, str]:
    """The files the pattern matches, whether matching stopped early (out of time), and a note for the model
    when the matches are those of `**/pattern` instead."""
    matched, cut = await run_bounded(FILTER_SECONDS, _filter, pattern, files)
    if matched or cut or "/" in pattern:
        return matched, cut, ""
    # The model often means "anywhere" when it writes `*.py`; say so instead of returning nothing.
    deep, cut = await run_bounded(FILTER_SECONDS, _filter, "**/" + pattern, files)
    if not deep:
        return matched, cut, ""
    return deep, cut, f"No files match `{pattern}` directly in {shown_root}; showing matches for `**/{pattern}`.\n"


def _relative_pattern(pattern: str, root: str) -> str:
    pattern = pattern.strip()
    if os.path.isabs(pattern):
        prefix = root.rstrip(os.sep) + os.sep
        if not pattern.startswith(prefix):
            raise ToolError("`pattern` must be relative to `path`; put the directory in `path`.")
        pattern = pattern[len(prefix) :]
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        raise ToolError("`pattern` is empty.")
    return pattern


def _filter(budget: Budget, pattern: str, files: list[str]) -> tuple[list[str], bool]:
    """The files the glob matches, and whether the budget ran out first."""
    regex = glob_regex(pattern.rstrip("/"))
    out: list[str] = []
    for i, f in enumerate(files):
        if i % 1024 == 0 and budget.exhausted():
            return out, True
        if regex.fullmatch(f):
            out.append(f)
    return out, False


def _newest_first(budget: Budget, root: str, rels: list[str]) -> list[str]:
    dated: list[tuple[float, str]] = []
    for rel in rels:
        if budget.exhausted():
            break
        try:
            st = os.stat(os.path.join(root, rel))
        except OSError:
            continue  # listed by git but deleted on disk
        if not stat.S_ISREG(st.st_mode):
            continue  # a submodule is listed as one path, a directory
        dated.append((st.st_mtime, rel))
    dated.sort(key=lambda item: (-item[0], item[1]))
    return [rel for _, rel in dated]
