"""Where checkpoints keep the bytes of files: `<data dir>/checkpoints/<session id>/<sha256>`, one file per
distinct content (content-addressed: a file saved twice with the same bytes is stored once), mode 0600 in
0700 folders. Plain copies, not a shadow git repository: no program runs on the person's (possibly hostile)
workspace — no filter, hook or fsmonitor a `.gitattributes` or config could name —, nothing depends on git
being installed, and only the files ama changed are ever read (docs/sessions.md "Checkpoints and /rewind").

Reading a file of the workspace never follows a final symlink and never opens a FIFO or device
(session/store/files.py `open_regular`); reading a copy back checks its hash, so a copy altered on disk is never
restored.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
from pathlib import Path

from ama_acp.errors import StoreError
from ama_acp.session.store.files import NotRegularFile, open_regular

log = logging.getLogger(__name__)

# A copy larger than this is not kept (the change is recorded as unrecorded, and /rewind leaves the file alone):
# a checkpoint must not fill the disk with one generated file.
MAX_COPY_BYTES = 64 * 1024 * 1024
_DIGEST = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1024 * 1024


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checkpoints_dir(data_dir: Path, session_id: str) -> Path:
    """The session's copies (`session_id` checked by the caller: the store's ids never hold a separator)."""
    return data_dir / "checkpoints" / session_id


def remove_checkpoints(data_dir: Path, session_id: str) -> None:
    """A deleted session's copies go with it (a link in the folder's place loses the link, never its target)."""
    folder = checkpoints_dir(data_dir, session_id)
    try:
        info = os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        folder.unlink(missing_ok=True)


def copy_checkpoints(data_dir: Path, source_id: str, target_id: str) -> None:
    """A fork's copies: the original's saved file contents, so a `/rewind` in the fork to a prompt it inherited
    can put files back. Only regular files of the original's folder come along (never through a link); a copy
    that fails is logged, and that rewind then names the file as one whose saved copy is missing."""
    source, target = checkpoints_dir(data_dir, source_id), checkpoints_dir(data_dir, target_id)
    try:
        if not stat.S_ISDIR(os.lstat(source).st_mode):
            return
        names = os.listdir(source)
    except OSError:
        return  # no copies (nothing was changed), or none readable: nothing to carry
    for name in names:
        src = source / name
        try:
            if not stat.S_ISREG(os.lstat(src).st_mode):
                continue
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copyfile(src, target / name, follow_symlinks=False)
            os.chmod(target / name, 0o600)
        except OSError as exc:
            log.warning("fork: cannot copy the checkpoint %s: %s", src, exc)


class Unreadable(StoreError):
    """The file cannot be copied; `reason` says why, in words for the person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _open(path: str) -> int | None:
    try:
        fd, _info = open_regular(Path(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except NotRegularFile as exc:
        raise Unreadable(f"it is {exc.kind}") from None
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    return fd


def read_file(path: str, limit: int = MAX_COPY_BYTES) -> bytes | None:
    """The bytes of the regular file at `path` (never through a final symlink, never a FIFO or device); None when
    there is no file. `Unreadable` when it is something else, larger than `limit`, or cannot be read."""
    fd = _open(path)
    if fd is None:
        return None
    parts: list[bytes] = []
    size = 0
    with open(fd, "rb", closefd=True) as f:
        while chunk := f.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise Unreadable(f"it is larger than {limit // (1024 * 1024)} MiB")
            parts.append(chunk)
    return b"".join(parts)


def file_digest(path: str) -> str | None:
    """The sha256 of the regular file at `path`, read in chunks (any size); None when there is no file;
    `Unreadable` as `read_file`."""
    fd = _open(path)
    if fd is None:
        return None
    h = hashlib.sha256()
    with open(fd, "rb", closefd=True) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


class BlobStore:
    """The copies of one session."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def put(self, data: bytes) -> str:
        """Saves `data` (once per content); its sha256. OSError when the data dir cannot be written."""
        name = digest(data)
        target = self.folder / name
        if os.path.lexists(target) and self.get(name) is not None:
            return name
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with open(fd, "wb", closefd=True) as f:
                f.write(data)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return name

    def get(self, name: str) -> bytes | None:
        """The copy named `name`, or None: a name that is no sha256 (a session file is not trusted), a copy that
        is missing, odd or altered."""
        if not isinstance(name, str) or _DIGEST.fullmatch(name) is None:
            return None
        try:
            data = read_file(str(self.folder / name))
        except Unreadable as exc:
            log.warning("checkpoint copy %s cannot be used: %s", name, exc.reason)
            return None
        if data is None or digest(data) != name:
            return None
        return data
