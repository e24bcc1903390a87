"""The files ama keeps in its own folders (the data dir, the config dir), opened one way.

Anything can be planted there: a link where a folder or a file belongs (a write through it lands outside the
folder), a FIFO (an open blocks until a writer comes, in the thread that runs every session), a link to
`/dev/zero` (a read never ends), a device (opening one can have effects of its own). So every open, read and
write of a file below such a folder goes through here:

- the folder's root is trusted as given (a person may link their data dir elsewhere); below it, every folder
  is opened with `O_NOFOLLOW | O_DIRECTORY` from the one above it, so a link anywhere on the way is refused,
  and a folder swapped for a link after a check is refused too (nothing is looked up by its full path again);
- the file itself is opened `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (a link is refused by the
  kernel, a FIFO cannot block the open) and must be a regular file by `fstat` before a byte moves;
- a read is bounded: past its cap it is refused, never held in memory;
- a whole file is written atomically: a new file beside it, synced, renamed over the old name (a link or a
  FIFO in the file's own place is replaced, never followed or opened), and the folder synced.

Each refusal is an `OwnFileRefused` saying what was found (also an OSError, so a caller that already turns a
failed open into a message keeps doing so). docs/errors.md "ama's own folders".
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ama_acp.errors import StoreError

_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class OwnFileRefused(StoreError, OSError):
    """A path below one of ama's own folders that is not what ama keeps there: `kind` says what it is, in words
    ("a symbolic link", "a FIFO (named pipe)", "larger than 1 MiB")."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{path} is {kind}; ama reads and writes only regular files in its folders")
        self.path = path
        self.kind = kind

    def __str__(self) -> str:
        return self.strerror or self.kind


class LinkRefused(OwnFileRefused):
    """A symbolic link where a folder or a file of ama's belongs."""


class NotRegular(OwnFileRefused):
    """A FIFO, a device, a socket (or a file where a folder belongs, a folder where a file does)."""


class TooLarge(OwnFileRefused):
    """A file past the cap its reader sets."""


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, in words."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    )
    return next((words for test, words in kinds if test(mode)), "not a regular file")


def _refusal(path: Path, mode: int) -> OwnFileRefused:
    kind = kind_of(mode)
    return LinkRefused(path, kind) if stat.S_ISLNK(mode) else NotRegular(path, kind)


def _what_is_there(exc: OSError, fd: int, name: str, path: Path, expected: Callable[[int], bool]) -> OSError:
    """What a failed open of `name` in the folder `fd` raises: the refusal that says what has the name (a link, a
    FIFO, a device) where it is not of the `expected` kind; else the open's own error."""
    try:
        info = os.lstat(name, dir_fd=fd)
    except OSError:
        return exc
    return exc if expected(info.st_mode) else _refusal(path, info.st_mode)


