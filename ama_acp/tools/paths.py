"""The workspace boundary: which paths lie inside the session's cwd and its additional directories.

Both `..` and symlinks are resolved before the check, so `../x`, `link-to-etc/passwd` and a dangling link
pointing outside all count as outside. A file that does not exist yet is judged by its nearest existing
parent (what `os.path.realpath` does for the missing tail).
"""

from __future__ import annotations

import os

import msgspec


class ResolvedPath(msgspec.Struct, frozen=True):
    abs_path: str  # symlinks resolved: what the check is about
    inside: bool
    # Absolute and normalized but with symlinks kept: the path a person and the editor know the file by.
    path: str = ""


def absolute(path: str, cwd: str) -> str:
    """`path` made absolute against `cwd` and normalized, symlinks untouched. Pure string work that never
    raises (`~name` with a NUL in it cannot be looked up: it stays as written)."""
    try:
        expanded = os.path.expanduser(path)
    except (ValueError, KeyError, OSError):
        expanded = path
    return os.path.normpath(os.path.join(cwd, expanded))


def inside(real: str, root_real: str) -> bool:
    """Whether an already-resolved path is `root_real` or lies beneath it (both resolved: a string check)."""
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


class PathPolicy:
    def __init__(self, roots: list[str]) -> None:
        self.roots = [os.path.realpath(r) for r in roots if r]

    def resolve(self, path: str, cwd: str) -> ResolvedPath:
        """Never raises: a path no file can have (a NUL byte, a lone surrogate) counts as outside, so the
        permission check treats it with the most care; the tool then refuses it."""
        lexical = absolute(path, cwd)
        try:
            real = os.path.realpath(lexical)
        except (ValueError, OSError):
            return ResolvedPath(abs_path=lexical, inside=False, path=lexical)
        return ResolvedPath(abs_path=real, inside=self.contains(real), path=lexical)

    def contains(self, real_path: str) -> bool:
        """Whether an already-resolved path lies in a root (a root itself counts as inside)."""
        return any(inside(real_path, root) for root in self.roots)
