"""Opening a session file: a regular file, or nothing — never a read that blocks or never ends.

Anything can sit in the sessions folder under a session's name: a FIFO (an open or a read blocks until a
writer comes), a link to `/dev/zero` (a read never ends), a symlink loop, a directory, a device (opening one
can have effects of its own: a watchdog starts, a tape rewinds). So every open of a session file or of the
listing index goes through `open_regular`, that is through the one opener of ama's folders (ama_acp/ownfiles.py):
`lstat` first (a device or FIFO is never even opened), then `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (a
symlink is refused by the kernel, and an entry swapped in between cannot block the open), then `fstat` of the
descriptor, which must be a regular file before a byte is read. Layout and guarantees: docs/sessions.md "Odd files in the sessions folder".
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ama_acp import ownfiles
from ama_acp.errors import StoreError


class NotRegularFile(StoreError, OSError):
    """The path names something other than a regular file; `kind` says what, in words ("a FIFO"). Also an
    OSError, so a caller that treats any failure to open as an OSError (the listing) keeps working."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{path} is {kind}, not a regular file")
        self.path = path
        self.kind = kind

    def __str__(self) -> str:
        return self.strerror or self.kind


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, in words (the tools' words for the kinds they refuse too)."""
    return ownfiles.kind_of(mode)


def open_regular(path: Path, flags: int = os.O_RDONLY) -> tuple[int, os.stat_result]:
    """A descriptor on `path` (opened with `flags` plus the safe ones) and its fstat, or `NotRegularFile`.

    FileNotFoundError / NotADirectoryError pass through (no such file); other OSErrors too (permissions, EIO).
    Through the one opener of ama's folders (ama_acp/ownfiles.py), below the file's own folder.
    """
    try:
        fd = ownfiles.open_file(path, path.parent, flags)
    except ownfiles.OwnFileRefused as exc:
        raise NotRegularFile(path, exc.kind) from None
    try:
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def read_bounded(fd: int, limit: int) -> bytes | None:
    """The whole of a small regular file from offset 0, or None if it is longer than `limit` bytes."""
    parts: list[bytes] = []
    total = 0
    while chunk := os.pread(fd, min(1 << 20, limit + 1 - total), total):
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            return None
    return b"".join(parts)


def first_line(fd: int, limit: int) -> bytes | None:
    """The file's first line without its newline, or None when no newline comes within `limit` bytes (an
    incomplete or overlong first line). Reads in chunks joined once, so a long line costs linear time."""
    parts: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = os.pread(fd, min(1 << 20 if total else 1 << 16, limit + 1 - total), total)
        if not chunk:
            return None
        i = chunk.find(b"\n")
        if i >= 0:
            if total + i > limit:
                return None
            parts.append(chunk[:i])
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
    return None
