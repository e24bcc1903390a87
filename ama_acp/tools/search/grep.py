"""search: lines matching a regex across files. ripgrep when installed, a Python walk otherwise.

ripgrep is found by absolute path outside the workspace (`tools/programs.py`): an `rg` the project ships in a
relative PATH entry or inside the workspace is never run; without another, the Python walk searches.

Both honour .gitignore, skip binary files and files over 10 MB, include hidden files (not `.git`), and
print `path:line:text` (context lines as `path-line-text`), sorted by path.

The fallback matches with RE2, as ripgrep does with its own linear-time engine: no pattern can make it
backtrack (`(a+)+$` on a long line of a's is as quick as any), and the syntax is the one promised (no
look-around, no backreferences). It reads only regular files and stops between files and between matches
when the search is out of time or its caller has gone.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
from typing import NotRequired, TypedDict

import anyio
import msgspec
import re2  # type: ignore[import-untyped]  # google-re2 ships neither stubs nor py.typed
from anyio.abc import ByteReceiveStream, Process

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.budget import Budget, run_bounded
from ama_acp.tools.common import (
    DirectoryTool,
    Target,
    arg_str,
    closed_object,
    directory_path_param,
    display_path,
    plural,
    require_regular,
    short,
)
from ama_acp.tools.context import ToolContext
from ama_acp.tools.regular import read_regular
from ama_acp.tools.search.filewalk import glob_match, helper_env, helper_program, list_files
from ama_acp.tools.search.globs import GlobError
from ama_acp.tools.workspace import BINARY_SNIFF_BYTES

MAX_MATCHES = 200  # matching lines shown
MAX_OUTPUT_CHARS = 50_000
MAX_LINE_CHARS = 500
MAX_FILE_BYTES = 10 * 1024 * 1024
# Past this many matches counting stops too: the exact total no longer helps anyone.
COUNT_LIMIT = 10_000
SEARCH_SECONDS = 30.0


class GrepArgs(TypedDict):
    pattern: str
    path: NotRequired[str]
    glob: NotRequired[str]
    ignore_case: bool  # the defaults filled in
    context: int


class _Query(msgspec.Struct, frozen=True):
    pattern: str
    glob: str | None
    ignore_case: bool
    context: int  # lines before and after each match


class _FileHits(msgspec.Struct):
    path: str  # absolute
    lines: list[tuple[int, bool, str]] = msgspec.field(default_factory=list)  # (line number, is a match, text)


class _Found(msgspec.Struct):
    files: list[_FileHits] = msgspec.field(default_factory=list)
    matches: int = 0  # every match counted, shown or not (up to COUNT_LIMIT)
    complete: bool = True  # False: stopped at COUNT_LIMIT or out of time


class GrepTool(DirectoryTool[GrepArgs]):
    name = "search"
    kind: ToolKind = "search"
    description = (
        "Search file contents with a regular expression (ripgrep syntax) and get `path:line:text` for each "
        "matching line. Searches the working directory or `path` (a directory or one file), skipping files "
        "ignored by .gitignore and binary files. Narrow it with `glob` (for example `*.py` or `src/**/*.ts`), "
        "and ask for surrounding lines with `context`. Use it to locate code before reading it; to find files "
        "by name use find_files."
    )
    parameters: JSONObject = closed_object(
        {
            "pattern": {"type": "string", "description": "Regular expression to look for."},
            "path": directory_path_param("Directory or file to search."),
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
        "pattern",
    )
    checked_as = GrepArgs

    def __init__(self, use_ripgrep: bool = True) -> None:
        self.use_ripgrep = use_ripgrep

    def title(self, args: ToolArgs) -> str:
        return f"Search for `{short(arg_str(args, 'pattern'), 50)}`{self.where(args)}"

    async def look(self, checked: GrepArgs, target: Target, ctx: ToolContext) -> ToolResult:
        if target.stat is None:
            raise ToolError(f"Path not found: {target.shown}.")
        if not checked["pattern"]:
            raise ToolError("`pattern` is empty.")
        query = _Query(checked["pattern"], checked.get("glob") or None, checked["ignore_case"], checked["context"])
        is_dir = target.stat.is_dir
        if not is_dir:
            require_regular(target.resolved, target.stat, target.shown, "searched")
        if query.glob is not None:
            try:
                glob_match(query.glob, "x")
            except GlobError as e:
                raise ToolError(f"Unusable `glob`: {e}.") from None

        found = await self._search(query, target.path, is_dir, ctx)
        if found.matches:
            text = _format(found, query.context, ctx.cwd)
        else:
            text = _no_matches(query, target.shown, found.complete)
        return ToolResult(text=text, locations=[Location(target.path)])

    async def _search(self, query: _Query, target: str, is_dir: bool, ctx: ToolContext) -> _Found:
        # Where no helper is taken from: the session's roots, and the searched directory when it is elsewhere.
        roots = (*ctx.policy.roots, target if is_dir else os.path.dirname(target))
        rg = helper_program("rg", roots) if self.use_ripgrep else None
        if rg:
            found = await _ripgrep(rg, query, target, ctx.cwd, helper_env(roots))
            if found is not None:
                return found
        # No rg, or rg refused the pattern or failed to run.
        regex = compile_pattern(query.pattern, query.ignore_case)
        if is_dir:
            rels, stopped = await list_files(target, workspace_roots=ctx.policy.roots)
            paths = [os.path.join(target, r) for r in rels if query.glob is None or glob_match(query.glob, r)]
        else:
            paths, stopped = [target], False
        found = await run_bounded(SEARCH_SECONDS, _python_search, paths, regex, query.context, is_dir)
        found.complete = found.complete and not stopped
        return found


def _no_matches(query: _Query, shown: str, complete: bool) -> str:
    where = f" in {shown}" + (f" (files matching `{query.glob}`)" if query.glob else "")
    if complete:
        return f"No matches for `{query.pattern}`{where}."
    return (
        f"No matches for `{query.pattern}`{where} before the search stopped early (out of time); "
        "it did not look everywhere. Narrow the path or glob."
    )


# --- ripgrep -------------------------------------------------------------------------------------------


def _rg_argv(rg: str, query: _Query, target: str) -> list[str] | None:
    """ripgrep's command line for the query, or None when it cannot carry it."""
    argv = [rg, "--json", "--no-config", "--hidden", "--glob", "!.git", "--no-require-git", "--sort", "path"]
    argv += ["--max-filesize", "10M"]
    if query.ignore_case:
        argv.append("--ignore-case")
    if query.context:
        argv += ["--context", str(query.context)]
    if query.glob:
        argv += ["--glob", query.glob]
    argv += ["--regexp", query.pattern, "--", target]
    if any("\x00" in arg for arg in argv):  # no argv can carry a NUL: the RE2 fallback searches for it instead
        return None
    return argv


