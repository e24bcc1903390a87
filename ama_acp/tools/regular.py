"""Only regular files are read or written.

Opening a FIFO blocks until a writer comes (forever, in a worker thread that then keeps the process from
exiting); a character device may never end (`/dev/zero`) or have side effects; `/proc` and `/sys` entries
look like regular files but are views of the kernel. So: paths whose real path lies under /proc, /sys or
/dev are refused, and every open is `O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (it cannot block or take a
terminal) followed by `fstat` on the descriptor — a path swapped for a FIFO after a check is still refused.
"""

from __future__ import annotations

import errno
import os
import stat

from ama_acp.errors import ToolError

SPECIAL_ROOTS = ("/proc", "/sys", "/dev")
_OPEN_FLAGS = os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegularFileError(ToolError, OSError):
    """The path names a FIFO, device, socket, or a file under /proc, /sys or /dev."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EINVAL, message)

    def __str__(self) -> str:
        return self.strerror or ""


def describe_mode(mode: int) -> str | None:
    """What a non-regular, non-directory file is ('a FIFO', ...); None for a regular file or directory."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def special_root(real_path: str) -> str | None:
    """The kernel file system (/proc, /sys, /dev) an already-resolved path lies in, if any."""
    for root in SPECIAL_ROOTS:
        if real_path == root or real_path.startswith(root + "/"):
            return root
    return None


def refusal(path: str, what: str, verb: str) -> str:
    return f"{path} is {what}; only regular files can be {verb}."


def open_regular(path: str, *, write: bool = False) -> int:
    """A file descriptor for the regular file at `path` (opened for writing, created if missing, NOT
    truncated, when `write`). Raises NotRegularFileError for anything else, OSError as open does."""
    verb = "written" if write else "read"
    _refuse_before_open(path, write, verb)
    flags = _OPEN_FLAGS | ((os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a FIFO without a reader, swapped in after the stat above
            raise NotRegularFileError(refusal(path, "a FIFO (named pipe)", verb)) from None
        raise
    try:
        _refuse_opened(fd, path, verb)
        # Blocking again for the actual I/O: O_NONBLOCK was only there so the open itself could not hang.
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_before_open(path: str, write: bool, verb: str) -> None:
    """Refuse a path under a kernel file system, or one that is there and not a regular file (opening some
    devices already does something). A missing file is refused only for reading, by os.stat's own error."""
    root = special_root(os.path.realpath(path))
    if root is not None:
        raise NotRegularFileError(refusal(path, f"under {root}, a kernel file system", verb))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not write:
            raise
        return
    what = describe_mode(st.st_mode)
    if what is not None:
        raise NotRegularFileError(refusal(path, what, verb))


def _refuse_opened(fd: int, path: str, verb: str) -> None:
    """Refuse what `fd` turned out to be when it is not a regular file: a path swapped after the checks."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    what = describe_mode(mode)
    if what is not None:
        raise NotRegularFileError(refusal(path, what, verb))


def read_regular(path: str, max_bytes: int) -> bytes:
    """Up to `max_bytes` of a regular file; NotRegularFileError for anything else."""
    fd = open_regular(path)
    with open(fd, "rb", closefd=True) as f:
        return f.read(max_bytes)
