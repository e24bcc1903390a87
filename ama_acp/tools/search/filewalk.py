"""Walking the local tree for find_files and search: glob patterns, .gitignore, binary sniffing.

Inside a git work tree git itself says which files count (`git ls-files --cached --others
--exclude-standard`: tracked plus untracked-but-not-ignored), so every ignore rule git knows is honoured.
Elsewhere a small .gitignore reader covers the common rules (negation, anchoring, `dir/`, `**`).

Git runs with every program a repository's config could name switched off (see `GIT_HARDENING`): the
project's `.git/config` is input the model may have written, not configuration ama trusts. And git itself is
found by absolute path outside the workspace (`tools/programs.py`): a `git` the project ships in a relative
PATH entry is never the one run; with no git found that way, the listing falls back to the walk below.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence

import anyio
import msgspec

from ama_acp.tools.budget import Budget, run_bounded
from ama_acp.tools.programs import resolve_program, safe_path
from ama_acp.tools.regular import read_regular
from ama_acp.tools.search.globs import CompiledGlob, GlobError, glob_match, glob_regex
from ama_acp.tools.workspace import BINARY_SNIFF_BYTES, command_env

__all__ = ["glob_match", "glob_regex", "list_files", "parse_gitignore", "walk_files", "is_binary_file"]

# Directories never worth walking into, git repo or not.
ALWAYS_SKIP = {".git", ".hg", ".svn"}
MAX_WALK_FILES = 200_000
WALK_SECONDS = 20.0
# A .gitignore larger than this is not one a person wrote; the rest of it is ignored.
MAX_GITIGNORE_BYTES = 1024 * 1024


# --- .gitignore outside git ----------------------------------------------------------------------------


class _Rule(msgspec.Struct, frozen=True):
    regex: CompiledGlob
    negate: bool
    dir_only: bool


class _RuleSet(msgspec.Struct, frozen=True):
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
        try:
            rules.append(_Rule(glob_regex(pattern), negate, dir_only))
        except GlobError:
            continue  # a line no glob engine could use; git would not match anything with it either

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


def walk_files(root: str, budget: Budget | None = None) -> tuple[list[str], bool]:
    """Files under `root` (relative, '/'-separated) that .gitignore files do not exclude. Returns the list
    and whether the walk stopped early (too many files, out of time or cancelled)."""
    budget = budget or Budget(WALK_SECONDS)
    files: list[str] = []
    stopped = False
    for rel in _walk(root, "", [], budget):
        if rel is None or len(files) >= MAX_WALK_FILES:
            stopped = True
            break
        files.append(rel)
    return files, stopped


def _walk(root: str, rel_dir: str, stack: list[_RuleSet], budget: Budget) -> Iterator[str | None]:
    """Relative file paths; None once the budget is spent (the caller stops there)."""
    here = os.path.join(root, rel_dir) if rel_dir else root
    stack = _with_gitignore(here, rel_dir, stack)
    entries = _scan(here, budget)
    if entries is None:
        yield None
        return
    for e in entries:
        if budget.exhausted():
            yield None
            return
        yield from _visit(root, rel_dir, e, stack, budget)


def _with_gitignore(here: str, rel_dir: str, stack: list[_RuleSet]) -> list[_RuleSet]:
    """The rules in force in `here`: those of its parents, then its own .gitignore's."""
    try:
        # Never a FIFO or device: a `.gitignore` that is a pipe would block the walk for good.
        text = read_regular(os.path.join(here, ".gitignore"), MAX_GITIGNORE_BYTES).decode("utf-8", "replace")
    except OSError:
        return stack
    rules = parse_gitignore(text)
    return [*stack, _RuleSet(rel_dir, rules)] if rules else stack


def _scan(here: str, budget: Budget) -> list[os.DirEntry[str]] | None:
    """The directory's entries by name ([] when it cannot be read); None once the budget is spent."""
    entries = []
    try:
        with os.scandir(here) as it:
            for e in it:
                if budget.exhausted():
                    return None
                entries.append(e)
    except OSError:
        return []
    return sorted(entries, key=lambda e: e.name)


def _visit(root: str, rel_dir: str, e: os.DirEntry[str], stack: list[_RuleSet], budget: Budget) -> Iterator[str | None]:
    """The entry itself when it is a file no rule ignores, or the files under it when it is a directory."""
    rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
    try:
        # Symlinked directories are not followed: they may loop or lead out of the workspace.
        is_dir = e.is_dir(follow_symlinks=False)
    except OSError:
        return
    if not is_dir:
        if not _ignored(rel, False, stack):
            yield rel
    elif e.name not in ALWAYS_SKIP and not _ignored(rel, True, stack):
        yield from _walk(root, rel, stack, budget)