async def _ripgrep(rg: str, query: _Query, target: str, cwd: str, env: dict[str, str]) -> _Found | None:
    """Matches found by ripgrep, or None when ripgrep rejected the pattern or failed to run."""
    argv = _rg_argv(rg, query, target)
    if argv is None:
        return None
    try:
        proc = await anyio.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
        )
    except (OSError, ValueError):  # ValueError: an argument the OS cannot take (checked above, kept as a net)
        return None
    output = _RgOutput()
    stderr = bytearray()
    async with proc:
        assert proc.stdout is not None and proc.stderr is not None
        with anyio.move_on_after(SEARCH_SECONDS) as scope:
            async with anyio.create_task_group() as tg:
                # Drained to its end, not cancelled: the error message says whether the pattern was refused.
                tg.start_soon(_drain, proc.stderr, stderr)
                await output.read(proc.stdout, proc)
        found = output.found
        if scope.cancelled_caught:
            found.complete = False
        _kill(proc)
        await proc.wait()
    if _refused_pattern(proc.returncode, found, stderr):
        return None
    found.files = [f for f in output.by_path.values() if f.lines]
    return found


async def _drain(stream: ByteReceiveStream, into: bytearray) -> None:
    """Read `stream` to its end, keeping its first 8 KiB."""
    async for chunk in stream:
        if len(into) < 8192:
            into.extend(chunk)


def _refused_pattern(code: int | None, found: _Found, stderr: bytes | bytearray) -> bool:
    """Whether ripgrep refused the pattern (then the RE2 fallback tries it) rather than searched."""
    if code != 2 or found.matches or not found.complete:
        return False
    # rg exits 2 for a bad pattern and also for unreadable files; only the first means "try Python".
    return b"regex" in stderr or b"error parsing" in stderr or not stderr


def _kill(proc: Process) -> None:
    if proc.returncode is None:
        # os.kill, not proc.kill(): Popen.send_signal polls first and on Python 3.11 that can reap rg before
        # asyncio's child watcher does, which then reports exit code 255.
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


class _RgOutput:
    """ripgrep's --json output, one line at a time, gathered into a _Found."""

    def __init__(self) -> None:
        self.found = _Found()
        self.by_path: dict[str, _FileHits] = {}
        self.stored = 0  # matches kept to be shown

    async def read(self, stdout: ByteReceiveStream, proc: Process) -> None:
        """Take every line of `stdout`; past COUNT_LIMIT matches, stop counting and kill ripgrep."""
        buffer = b""
        async for chunk in stdout:
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                self.take(raw)
            if self.found.matches >= COUNT_LIMIT:
                self.found.complete = False
                _kill(proc)
                return
        self.take(buffer)

    def take(self, raw: bytes) -> None:
        event = _rg_event(raw)
        if event is None:
            return
        is_match, data = event
        if is_match:
            self.found.matches += 1
        # Context and matches beyond what is shown need not be kept; counting is enough.
        if self.stored >= MAX_MATCHES + 1:
            return
        path = _rg_text(data.get("path", {}))
        hits = self.by_path.setdefault(path, _FileHits(path))
        text = _rg_text(data.get("lines", {})).rstrip("\n").removesuffix("\r")
        number = data.get("line_number")  # an integer, or null when ripgrep did not count lines
        hits.lines.append((number if isinstance(number, int) else 0, is_match, text))
        self.stored += is_match


