"""search: lines matching a regex across files. ripgrep when installed, a Python walk otherwise.

Both honour .gitignore, skip binary files and files over 10 MB, include hidden files (not `.git`), and
print `path:line:text` (context lines as `path-line-text`), sorted by path.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from anyio.abc import Process

from ama_acp.tools.base import Location, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import arg_str, display_path, os_errors_as_tool_errors, plural, short, validate
from ama_acp.tools.context import ToolContext
from ama_acp.tools.filewalk import glob_match, is_binary_file, list_files
from ama_acp.tools.paths import absolute
from ama_acp.tools.workspace import command_env

MAX_MATCHES = 200  # matching lines shown
MAX_OUTPUT_CHARS = 50_000
MAX_LINE_CHARS = 500
MAX_FILE_BYTES = 10 * 1024 * 1024
# Past this many matches counting stops too: the exact total no longer helps anyone.
COUNT_LIMIT = 10_000
SEARCH_SECONDS = 30.0


@dataclass
class _FileHits:
    path: str  # absolute
    lines: list[tuple[int, bool, str]] = field(default_factory=list)  # (line number, is a match, text)


@dataclass
class _Found:
    files: list[_FileHits] = field(default_factory=list)
    matches: int = 0  # every match counted, shown or not (up to COUNT_LIMIT)
    complete: bool = True  # False: stopped at COUNT_LIMIT or out of time


class GrepTool:
    name = "search"
    kind: ToolKind = "search"
    description = (
        "Search file contents with a regular expression (ripgrep syntax) and get `path:line:text` for each "
        "matching line. Searches the working directory or `path` (a directory or one file), skipping files "
        "ignored by .gitignore and binary files. Narrow it with `glob` (for example `*.py` or `src/**/*.ts`), "
        "and ask for surrounding lines with `context`. Use it to locate code before reading it; to find files "
        "by name use find_files."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to look for."},
            "path": {"type": "string", "description": "Directory or file to search. Default: the working directory."},
            "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.py`."},
            "ignore_case": {"type": "boolean", "description": "Match case-insensitively.", "default": False},
            "context": {
                "type": "integer",
                "minimum": 0,
                "maximum": 20,
                "description": "Lines of context to show before and after each match. Default 0.",
                "default": 0,
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def __init__(self, use_ripgrep: bool = True) -> None:
        self.use_ripgrep = use_ripgrep

    def title(self, args: dict[str, Any]) -> str:
        where = arg_str(args, "path")
        return f"Search for `{short(arg_str(args, 'pattern'), 50)}`" + (f" in {where}" if where else "")

    def locations(self, args: dict[str, Any], cwd: str) -> list[Location]:
        return [Location(absolute(arg_str(args, "path") or ".", cwd))]

    @os_errors_as_tool_errors
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        args = validate(self.parameters, args)
        target = ctx.resolve(args.get("path") or ".").path
        shown = display_path(target, ctx.cwd)
        st = await ctx.workspace.stat(target)
        if st is None:
            raise ToolError(f"Path not found: {shown}.")
        pattern: str = args["pattern"]
        if not pattern:
            raise ToolError("`pattern` is empty.")
        glob: str | None = args.get("glob") or None
        ignore_case: bool = args["ignore_case"]
        context: int = args["context"]

        found: _Found | None = None
        rg = shutil.which("rg") if self.use_ripgrep else None
        if rg:
            found = await _ripgrep(rg, pattern, target, glob, ignore_case, context, ctx.cwd)
        if found is None:  # no rg, or rg refused the pattern (look-around, backreferences): Python's re may not
            try:
                regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
            except re.error as e:
                raise ToolError(f"Invalid regular expression: {e}.") from None
            if st.is_dir:
                rels, stopped = await list_files(target)
                paths = [os.path.join(target, r) for r in rels if glob is None or glob_match(glob, r)]
            else:
                paths, stopped = [target], False
            found = await anyio.to_thread.run_sync(
                _python_search, paths, regex, context, st.is_dir, abandon_on_cancel=True
            )
            found.complete = found.complete and not stopped

        text = _format(found, context, ctx.cwd)
        if not found.matches:
            where = f" in {shown}" + (f" (files matching `{glob}`)" if glob else "")
            text = f"No matches for `{pattern}`{where}."
        return ToolResult(text=text, locations=[Location(target)])


# --- ripgrep -------------------------------------------------------------------------------------------


async def _ripgrep(
    rg: str, pattern: str, target: str, glob: str | None, ignore_case: bool, context: int, cwd: str
) -> _Found | None:
    """Matches found by ripgrep, or None when ripgrep rejected the pattern or failed to run."""
    argv = [rg, "--json", "--no-config", "--hidden", "--glob", "!.git", "--no-require-git", "--sort", "path"]
    argv += ["--max-filesize", "10M"]
    if ignore_case:
        argv.append("--ignore-case")
    if context:
        argv += ["--context", str(context)]
    if glob:
        argv += ["--glob", glob]
    argv += ["--regexp", pattern, "--", target]

    found = _Found()
    by_path: dict[str, _FileHits] = {}
    stored = 0
    try:
        proc = await anyio.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=command_env()
        )
    except OSError:
        return None
    stderr = bytearray()
    async with proc:
        assert proc.stdout is not None and proc.stderr is not None
        err_stream = proc.stderr

        async def drain_stderr() -> None:
            async for chunk in err_stream:
                if len(stderr) < 8192:
                    stderr.extend(chunk)

        with anyio.move_on_after(SEARCH_SECONDS) as scope:
            async with anyio.create_task_group() as tg:
                # Drained to its end, not cancelled: the error message says whether the pattern was refused.
                tg.start_soon(drain_stderr)
                buffer = b""
                async for chunk in proc.stdout:
                    buffer += chunk
                    *complete, buffer = buffer.split(b"\n")
                    for raw in complete:
                        stored = _take(raw, found, by_path, stored)
                    if found.matches >= COUNT_LIMIT:
                        found.complete = False
                        _kill(proc)
                        break
                else:
                    _take(buffer, found, by_path, stored)
        if scope.cancelled_caught:
            found.complete = False
        _kill(proc)
        await proc.wait()
    if proc.returncode == 2 and not found.matches and found.complete:
        # rg exits 2 for a bad pattern and also for unreadable files; only the first means "try Python".
        if b"regex" in stderr or b"error parsing" in stderr or not stderr:
            return None
    found.files = [f for f in by_path.values() if f.lines]
    return found


def _kill(proc: Process) -> None:
    if proc.returncode is None:
        # os.kill, not proc.kill(): Popen.send_signal polls first and on Python 3.11 that can reap rg before
        # asyncio's child watcher does, which then reports exit code 255.
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


def _take(raw: bytes, found: _Found, by_path: dict[str, _FileHits], stored: int) -> int:
    if not raw.strip():
        return stored
    try:
        msg = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return stored
    kind = msg.get("type")
    if kind not in ("match", "context"):
        return stored
    data = msg["data"]
    is_match = kind == "match"
    if is_match:
        found.matches += 1
    # Context and matches beyond what is shown need not be kept; counting is enough.
    if stored >= MAX_MATCHES + 1:
        return stored
    path = _rg_text(data.get("path", {}))
    hits = by_path.setdefault(path, _FileHits(path))
    text = _rg_text(data.get("lines", {})).rstrip("\n").removesuffix("\r")
    hits.lines.append((int(data.get("line_number") or 0), is_match, text))
    return stored + is_match


def _rg_text(obj: dict[str, Any]) -> str:
    if "text" in obj:
        return obj["text"]
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", errors="replace")


# --- Python fallback -----------------------------------------------------------------------------------


def _python_search(paths: list[str], regex: re.Pattern[str], context: int, walked: bool) -> _Found:
    found = _Found()
    deadline = time.monotonic() + SEARCH_SECONDS
    stored = 0
    for path in sorted(paths):
        if found.matches >= COUNT_LIMIT or time.monotonic() > deadline:
            found.complete = False
            break
        # Like rg, a walk does not follow symlinks: they may lead out of the workspace.
        if walked and os.path.islink(path):
            continue
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > MAX_FILE_BYTES or is_binary_file(path):
                continue
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                lines = f.read().split("\n")
        except OSError:
            continue
        if lines and lines[-1] == "":
            lines.pop()
        hits = _FileHits(path)
        keep: set[int] = set()
        matched: set[int] = set()
        for i, line in enumerate(lines):
            if regex.search(line):
                found.matches += 1
                if stored <= MAX_MATCHES:
                    stored += 1
                    matched.add(i)
                    keep.update(range(max(0, i - context), min(len(lines), i + context + 1)))
        for i in sorted(keep):
            hits.lines.append((i + 1, i in matched, lines[i].removesuffix("\r")))
        if hits.lines:
            found.files.append(hits)
    return found


# --- output --------------------------------------------------------------------------------------------


def _format(found: _Found, context: int, cwd: str) -> str:
    out: list[str] = []
    used = 0
    shown = 0
    cut = False
    # Where the output may end: after a match and the context that follows it, never on the leading
    # context of a match that did not fit.
    good_end = 0
    for hits in found.files:
        name = display_path(hits.path, cwd)
        previous: int | None = None
        last_match = -(10**9)
        for number, is_match, text in hits.lines:
            if is_match and shown >= MAX_MATCHES:
                cut = True
                break
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + " …"
            if context and out and (previous is None or number != previous + 1):
                out.append("--")
            sep = ":" if is_match else "-"
            entry = f"{name}{sep}{number}{sep}{text}"
            if used + len(entry) > MAX_OUTPUT_CHARS:
                cut = True
                break
            out.append(entry)
            used += len(entry) + 1
            previous = number
            if is_match:
                shown += 1
                last_match = number
            if is_match or number <= last_match + context:
                good_end = len(out)
        if cut:
            break
    if cut:
        del out[good_end:]

    if found.complete:
        header = f"{found.matches} match{'' if found.matches == 1 else 'es'}"
        header += f" in {plural(len(found.files), 'file')}" if not cut else ""
    else:
        header = f"At least {found.matches} matches"
    lines = [header + ":", *out]
    hidden = found.matches - shown
    if hidden > 0:
        more = f"{hidden}+" if not found.complete else str(hidden)
        lines.append(f"[... {more} more matches not shown. Narrow the pattern, path or glob.]")
    elif not found.complete:
        lines.append("[The search stopped early (too many matches or too slow); results may be incomplete.]")
    return "\n".join(lines)
