"""The workspace's git state for a compaction's handoff request: the branch (or the detached commit), the first
lines of `git status --short` and of `git diff --stat`, each bounded and counted (docs/context.md "Compaction").

Git runs locally (never through the editor's terminal), found by absolute path outside the workspace
(`filewalk.helper_program`: never a `git` the project ships in a relative PATH entry; none found is no git),
with the tools' hardening (`filewalk.git_argv`, `helper_env`: no fsmonitor, hooks, pager, external diff …)
and more for the two commands that read file contents: `--no-ext-diff --no-textconv`, submodules ignored (git
would run itself inside them with *their* config), and every filter driver any config names switched off — a
`clean` filter is a program the repository names, and `git status`/`git diff` run it on a file whose stat
changed. The drivers are found by reading the config (which runs nothing) and overridden through
`GIT_CONFIG_COUNT`, whose keys are taken verbatim, so a driver name with dots, spaces or `=` is overridden too.
(The cost: a file whose stat changed and whose filter would have cleaned it back — a git-lfs file, say — may be
listed as modified.)

Nothing here raises but cancellation: no git or no work tree is no state (None); a failure, a timeout or a
config that cannot be neutralised is a state that says what could not be read. Output is decoded with
errors="replace" and cleaned of control characters; it is the repository's text, not ama's.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from ama_acp.tools.search.filewalk import git_argv, helper_env, helper_program

log = logging.getLogger(__name__)

GIT_SECONDS = 5.0  # for the whole state: a compaction waits for it
MAX_LINES = 50  # of each listing
LINE_CLIP = 300  # characters of one line
KEEP_BYTES = 64 * 1024  # of each command's output kept whole (the short answers: a branch, the config's keys)
LINE_BYTES = LINE_CLIP * 4 + 4  # of one listed line kept to decode (UTF-8: at most 4 bytes a character)
TAIL_BYTES = 4096  # the end of the output kept for its last line (diff --stat's summary)
MAX_FILTER_DRIVERS = 64  # more than this is no repository a person set up: refuse rather than run its filters

# Configuration that colours or decorates the output, which the repository may set.
_PLAIN = ("-c", "color.ui=never", "-c", "color.status=never", "-c", "color.diff=never")
_NO_SUBMODULES = ("-c", "diff.ignoreSubmodules=all", "-c", "status.submoduleSummary=false")
# C0/C1 controls (a tab becomes a space first), line/paragraph separators and bidi controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_FILTER_VARS = ("clean", "smudge", "process")


@dataclass(frozen=True)
class Listing:
    """The first lines of a command's output (cleaned, clipped), how many it had, and its last line when that
    is not among the first ones."""

    lines: list[str]
    total: int
    last: str | None = None


@dataclass(frozen=True)
class GitState:
    head: str | None = None  # "branch main" / "detached HEAD at 1a2b3c4"; None: could not be read
    status: Listing | None = None
    diff: Listing | None = None
    problems: list[str] = field(default_factory=list)  # what could not be read, and why

    def render(self) -> str:
        out = ["# Git state of the workspace (at compaction)"]
        out.append(f"- {self.head}" if self.head else "- HEAD: could not be read")
        out += _listing("git status --short", self.status, "clean: nothing to commit")
        out += _listing("git diff --stat (unstaged changes)", self.diff, "no unstaged changes")
        out += [f"- not read: {p}" for p in self.problems]
        return "\n".join(out)


def _listing(title: str, listing: Listing | None, empty: str) -> list[str]:
    if listing is None:
        return []
    if not listing.total:
        return [f"- {title}: {empty}"]
    shown = len(listing.lines) + (listing.last is not None)
    out = [f"- {title} ({listing.total} lines" + ("):" if shown >= listing.total else f", {shown} shown):")]
    out += [f"    {line}" for line in listing.lines]
    left = listing.total - shown
    if left > 0:
        out.append(f"    … {left} more lines")
    if listing.last is not None:
        out.append(f"    {listing.last}")
    return out


def clean_line(text: str) -> str:
    text = _CONTROL.sub("", text.replace("\t", " ")).rstrip()
    return text if len(text) <= LINE_CLIP else text[: LINE_CLIP - 1] + "…"


class _Output:
    """A command's output read as it comes, never all of it in memory: its first KEEP_BYTES (for the short
    answers), its first MAX_LINES lines (each cut at LINE_BYTES), its last TAIL_BYTES and how many lines it had."""

    def __init__(self) -> None:
        self.code = -1
        self.head = bytearray()
        self.first: list[bytes] = []
        self.total = 0
        self.tail = b""
        self._line = bytearray()
        self._open = False  # a line was started and not ended yet

    def feed(self, chunk: bytes) -> None:
        if len(self.head) < KEEP_BYTES:
            self.head += chunk[: KEEP_BYTES - len(self.head)]
        self.tail = (self.tail + chunk)[-TAIL_BYTES:]
        self._open = not chunk.endswith(b"\n")
        if len(self.first) >= MAX_LINES:  # only counted from here on
            self.total += chunk.count(b"\n")
            return
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:
            self._add(piece)
            self.total += 1
            if len(self.first) < MAX_LINES:
                self.first.append(bytes(self._line))
            self._line.clear()
        self._add(pieces[-1])

    def end(self) -> None:
        if self._open:  # the last line has no newline: still a line
            self.total += 1
            if len(self.first) < MAX_LINES:
                self.first.append(bytes(self._line))
            self._open = False

    def _add(self, piece: bytes) -> None:
        if len(self._line) < LINE_BYTES:
            self._line += piece[: LINE_BYTES - len(self._line)]


async def _git(git: str, cwd: str, env: dict[str, str], *args: str) -> _Output | None:
    """Run git quietly, reading its output as it comes; None when it could not start. Cancelled (the caller's
    deadline): the process is killed on the way out (anyio's Process.aclose)."""
    try:
        proc = await anyio.open_process(
            git_argv(git, "--no-pager", *args), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    except OSError as exc:
        log.info("git state: git could not start in %s (%s)", cwd, exc)
        return None
    out = _Output()
    async with proc:
        assert proc.stdout is not None  # opened with a pipe (the default)
        async for chunk in proc.stdout:
            out.feed(chunk)
        out.code = await proc.wait()
    out.end()
    return out


def _decode(line: bytes | bytearray) -> str:
    return clean_line(line.decode("utf-8", errors="replace"))


def _lines(out: _Output, keep_last: bool = False) -> Listing:
    """The first MAX_LINES lines, and (`keep_last`) the very last line when it is not among them."""
    lines = out.first
    last: str | None = None
    if keep_last and out.total > len(lines):
        last = _decode(out.tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
        lines = lines[: MAX_LINES - 1]
    return Listing([_decode(line) for line in lines], out.total, last)


async def _filter_overrides(git: str, cwd: str, env: dict[str, str]) -> dict[str, str] | str:
    """GIT_CONFIG_* variables that switch off every filter driver the config names, or why they cannot."""
    out = await _git(git, cwd, env, "config", "-z", "--name-only", "--get-regexp", r"^filter\.")
    if out is None:
        return "git could not start"
    if out.code == 1 and not out.head:  # no filter driver at all
        return {}
    if out.code != 0 or len(out.head) >= KEEP_BYTES:
        return f"its filter drivers could not be listed (git config exit {out.code})"
    drivers = _driver_names(out.head)
    if len(drivers) > MAX_FILTER_DRIVERS:
        return f"its config names {len(drivers)} filter drivers"
    return _config_env(drivers)


def _driver_names(keys: bytes | bytearray) -> set[str]:
    """The filter drivers named by `git config -z --name-only` keys (`filter.<name>.<variable>`)."""
    drivers: set[str] = set()
    for key in keys.decode("utf-8", errors="surrogateescape").split("\0"):
        section, _, rest = key.partition(".")
        name, dot, _var = rest.rpartition(".")
        if key and section == "filter" and dot:
            drivers.add(name)
    return drivers


def _config_env(drivers: set[str]) -> dict[str, str]:
    """GIT_CONFIG_* variables that empty each driver's programs and make none of them required."""
    pairs = [(f"filter.{name}.{var}", "") for name in sorted(drivers) for var in _FILTER_VARS]
    pairs += [(f"filter.{name}.required", "false") for name in sorted(drivers)]
    env_vars = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env_vars[f"GIT_CONFIG_KEY_{i}"], env_vars[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env_vars


async def read_git_state(
    cwd: str, seconds: float = GIT_SECONDS, *, workspace_roots: Sequence[str] = ()
) -> GitState | None:
    """The git state of the work tree `cwd` is in; None without git or outside a work tree. No git is taken
    from inside `cwd` or `workspace_roots`."""
    try:
        return await _read(cwd, seconds, (cwd, *workspace_roots))
    except Exception:  # a bug of ours must not fail a compaction: the handoff goes without the section
        log.exception("git state: unexpected error reading %s", cwd)
        return None


async def _read(cwd: str, seconds: float, roots: tuple[str, ...]) -> GitState | None:
    git = helper_program("git", roots)
    if git is None:
        return None
    env = helper_env(roots)
    env["GIT_NO_LAZY_FETCH"] = "1"  # a partial clone fetches no missing object for a diff (git ≥ 2.44)
    read = _Reading()
    work_tree = False
    with anyio.move_on_after(seconds) as scope:
        inside = await _git(git, cwd, env, "rev-parse", "--is-inside-work-tree")
        if inside is None or inside.code != 0 or inside.head.strip() != b"true":
            return None
        work_tree = True
        read.head = await _head(git, cwd, env)
        await _read_changes(read, git, cwd, env)
    if not work_tree:  # timed out before git said whether this is a work tree: nothing to say
        return None
    if scope.cancelled_caught:
        read.problems.append(f"git did not answer within {seconds:g} s")
    return GitState(read.head, read.status, read.diff, read.problems)


@dataclass
class _Reading:
    """What has been read so far: kept when the time runs out part way."""

    head: str | None = None
    status: Listing | None = None
    diff: Listing | None = None
    problems: list[str] = field(default_factory=list)


def _answer(out: _Output | None) -> bytes | bytearray:
    """A short answer's output, stripped, when the command succeeded; b"" otherwise."""
    return out.head.strip() if out is not None and out.code == 0 else b""


async def _head(git: str, cwd: str, env: dict[str, str]) -> str | None:
    if branch := _answer(await _git(git, cwd, env, "symbolic-ref", "--quiet", "--short", "HEAD")):
        return "branch " + _decode(branch)
    if sha := _answer(await _git(git, cwd, env, "rev-parse", "--short", "HEAD")):
        return "detached HEAD at " + _decode(sha)
    return None


async def _read_changes(read: _Reading, git: str, cwd: str, env: dict[str, str]) -> None:
    """`git status --short` and `git diff --stat`, with every filter driver switched off first (or neither)."""
    overrides = await _filter_overrides(git, cwd, env)
    if isinstance(overrides, str):
        read.problems.append(f"status and diff, since {overrides}")
        return
    env.update(overrides)
    out = await _git(git, cwd, env, *_PLAIN, *_NO_SUBMODULES, "status", "--short", "--ignore-submodules=all")
    if out is not None and out.code == 0:
        read.status = _lines(out)
    else:
        read.problems.append(f"git status failed (exit {out.code if out else 'none'})")
    out = await _git(
        git,
        cwd,
        env,
        *_PLAIN,
        *_NO_SUBMODULES,
        "diff",
        "--stat=200",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
    )
    if out is not None and out.code == 0:
        read.diff = _lines(out, keep_last=True)
    else:
        read.problems.append(f"git diff --stat failed (exit {out.code if out else 'none'})")