def _rg_event(raw: bytes) -> tuple[bool, dict[str, object]] | None:
    """One line of ripgrep's --json output as (is a match, its data) when it is a match or a context line."""
    if not raw.strip():
        return None
    try:
        msg: object = msgspec.json.decode(raw)  # checked below as far as used
    except msgspec.DecodeError:
        return None
    if not isinstance(msg, dict) or not isinstance(data := msg.get("data"), dict):
        return None
    kind = msg.get("type")
    if kind not in ("match", "context"):
        return None
    return kind == "match", data


def _rg_text(obj: object) -> str:
    """ripgrep's text object: {"text": ...}, or {"bytes": base64} for a name or line that is not UTF-8."""
    if not isinstance(obj, dict):
        return ""
    if isinstance(text := obj.get("text"), str):
        return text
    data = obj.get("bytes")
    return base64.b64decode(data).decode("utf-8", errors="replace") if isinstance(data, str) else ""


# --- Python fallback -----------------------------------------------------------------------------------

# What RE2 (like ripgrep's default engine) does not do, and what its parse errors say when it meets it.
_UNSUPPORTED = (
    ("invalid perl operator: (?=", "look-ahead `(?=…)`"),
    ("invalid perl operator: (?!", "negative look-ahead `(?!…)`"),
    ("invalid perl operator: (?<=", "look-behind `(?<=…)`"),
    ("invalid perl operator: (?<!", "negative look-behind `(?<!…)`"),
    ("invalid perl operator: (?>", "atomic groups `(?>…)`"),
    ("bad repetition operator: ++", "possessive quantifiers (`a++`)"),
    ("bad repetition operator: *+", "possessive quantifiers (`a*+`)"),
    ("bad repetition operator: ?+", "possessive quantifiers (`a?+`)"),
)
_RE2_MAX_MEM = 64 << 20


