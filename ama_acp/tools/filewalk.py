"""Walking the local tree for find_files and search: glob patterns, .gitignore, binary sniffing.

Inside a git work tree git itself says which files count (`git ls-files --cached --others
--exclude-standard`: tracked plus untracked-but-not-ignored), so every ignore rule git knows is honoured.
Elsewhere a small .gitignore reader covers the common rules (negation, anchoring, `dir/`, `**`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import anyio

from ama_acp.tools.workspace import BINARY_SNIFF_BYTES, command_env

# Directories never worth walking into, git repo or not.
ALWAYS_SKIP = {".git", ".hg", ".svn"}
MAX_WALK_FILES = 200_000
WALK_SECONDS = 20.0


# --- glob patterns -------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex for a glob over '/'-separated relative paths: `*` and `?` stay within one path
    segment, `**` crosses segments (`**/` also matches no directory at all), `[abc]`, `[!abc]`, `{a,b}`."""
    return re.compile(_translate(pattern), re.DOTALL)


def _translate(pat: str) -> str:
    out: list[str] = []
    i, n = 0, len(pat)
    while i < n:
        c = pat[i]
        if c == "*":
            if pat.startswith("**", i):
                if pat.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pat.find("]", i + 2 if pat.startswith("[!", i) or pat.startswith("[^", i) else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pat[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "{":
            end = _closing_brace(pat, i)
            if end == -1:
                out.append(re.escape(c))
            else:
                alts = _split_alternatives(pat[i + 1 : end])
                out.append("(?:" + "|".join(_translate(a) for a in alts) + ")")
                i = end
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pat[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _closing_brace(pat: str, start: int) -> int:
    depth = 0
    for j in range(start, len(pat)):
        if pat[j] == "{":
            depth += 1
        elif pat[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _split_alternatives(body: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in body:
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current.append(ch)
    parts.append("".join(current))
    return parts


def glob_match(pattern: str, rel_path: str) -> bool:
    """Whether a relative path matches. A pattern without '/' matches the file name at any depth, as
    ripgrep's --glob does (so `*.py` finds `src/a.py`)."""
    if "/" not in pattern.rstrip("/"):
        return glob_regex(pattern).fullmatch(rel_path.rsplit("/", 1)[-1]) is not None
    return glob_regex(pattern.lstrip("/")).fullmatch(rel_path) is not None


# --- .gitignore outside git ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


@dataclass(frozen=True)
class _RuleSet:
    base: str  # directory of the .gitignore, relative to the walk root ("" for the root)
    rules: tuple[_Rule, ...]


def parse_gitignore(text: str) -> tuple[_Rule, ...]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if raw.endswith("\\ "):  # an escaped trailing space is part of the pattern
            line += " "
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        elif line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        pattern = line if anchored else "**/" + line
        rules.append(_Rule(glob_regex(pattern), negate, dir_only))
    return tuple(rules)


def _ignored(rel: str, is_dir: bool, stack: list[_RuleSet]) -> bool:
    ignored = False
    for rs in stack:
        if rs.base:
            if not rel.startswith(rs.base + "/"):
                continue
            sub = rel[len(rs.base) + 1 :]
        else:
            sub = rel
        for rule in rs.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.fullmatch(sub):
                ignored = not rule.negate
    return ignored


def walk_files(root: str, deadline: float | None = None) -> tuple[list[str], bool]:
    """Files under `root` (relative, '/'-separated) that .gitignore files do not exclude. Returns the list
    and whether the walk stopped early (too many files or out of time)."""
    files: list[str] = []
    stopped = False
    for rel in _walk(root, "", []):
        files.append(rel)
        out_of_time = deadline is not None and len(files) % 256 == 0 and time.monotonic() > deadline
        if len(files) >= MAX_WALK_FILES or out_of_time:
            stopped = True
            break
    return files, stopped


def _walk(root: str, rel_dir: str, stack: list[_RuleSet]) -> Iterator[str]:
    here = os.path.join(root, rel_dir) if rel_dir else root
    try:
        with open(os.path.join(here, ".gitignore"), encoding="utf-8", errors="replace") as f:
            rules = parse_gitignore(f.read())
        if rules:
            stack = [*stack, _RuleSet(rel_dir, rules)]
    except OSError:
        pass
    try:
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
        try:
            # Symlinked directories are not followed: they may loop or lead out of the workspace.
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if e.name in ALWAYS_SKIP or _ignored(rel, True, stack):
                continue
            yield from _walk(root, rel, stack)
        elif not _ignored(rel, False, stack):
            yield rel


# --- git -----------------------------------------------------------------------------------------------


async def run_argv(argv: list[str], cwd: str, seconds: float) -> tuple[int | None, bytes, bytes]:
    """Run a helper program (git, rg) quietly; (None, b"", b"") when it could not start or timed out."""
    env = command_env()
    # Reading must not take the index lock away from the user's own git commands.
    env["GIT_OPTIONAL_LOCKS"] = "0"
    with anyio.move_on_after(seconds):
        try:
            # stdin from /dev/null: the agent's own stdin is the protocol stream.
            done = await anyio.run_process(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, check=False)
        except OSError:
            return None, b"", b""
        return done.returncode, done.stdout, done.stderr
    return None, b"", b""


async def git_files(root: str) -> list[str] | None:
    """Tracked and untracked-not-ignored files under `root` (relative to it), or None outside a git work
    tree or without git."""
    if shutil.which("git") is None:
        return None
    code, out, _ = await run_argv(["git", "rev-parse", "--is-inside-work-tree"], root, 10)
    if code != 0 or out.strip() != b"true":
        return None
    code, out, _ = await run_argv(
        ["git", "-c", "core.quotepath=off", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], root, 30
    )
    if code != 0:
        return None
    names = dict.fromkeys(p for p in out.decode("utf-8", errors="surrogateescape").split("\0") if p)
    return list(names)


async def list_files(root: str) -> tuple[list[str], bool]:
    """Candidate files under the directory `root`, relative to it, .gitignore respected. Files listed by git
    but deleted on disk are still in the list; callers stat what they use. Returns (files, stopped early)."""
    listed = await git_files(root)
    if listed is not None:
        return listed, False
    deadline = time.monotonic() + WALK_SECONDS
    return await anyio.to_thread.run_sync(walk_files, root, deadline, abandon_on_cancel=True)


def is_binary_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(BINARY_SNIFF_BYTES)
    except OSError:
        return True
