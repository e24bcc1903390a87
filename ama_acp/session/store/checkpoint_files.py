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

import logging
import os
import re
import stat
from pathlib import Path

from ama_acp import ownfiles
from ama_acp.errors import StoreError
from ama_acp.session.store.files import NotRegularFile, open_regular

log = logging.getLogger(__name__)

# A copy larger than this is not kept (the change is recorded as unrecorded, and /rewind leaves the file alone):
# a checkpoint must not fill the disk with one generated file.
MAX_COPY_BYTES = 64 * 1024 * 1024
_DIGEST = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1024 * 1024


def digest(data: bytes) -> str:
    import hashlib  # ~2 ms (OpenSSL's): the first checkpoint's, not a session's open

    return hashlib.sha256(data).hexdigest()


def checkpoints_dir(data_dir: Path, session_id: str) -> Path:
    """The session's copies (`session_id` checked by the caller: the store's ids never hold a separator)."""
    return data_dir / "checkpoints" / session_id


def remove_checkpoints(data_dir: Path, session_id: str) -> None:
    """A deleted session's copies go with it (a link in the folder's place loses the link, never its target)."""
    import shutil

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
            data = ownfiles.read_file(src, data_dir, MAX_COPY_BYTES)
            ownfiles.write_file(target / name, data_dir, data, sync=False)
        except OSError as exc:  # ownfiles' refusals too: a link planted as the fork's folder is never followed
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
    import hashlib

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
        self.folder = folder  # `checkpoints_dir`: <data dir>/checkpoints/<session id>
        self._root = folder.parent.parent  # the data dir: no link is followed below it

    def put(self, data: bytes) -> str:
        """Saves `data` (once per content); its sha256. OSError when the data dir cannot be written; an
        `OwnFileRefused` (an OSError too) when a link stands on the way: a checkpoints folder planted as a link
        never receives the copies (issue 39 point 11)."""
        name = digest(data)
        target = self.folder / name
        if os.path.lexists(target) and self.get(name) is not None:
            return name
        ownfiles.write_file(target, self._root, data, sync=False)
        return name

    def get(self, name: str) -> bytes | None:
        """The copy named `name`, or None: a name that is no sha256 (a session file is not trusted), a copy that
        is missing, odd or altered."""
        if not isinstance(name, str) or _DIGEST.fullmatch(name) is None:
            return None
        try:
            data = ownfiles.read_file(self.folder / name, self._root, MAX_COPY_BYTES)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link on the way, a FIFO, past the cap, a permission
            log.warning("checkpoint copy %s cannot be used: %s", name, exc)
            return None
        if digest(data) != name:
            return None
        return data