def compile_pattern(pattern: str, ignore_case: bool) -> re2._Regexp:
    """The RE2 regex for `pattern`, multi-line (`^`/`$` at line ends), never matching across lines. Raises a
    ToolError naming the construct when the pattern uses something RE2 does not support."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.never_nl = True  # a match never spans lines, as in ripgrep
    options.log_errors = False
    options.max_mem = _RE2_MAX_MEM
    try:
        return re2.compile("(?m)" + pattern, options)
    except re2.error as e:
        raise ToolError(_pattern_error(pattern, str(e.args[0] if e.args else e))) from None
    except UnicodeEncodeError:
        raise ToolError("`pattern` is not valid Unicode text.") from None


def _pattern_error(pattern: str, message: str) -> str:
    message = message.removeprefix("b'").removesuffix("'")
    unsupported = [what for marker, what in _UNSUPPORTED if marker in message]
    if "invalid escape sequence: \\" in message and message[-1:].isdigit():
        unsupported.append("backreferences (`\\1`)")
    base = f"Invalid regular expression `{short(pattern, 80)}`: {message}."
    if unsupported:
        return (
            f"{base} The search uses ripgrep's regex syntax (RE2), which has no {', '.join(unsupported)}; "
            "rewrite the pattern without it (for example search for a simpler pattern and filter the results)."
        )
    if "pattern too large" in message:
        return f"{base} Use a shorter pattern."
    return base


def _python_search(budget: Budget, paths: list[str], regex: re2._Regexp, context: int, walked: bool) -> _Found:
    found = _Found()
    stored = 0
    for path in sorted(paths):
        if found.matches >= COUNT_LIMIT or budget.exhausted():
            found.complete = False
            break
        # Like rg, a walk does not follow symlinks: they may lead out of the workspace.
        if walked and os.path.islink(path):
            continue
        try:
            # Regular files only (never a FIFO or device); one byte more than the limit says "too big".
            data = read_regular(path, MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES or b"\0" in data[:BINARY_SNIFF_BYTES]:
            continue
        stored = _search_bytes(data, path, regex, context, found, stored, budget)
    return found


def _search_bytes(
    data: bytes, path: str, regex: re2._Regexp, context: int, found: _Found, stored: int, budget: Budget
) -> int:
    """Count and keep the matching lines of one file. On bytes, so each search resumes where the last one
    stopped without re-encoding the text: the whole file costs time linear in its size."""
    kept: dict[int, tuple[bool, bytes]] = {}
    pos = 0
    line_no = 1  # the number of the line starting at `counted`
    counted = 0
    while pos <= len(data):
        if found.matches >= COUNT_LIMIT or budget.exhausted():
            found.complete = False
            break
        m = regex.search(data, pos)
        if m is None:
            break
        start, end = _line_around(data, m.start())
        if start == len(data):
            break  # an empty match after the final newline (or in an empty file): there is no line there
        line_no += data.count(b"\n", counted, start)
        counted = start
        found.matches += 1
        if stored <= MAX_MATCHES:
            stored += 1
            kept[line_no] = (True, data[start:end])
            if context:
                _context_lines(data, start, end, line_no, context, kept)
        pos = end + 1
    if kept:
        found.files.append(_file_hits(path, kept))
    return stored


def _line_around(data: bytes, at: int) -> tuple[int, int]:
    """Where the line holding byte `at` starts, and where it ends (its newline, or the end of `data`)."""
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    return start, len(data) if end == -1 else end


def _file_hits(path: str, kept: dict[int, tuple[bool, bytes]]) -> _FileHits:
    hits = _FileHits(path)
    for number in sorted(kept):
        is_match, raw = kept[number]
        hits.lines.append((number, is_match, raw.decode("utf-8", "replace").removesuffix("\r")))
    return hits


def _context_lines(
    data: bytes, start: int, end: int, line_no: int, context: int, kept: dict[int, tuple[bool, bytes]]
) -> None:
    before_end = start - 1  # the newline ending the previous line
    for k in range(1, context + 1):
        if before_end < 0:
            break
        before_start = data.rfind(b"\n", 0, before_end) + 1
        kept.setdefault(line_no - k, (False, data[before_start:before_end]))
        before_end = before_start - 1
    after_start = end + 1
    for k in range(1, context + 1):
        if after_start >= len(data):
            break
        after_end = data.find(b"\n", after_start)
        after_end = len(data) if after_end == -1 else after_end
        kept.setdefault(line_no + k, (False, data[after_start:after_end]))
        after_start = after_end + 1


# --- output --------------------------------------------------------------------------------------------


def _format(found: _Found, context: int, cwd: str) -> str:
    listing = _Listing(context)
    for hits in found.files:
        if not listing.add(hits, display_path(hits.path, cwd)):
            break
    if found.complete:
        header = f"{found.matches} match{'' if found.matches == 1 else 'es'}"
        header += f" in {plural(len(found.files), 'file')}" if not listing.cut else ""
    else:
        header = f"At least {found.matches} matches"
    lines = [header + ":", *listing.out]
    hidden = found.matches - listing.shown
    if hidden > 0:
        more = f"{hidden}+" if not found.complete else str(hidden)
        lines.append(f"[... {more} more matches not shown. Narrow the pattern, path or glob.]")
    elif not found.complete:
        lines.append("[The search stopped early (too many matches or too slow); results may be incomplete.]")
    return "\n".join(lines)


class _Listing:
    """The output's lines, file by file, within MAX_MATCHES matches and MAX_OUTPUT_CHARS characters."""

    def __init__(self, context: int) -> None:
        self.context = context
        self.out: list[str] = []
        self.used = 0  # characters
        self.shown = 0  # matches
        self.cut = False
        # Where the output may end: after a match and the context that follows it, never on the leading
        # context of a match that did not fit.
        self.good_end = 0

    def add(self, hits: _FileHits, name: str) -> bool:
        """Add one file's lines; False when they did not all fit (the output then ends at a good end)."""
        previous: int | None = None
        last_match = -(10**9)
        for number, is_match, text in hits.lines:
            if is_match and self.shown >= MAX_MATCHES:
                return self._stop()
            if self._starts_a_group(previous, number):
                self.out.append("--")
            entry = _entry(name, number, is_match, text)
            if self.used + len(entry) > MAX_OUTPUT_CHARS:
                return self._stop()
            self.out.append(entry)
            self.used += len(entry) + 1
            previous = number
            if is_match:
                self.shown += 1
                last_match = number
            if is_match or number <= last_match + self.context:
                self.good_end = len(self.out)
        return True

    def _starts_a_group(self, previous: int | None, number: int) -> bool:
        """Whether a `--` goes before this line: with context, lines that do not follow on are set apart."""
        return bool(self.context and self.out) and (previous is None or number != previous + 1)

    def _stop(self) -> bool:
        self.cut = True
        del self.out[self.good_end :]
        return False


def _entry(name: str, number: int, is_match: bool, text: str) -> str:
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + " …"
    sep = ":" if is_match else "-"
    return f"{name}{sep}{number}{sep}{text}"
