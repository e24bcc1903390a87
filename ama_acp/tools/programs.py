"""Programs ama starts itself, found by absolute path, never one the project ships (docs/tools.md "What runs").

ama runs helpers (git, rg) and the editor's stdio MCP servers with the project as the working directory.
Looked up the usual way, a relative PATH entry (`./node_modules/.bin`, `bin`) or an empty one (a leading,
trailing or doubled `:`, which means the current directory) finds a `git` or an `npx` the repository ships,
and it runs with no question asked, even in read_only. So every program ama starts by name is resolved here:

- A bare name (`git`, `npx`) is looked up only in PATH entries that are absolute and lie outside every
  workspace root, both as written and with symlinks resolved. Relative and empty entries are skipped (one log
  line per entry per process), and so is an entry inside a root (`/home/me/proj/node_modules/.bin`, or a link
  to it; a link inside the project, whose target the project can change) and a candidate whose own real path
  lies in a root (a global `npm link` pointing into the project). What is found must be a
  regular file ama may execute. The path returned is the entry joined with the name, not its real path: a
  multi-call binary (busybox) tells its programs apart by the name it is run as.
- A name with a `/` is a path the person configured (an MCP server's `command`): absolute, or relative to the
  directory the program runs in (what exec would do with it), and used even inside the workspace, because the
  person named that exact file. It must still be a regular executable file.

Each answer is cached per (name, PATH, roots, directory): the file system is asked once, not per search.
`safe_path` is the PATH the helpers run with, so a program a helper itself starts by name is held to the same
rule.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections.abc import Sequence

import msgspec

__all__ = ["Lookup", "find_program", "resolve_program", "safe_path"]

log = logging.getLogger(__name__)

# Said once per process: the person's PATH does not change while ama runs, and a line per search would bury
# the log.
_told: set[str] = set()
# Used when every entry of a PATH is refused: exec treats an empty PATH as "the current directory", so the
# helpers get a directory that holds no program instead.
_NOWHERE = "/nonexistent-ama-path"


class Lookup(msgspec.Struct, frozen=True):
    """Where a program was found, or why it was not."""

    name: str
    path: str | None  # absolute; None: not found anywhere ama runs programs from
    # Executables of that name ama found but would not run, each with where it was: "./node_modules/.bin/npx
    # (a relative PATH entry)".
    passed_over: tuple[str, ...] = ()
    problem: str | None = None  # a configured path that cannot be used, and why

    def why_not(self) -> str:
        """A sentence for the person: why there is no program to run."""
        if self.problem is not None:
            return self.problem
        if self.passed_over:
            return (
                f"{self.name!r} was found only where ama does not run programs from: "
                + "; ".join(self.passed_over)
                + ". Configure the program's absolute path to run it anyway"
            )
        return (
            f"{self.name!r} was not found in PATH (relative and empty PATH entries and entries inside the "
            "workspace are not searched)"
        )


def resolve_program(
    name: str, *, workspace_roots: Sequence[str], cwd: str | None = None, path: str | None = None
) -> str | None:
    """The absolute path of the program `name`, or None when it cannot be found safely (see the module's
    docstring). `path`: the PATH to search (default: ama's own); `cwd`: the directory the program will run in,
    against which a configured relative path (one with a `/`) is resolved."""
    return find_program(name, workspace_roots=workspace_roots, cwd=cwd, path=path).path


def find_program(
    name: str, *, workspace_roots: Sequence[str], cwd: str | None = None, path: str | None = None
) -> Lookup:
    """`resolve_program` with the reason when there is no program."""
    path_value = os.environ.get("PATH", os.defpath) if path is None else path
    return _lookup(name, path_value, tuple(sorted({r for r in workspace_roots if r})), cwd)


def safe_path(path: str | None, workspace_roots: Sequence[str]) -> str:
    """`path` (default: ama's own PATH) without its relative and empty entries and the entries inside a
    workspace root: the PATH a helper ama starts runs with."""
    value = os.environ.get("PATH", os.defpath) if path is None else path
    roots = _Roots(tuple(workspace_roots))
    kept = [entry for entry in value.split(os.pathsep) if _usable_entry(entry, roots)]
    return os.pathsep.join(kept) or _NOWHERE


@functools.lru_cache(maxsize=256)
def _lookup(name: str, path_value: str, roots: tuple[str, ...], cwd: str | None) -> Lookup:
    if not name or "\x00" in name:
        return Lookup(name, None, problem="the program's name is empty or holds a NUL character")
    if os.sep in name or (os.altsep and os.altsep in name):
        return _configured(name, cwd)
    inside = _Roots(roots)
    passed_over: dict[str, None] = {}  # in PATH order, each once
    for entry in path_value.split(os.pathsep):
        found = _in_entry(name, entry, inside, cwd, passed_over)
        if found is not None:
            return Lookup(name, found)
    return Lookup(name, None, tuple(passed_over))


def _in_entry(name: str, entry: str, inside: _Roots, cwd: str | None, passed_over: dict[str, None]) -> str | None:
    """The program `name` in one PATH entry, when ama may run it from there. One it may not run is added to
    `passed_over`, with why."""
    if not _usable_entry(entry, inside):
        candidate = os.path.join(cwd or os.curdir, entry, name)
        if _executable(candidate) is None:
            passed_over[f"{os.path.join(entry, name) if entry else name} ({_refused_entry_kind(entry)})"] = None
        return None
    candidate = os.path.join(entry, name)
    if _executable(candidate) is not None:
        return None
    if inside.contains(candidate):  # e.g. a global `npm link` into the project
        passed_over[f"{candidate} (a link into the workspace)"] = None
        _tell(f"{candidate} is skipped: a link to a program inside the workspace, which ama does not run")
        return None
    return candidate


def _configured(name: str, cwd: str | None) -> Lookup:
    if not os.path.isabs(name):
        if cwd is None:
            return Lookup(name, None, problem=f"{name!r} is a relative path and there is no directory to run it in")
        name = os.path.join(cwd, name)
    problem = _executable(name)
    if problem is not None:
        return Lookup(name, None, problem=f"{name!r} {problem}")
    return Lookup(name, name)


class _Roots:
    """The workspace roots, each as given and with symlinks resolved."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        prefixes = {os.path.normpath(os.path.abspath(r)) for r in roots} | {_real(r) for r in roots}
        self._roots = tuple(p.rstrip(os.sep) + os.sep for p in prefixes)

    def contains(self, path: str) -> bool:
        """Whether `path`, as written or with symlinks resolved, is a root or lies inside one."""
        for form in {os.path.normpath(path), _real(path)}:
            if any((form.rstrip(os.sep) + os.sep).startswith(root) for root in self._roots):
                return True
        return False


def _usable_entry(entry: str, roots: _Roots) -> bool:
    """Whether programs may be taken from this PATH entry; a refused entry is logged once."""
    if not entry or not os.path.isabs(entry):
        _tell(f"PATH entry {entry!r} is skipped: {_refused_entry_kind(entry)}, from which ama runs no program")
        return False
    if roots.contains(entry):
        _tell(f"PATH entry {entry!r} is skipped: it lies inside the workspace, from which ama runs no program")
        return False
    return True


def _refused_entry_kind(entry: str) -> str:
    if not entry:
        return "an empty PATH entry (the current directory)"
    if not os.path.isabs(entry):
        return "a relative PATH entry"
    return "inside the workspace"


def _executable(candidate: str) -> str | None:
    """None when `candidate` is a regular file ama may execute, else what it is instead."""
    try:
        st = os.stat(candidate)
    except (OSError, ValueError):
        return "does not exist"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if not os.access(candidate, os.X_OK):
        return "is not executable"
    return None


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _tell(line: str) -> None:
    if line not in _told:
        _told.add(line)
        log.warning("%s", line)