def _below(path: Path, root: Path) -> tuple[str, ...]:
    """The names from `root` down to `path` (`path` must lie below `root`, spelled without `..`)."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise NotRegular(path, f"outside {root}") from None
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise NotRegular(path, f"not a file name below {root}")
    return parts


def _open_child_dir(fd: int, name: str, path: Path, create: bool) -> int:
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=fd)
        except FileExistsError:
            pass
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as exc:  # ELOOP, ENOTDIR: a link or a file where a folder belongs
        raise _what_is_there(exc, fd, name, path, stat.S_ISDIR) from None


@contextmanager
def folder(path: Path, root: Path, *, create: bool = False) -> Iterator[int]:
    """A descriptor on the folder `path` (`root` itself, or below it), reached without following any link below
    `root`; `create`: missing folders are made (0700). Closed on exit."""
    names = _below(path, root) if path != root else ()
    if create:
        os.makedirs(root, mode=0o700, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walked = root
        for name in names:
            walked = walked / name
            child = _open_child_dir(fd, name, walked, create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _open_in(fd: int, name: str, path: Path, flags: int, mode: int) -> int:
    """The regular file `name` in the folder `fd`, opened without following a link or blocking."""
    if not flags & os.O_EXCL:  # with it, the kernel refuses whatever has the name (FileExistsError)
        try:
            before = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            pass  # O_CREAT makes it; else the open below says so
        else:
            if not stat.S_ISREG(before.st_mode):  # a device or a FIFO is never even opened
                raise _refusal(path, before.st_mode)
    try:
        out = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=fd)
    except (FileNotFoundError, FileExistsError, PermissionError):  # FileExistsError: O_EXCL, whatever is there
        raise
    except OSError as exc:  # ELOOP (a link), ENXIO (a FIFO without a reader), EISDIR …: say what is there
        raise _what_is_there(exc, fd, name, path, stat.S_ISREG) from None
    try:
        info = os.fstat(out)
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(path, info.st_mode)
        os.set_blocking(out, True)  # O_NONBLOCK was there only so the open could not hang
    except BaseException:
        os.close(out)
        raise
    return out


def open_file(path: Path, root: Path, flags: int = os.O_RDONLY, *, mode: int = 0o600, create_dirs: bool = False) -> int:
    """A descriptor on the regular file `path` below `root`, opened with `flags` (O_CREAT makes it `mode`).
    `OwnFileRefused` for a link on the way or anything but a regular file; FileNotFoundError and other OSErrors
    as open gives them. `create_dirs`: the folders on the way are made when missing."""
    with folder(path.parent, root, create=create_dirs) as fd:
        return _open_in(fd, path.name, path, flags, mode)


def read_file(path: Path, root: Path, limit: int) -> bytes:
    """The whole regular file `path` below `root`; `TooLarge` past `limit` bytes (never read past it)."""
    fd = open_file(path, root)
    return read_fd(fd, path, limit)


def read_fd(fd: int, path: Path, limit: int) -> bytes:
    """The rest of the open file `fd` (closed here), up to `limit` bytes; `TooLarge` past them."""
    parts: list[bytes] = []
    total = 0
    with open(fd, "rb", buffering=0, closefd=True) as f:
        while chunk := f.read(min(_CHUNK, limit + 1 - total)):
            parts.append(chunk)
            total += len(chunk)
            if total > limit:
                raise TooLarge(path, f"larger than {_size(limit)}")
    return b"".join(parts)


def read_named(path: Path, limit: int) -> bytes:
    """A file a person named (`AMA_CREDENTIALS`, the default credentials file): its last link is followed (a
    dotfiles checkout links it), but what it names must be a regular file, opened without blocking and read
    up to `limit` bytes."""
    info = os.stat(path)  # a stat opens nothing: a FIFO or a device is refused before any open
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular(path, kind_of(info.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):  # swapped since the stat
            raise NotRegular(path, kind_of(now.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return read_fd(fd, path, limit)


def append(path: Path, root: Path, data: bytes) -> None:
    """`data` appended to the regular file `path` below `root` (made 0600 with its folders when missing)."""
    fd = open_file(path, root, os.O_WRONLY | os.O_APPEND | os.O_CREAT, create_dirs=True)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_file(path: Path, root: Path, data: bytes, *, mode: int = 0o600, sync: bool = True) -> None:
    """`path` below `root` replaced by `data` in one rename (its folders made when missing): a new file beside
    it, created exclusively, written, synced, renamed over the name, the folder synced. Whatever had the name
    (a link, a FIFO) is replaced, never followed or opened; a folder there is an OSError."""
    with folder(path.parent, root, create=True) as fd:
        replace_in(fd, path.name, data, mode, sync=sync)


def replace_in(fd: int, name: str, data: bytes, mode: int | None, *, sync: bool = False) -> None:
    """`name` in the folder `fd` replaced by `data`, whole or not at all: a new file beside it (created exclusively,
    no link followed) written and renamed over the name, so whatever had it (a link, a FIFO) is replaced, never
    followed or opened. `mode`: the new file's (None: what creating a file gives, 0666 less the umask); `sync`: the
    file and the folder synced. Also /rewind's way of putting a workspace file back (session/history/rewind.py)."""
    tmp = f".{name}.{os.urandom(6).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    out = os.open(tmp, flags, 0o666 if mode is None else mode, dir_fd=fd)  # never wider than `mode`, even at first
    try:
        try:
            if mode is not None:
                os.fchmod(out, mode)  # the umask can only take bits away
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
            if sync:
                os.fsync(out)
        finally:
            os.close(out)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise
    if sync:
        try:
            os.fsync(fd)
        except OSError:  # a file system that cannot sync a folder has nothing more to offer
            pass


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