# --- git -----------------------------------------------------------------------------------------------


# `-c` on the command line wins over every config file, includes included. Each of these keys names a
# program git would run, or (the last ones) changes what a plain listing does:
GIT_HARDENING = (
    "-c", "core.fsmonitor=false",  # the known one: git status/ls-files/rev-parse run the named hook
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.untrackedCache=false",
    "-c", "core.sshCommand=false",
    "-c", "core.gitProxy=false",
    "-c", "core.askPass=false",
    "-c", "core.pager=cat",
    "-c", "core.editor=false",
    "-c", "diff.external=",
    "-c", "credential.helper=",
    "-c", "protocol.allow=never",
    # A directory the model filled with HEAD, config, objects/ and refs/ is a bare repository git would
    # otherwise discover and read; only a real work tree's .git counts.
    "-c", "safe.bareRepository=explicit",
    "-c", "core.quotepath=off",
)  # fmt: skip
# Environment that belongs to whatever started ama, not to the project being listed.
_GIT_ENV_DROP = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_PAGER",
    "GIT_EDITOR",
)


def git_argv(git: str, *args: str) -> list[str]:
    """`git` (its absolute path: `helper_program("git", …)`) with the hardening and `args`."""
    return [git, *GIT_HARDENING, *args]


def helper_program(name: str, workspace_roots: Sequence[str]) -> str | None:
    """The absolute path of the helper `name` (git, rg) outside the workspace, or None: the caller falls back
    to doing without it (tools/programs.py)."""
    return resolve_program(name, workspace_roots=workspace_roots)


def helper_env(workspace_roots: Sequence[str] = ()) -> dict[str, str]:
    """The environment git and rg run with. Its PATH keeps only absolute entries outside the workspace, so
    whatever a helper starts by name is not the project's either."""
    env = command_env()
    for key in _GIT_ENV_DROP:
        env.pop(key, None)
    env["PATH"] = safe_path(env.get("PATH"), workspace_roots)
    # Reading must not take the index lock away from the user's own git commands.
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


async def run_argv(argv: list[str], cwd: str, seconds: float, env: dict[str, str]) -> tuple[int | None, bytes, bytes]:
    """Run a helper program (git, rg) quietly; (None, b"", b"") when it could not start or timed out."""
    with anyio.move_on_after(seconds):
        try:
            # stdin from /dev/null: the agent's own stdin is the protocol stream.
            done = await anyio.run_process(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, check=False)
        except OSError:
            return None, b"", b""
        return done.returncode, done.stdout, done.stderr
    return None, b"", b""


async def git_files(root: str, workspace_roots: Sequence[str]) -> list[str] | None:
    """Tracked and untracked-not-ignored files under `root` (relative to it), or None outside a git work
    tree or without git (none found outside `workspace_roots` and `root`)."""
    roots = (*workspace_roots, root)
    git = helper_program("git", roots)
    if git is None:
        return None
    env = helper_env(roots)
    code, out, _ = await run_argv(git_argv(git, "rev-parse", "--is-inside-work-tree"), root, 10, env)
    if code != 0 or out.strip() != b"true":
        return None
    listing = git_argv(git, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    code, out, _ = await run_argv(listing, root, 30, env)
    if code != 0:
        return None
    names = dict.fromkeys(p for p in out.decode("utf-8", errors="surrogateescape").split("\0") if p)
    return list(names)


async def list_files(root: str, *, workspace_roots: Sequence[str]) -> tuple[list[str], bool]:
    """Candidate files under the directory `root`, relative to it, .gitignore respected. Files listed by git
    but deleted on disk are still in the list; callers stat what they use. Returns (files, stopped early).
    `workspace_roots`: the session's roots, where no helper program is taken from."""
    listed = await git_files(root, workspace_roots)
    if listed is not None:
        return listed, False
    return await run_bounded(WALK_SECONDS, lambda budget: walk_files(root, budget))


def is_binary_file(path: str) -> bool:
    """Binary, or not a regular file (never opened if it is a FIFO or device), or unreadable: skip it."""
    try:
        return b"\0" in read_regular(path, BINARY_SNIFF_BYTES)
    except OSError:
        return True
