"""What can go wrong with a session file, as exceptions (the `StoreError` family, errors.py) and in words.

Every module of the store raises these; `store.py` re-exports them for the session layer, which maps each to
its answer (docs/errors.md).
"""

from __future__ import annotations

from pathlib import Path

from ama_acp.errors import StoreError


class SessionNotFound(StoreError):
    """No session file with this id (ACP: resource not found)."""


class InvalidSessionId(SessionNotFound, ValueError):
    """An id that could name a path outside the sessions directory; no such session can exist."""


class SessionExists(StoreError):
    """create() for an id that already has a file."""


class SessionBusy(StoreError):
    """Another writer (in this process or another) has this session open for appending. `pid`: the process
    holding its lock, when the system says (Linux's /proc/locks), else None."""

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class SessionFormatError(StoreError):
    """The file cannot be read as a session of a format this ama understands."""


class NotASessionFile(SessionFormatError):
    """The session's name is taken by something that is not a regular file: a FIFO, a symlink (to /dev/zero,
    anywhere, or a loop), a device, a directory, a socket. Never opened for reading; `kind` says what it is."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a session file")
        self.path = path
        self.kind = kind


class SessionWriteError(StoreError, OSError):
    """An entry could not be written to the session file (read-only directory, full disk, file-size limit).

    `str(exc)` is a sentence for a person: what failed, why, and what it means. The file itself is left
    consistent: no partial line stays behind (it is cut off, now or before the next write). Also an
    OSError, so code that already treats write failures as OSError keeps working.
    """

    def __init__(self, path: Path, reason: str, cause: BaseException | None = None) -> None:
        self.path = path
        self.reason = reason
        errno_ = cause.errno if isinstance(cause, OSError) else None
        super().__init__(
            errno_,
            f"Cannot write the session file {path} ({reason}); what happens from here on is not saved "
            "and will be missing when the session is loaded again.",
        )

    def __str__(self) -> str:
        return self.strerror or self.reason


def in_words(exc: BaseException) -> str:
    """Why a write failed, in words (errno names mean little to a person)."""
    import errno

    if isinstance(exc, OSError):
        words = {
            errno.ENOSPC: "the disk is full",
            errno.EDQUOT: "the disk quota is used up",
            errno.EFBIG: "the file reached the size limit for files",
            errno.EROFS: "the file system is read-only",
            errno.EACCES: "permission denied",
            errno.EPERM: "permission denied",
            errno.EIO: "an input/output error",
        }
        if exc.errno in words:
            return words[exc.errno]
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
