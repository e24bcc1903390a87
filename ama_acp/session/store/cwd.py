"""One spelling for a session's working directory.

Editors spell the same folder differently: Emacs's `default-directory` always ends in `/`, others never do.
A session is stored, listed, filtered, loaded and resumed under `normal_cwd(cwd)`, so a thread started in one
editor opens from another. The rules are lexical (`os.path.normpath`: no trailing separator, no `.` or `..`
segments, no doubled separators); symlinks are not resolved — the protocol gives an absolute path and ama
keeps the folder the editor named, not where a link leads.
"""

from __future__ import annotations

import os


def normal_cwd(cwd: str) -> str:
    """`cwd` in normal form; a relative or empty path is returned as it is, for the caller to refuse."""
    if not cwd or not os.path.isabs(cwd):
        return cwd
    return os.path.normpath(cwd)


def same_cwd(a: str, b: str) -> bool:
    """Whether two spellings name one session folder (a file stored before may hold `/x/proj/`)."""
    return normal_cwd(a) == normal_cwd(b)
