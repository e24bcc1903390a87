"""Sessions on disk: one append-only JSONL file per session (layout and guarantees: docs/sessions.md).

    <data_dir>/sessions/<session_id>.jsonl   header line, then one entry a line
    <data_dir>/sessions/<session_id>/        handoffs and inventories
    <data_dir>/sessions/index.json           listing cache (listing.py), safe to delete

Crash safety comes from the write pattern, not from locks or journals: each entry is one `os.write` of one
complete line on an O_APPEND descriptor, so a crash loses at most the line being written, and a line only
counts once its newline is on disk. Readers skip a torn last line and any corrupt line, with a log line.

This module is the store the session layer uses (`SessionStore`: create, open, read, list, delete a session,
prune handoff folders) and names its sessions; the parts live beside it, one job each: `reader.py` (decoding a
file), `writer.py` (appending to one), `locks.py` (who holds a file), `store_errors.py` (what can go wrong),
`listing.py` (session/list), `files.py` (opening only regular files), `entries.py` (what a line holds). The
names the session layer needs are importable from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from ama_acp.credentials import fsync_directory
from ama_acp.errors import StoreError
from ama_acp.redact import Redactor
from ama_acp.secrets import names_generation
from ama_acp.session.store.checkpoint_files import remove_checkpoints
from ama_acp.session.store.early import Reserved, open_new_locked
from ama_acp.session.store.entries import Entry, Header
from ama_acp.session.store.errors import (
    InvalidSessionId,
    NotASessionFile,
    SessionBusy,
    SessionExists,
    SessionFormatError,
    SessionNotFound,
    SessionWriteError,
    in_words,
)
from ama_acp.session.store.files import NotRegularFile, first_line, open_regular
from ama_acp.session.store.holders import Holder, held_elsewhere
from ama_acp.session.store.listing import InvalidCursor, SessionLister, SessionSummary
from ama_acp.session.store.locks import busy_error, held_by, in_use, lock_for_writing, lock_holder
from ama_acp.session.store.reader import MAX_LINE_BYTES, LoadedSession, decode_header, read_session
from ama_acp.session.store.task_journal import remove_task_journal
from ama_acp.session.store.writer import FsyncPolicy, SessionWriter

__all__ = [
    "Holder",
    "InvalidCursor",
    "InvalidSessionId",
    "LoadedSession",
    "MAX_LINE_BYTES",
    "NotASessionFile",
    "SessionBusy",
    "SessionExists",
    "SessionFormatError",
    "SessionNotFound",
    "SessionStore",
    "SessionSummary",
    "SessionWriteError",
    "SessionWriter",
    "StoreError",
    "new_session_id",
    "read_session",
]

log = logging.getLogger(__name__)


_VALID_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
# The shape new_session_id gives: retention touches only folders so named (seed 003_: only session-id folders),
# never one a person or another program put beside them, though its name would be a valid id.
_MADE_ID = re.compile(r"ses_[0-9a-f]{24}")


def new_session_id() -> str:
    """`ses_` + milliseconds since the epoch (hex, so ids sort by creation) + 48 random bits."""
    return f"ses_{time.time_ns() // 1_000_000:012x}{os.urandom(6).hex()}"


def is_valid_session_id(session_id: object) -> bool:
    return isinstance(session_id, str) and _VALID_ID.fullmatch(session_id) is not None


def check_session_id(session_id: object) -> str:
    # Letters, digits, _ and - only: no separator, no dot, so an id can never name a path elsewhere.
    if not isinstance(session_id, str) or not is_valid_session_id(session_id):
        raise InvalidSessionId(f"no session {session_id!r} (not a valid session id)")
    return session_id


def _remove_new_file(path: Path) -> None:
    """A file create() made but could not finish (no header, or no lock on it): removed, so that no
    header-less file is left to list or load. A failure to remove it is logged; the first error counts."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("%s: cannot remove the unfinished session file: %s", path, exc)


def _last_newline(fd: int, size: int) -> int:
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        i = os.pread(fd, pos - start, start).rfind(b"\n")
        if i >= 0:
            return start + i
        pos = start
    return -1


class SessionStore:
    def __init__(
        self, data_dir: str | os.PathLike[str], *, redactor: Redactor | None = None, fsync: FsyncPolicy = "turn"
    ):
        self.sessions_dir = Path(data_dir) / "sessions"
        # Secrets are collected from the environment here, not per line, and again only when more are registered
        # (an MCP server's token the editor passed): names_generation() changes then.
        self._fixed_redactor = redactor
        self._redactor = redactor if redactor is not None else Redactor.from_environ()
        self._redactor_generation = names_generation()
        self._fsync: FsyncPolicy = fsync
        self._lister = SessionLister(self.sessions_dir, is_valid_session_id, MAX_LINE_BYTES)
        self._dir_checked = False

    def redactor(self) -> Redactor:
        """The redactor for the next line: the one given, else the environment's, collected again when the set
        of secrets grew (a generation check per line, nothing more)."""
        if self._fixed_redactor is not None:
            return self._fixed_redactor
        generation = names_generation()
        if generation != self._redactor_generation:
            self._redactor, self._redactor_generation = Redactor.from_environ(), generation
        return self._redactor

    def path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{check_session_id(session_id)}.jsonl"

    def handoff_dir(self, session_id: str) -> Path:
        """Where compaction keeps handoffs and inventories (created by whoever writes there first)."""
        return self.sessions_dir / check_session_id(session_id)

    def exists(self, session_id: str) -> bool:
        return is_valid_session_id(session_id) and self.path(session_id).is_file()

    def create(self, header: Header, entries: Sequence[Entry] = ()) -> SessionWriter:
        """A new session file holding `header`, then `entries` (a fork's copy of its original: all of them or,
        after a failure, none). Every way this can fail but a name already taken (`SessionExists`) or locked
        (`SessionBusy`) is a SessionWriteError saying why: the sessions path is not a directory, a full disk, a
        size limit, a read-only directory, a failed fsync. Nothing is left behind by a failure: the half-made
        file is removed again."""
        path = self.path(header.session_id)
        self._private_dir(path)
        # Conversations are private: the directory and files are for this user only.
        fd = open_new_locked(path, self.sessions_dir, header.session_id)
        writer = SessionWriter(path, fd, 0, self.redactor, self._fsync)
        with self._kept_or_removed(writer):
            writer.write_header(header)
            for entry in entries:
                writer.append(entry, sync=False)  # one fsync below for the whole copy
            self._synced(fd)
        return writer

    def adopt(self, reserved: Reserved) -> SessionWriter:
        """The writer of a file `early.reserve` made before session/new was answered, synced now as `create`
        syncs a new file (the fsyncs the answer did not wait for). A failure is a SessionWriteError, and the
        file is removed again."""
        path, fd = reserved.path, reserved.fd
        writer = SessionWriter(path, fd, reserved.end, self.redactor, self._fsync)
        with self._kept_or_removed(writer):
            self._private_dir(path)
            self._synced(fd)
        return writer

    def _synced(self, fd: int) -> None:
        """A new file's bytes and its name in the folder flushed to disk (unless the policy is "never"), so that
        it survives a power cut too."""
        if self._fsync != "never":
            os.fsync(fd)
            fsync_directory(self.sessions_dir)

    @contextlib.contextmanager
    def _kept_or_removed(self, writer: SessionWriter) -> Iterator[None]:
        """A new file finished in the block, or discarded and removed when the block fails; an OSError of the
        fsyncs becomes a SessionWriteError saying the file could not be flushed."""
        try:
            yield
        except BaseException as exc:
            writer.discard()
            _remove_new_file(writer.path)
            if isinstance(exc, OSError) and not isinstance(exc, SessionWriteError):
                raise SessionWriteError(writer.path, f"it could not be flushed to disk: {in_words(exc)}", exc) from exc
            raise

    def _private_dir(self, path: Path) -> None:
        """The sessions folder exists and is 0700 (also one made by an older ama or by hand). `path` is the file
        about to be made, for the error: a SessionWriteError when the folder cannot be made or is not one."""
        if self._dir_checked:
            return
        try:
            self.sessions_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.stat(self.sessions_dir).st_mode & 0o077:
                os.chmod(self.sessions_dir, 0o700)
        except (FileExistsError, NotADirectoryError) as exc:  # a file (or a dangling link) where a folder belongs
            raise SessionWriteError(path, f"{self.sessions_dir} is not a directory", exc) from exc
        except OSError as exc:
            raise SessionWriteError(
                path, f"the folder {self.sessions_dir} cannot be used: {in_words(exc)}", exc
            ) from exc
        self._dir_checked = True

    def open_writer(self, session_id: str) -> SessionWriter:
        """Append to an existing session. A torn last line (from a crash) is cut off first, so the next
        entry starts on a line of its own. Only a regular file is opened (NotASessionFile otherwise)."""
        path = self.path(session_id)
        fd = _open_for_append(path, session_id)
        lock_for_writing(fd, path)
        try:
            info = os.fstat(fd)
            if not _names(path, info):  # deleted (or replaced) between the open and the lock
                raise SessionNotFound(f"no session {session_id} (its file was removed while it was opened)")
            first = first_line(fd, MAX_LINE_BYTES)
            if first is None:
                raise SessionFormatError(f"{path}: the header line is incomplete or longer than {MAX_LINE_BYTES} bytes")
            decode_header(first, path)  # never append to a file of a newer format
            size = _cut_torn_line(fd, path, info.st_size)
        except BaseException as exc:
            os.close(fd)
            if isinstance(exc, OSError) and not isinstance(exc, SessionWriteError):  # a pread that failed (EIO)
                raise SessionWriteError(path, f"it cannot be read back: {in_words(exc)}", exc) from exc
            raise
        return SessionWriter(path, fd, size, self.redactor, self._fsync)

    def held_by(self, session_id: str) -> int | None:
        """The pid of the process whose writer holds the session's file (None: nobody, or it cannot be told)."""
        return held_by(self.path(session_id))

    def held_elsewhere(self, session_ids: Iterable[str]) -> dict[str, Holder]:
        """Of these sessions, those another process holds open, with its pid and whether a turn is running."""
        return held_elsewhere({sid: self.path(sid) for sid in session_ids})

    def read(self, session_id: str) -> LoadedSession:
        return read_session(self.path(session_id))

    def list(
        self, cwd: str | None = None, cursor: str | None = None, page_size: int = 50, *, spoken_only: bool = False
    ) -> tuple[list[SessionSummary], str | None]:
        """A page of sessions, newest first, and the cursor of the next page (None: this is the last).
        `spoken_only`: only sessions with a prompt or slash command in them (what session/list shows)."""
        try:
            return self._lister.list(cwd, cursor, page_size, spoken_only=spoken_only)
        except NotADirectoryError:  # the sessions path is a file: nothing was ever saved there
            log.warning("%s is not a directory: no saved sessions to list", self.sessions_dir)
            return [], None

    def prune_handoffs(self, keep_days: int, *, except_id: str | None = None) -> int:
        """Remove the handoff folders of sessions untouched for `keep_days` — neither their file nor their folder
        modified since — and those whose session file is gone (docs/sessions.md "Handoff retention"); with 0,
        nothing (seed 003_: 0 turns pruning off). Only folders named as ama names its sessions (`ses_…`). Never the
        folder of `except_id` (the session opening or compacting), nor of a session an ama process has open (its
        file is locked): a live context names its handoff's path. Returns how many were removed."""
        if keep_days <= 0:
            log.info("handoff retention: off ([compaction] retention_days = 0)")
            return 0
        cutoff = time.time() - keep_days * 86400
        try:
            folders = list(self.sessions_dir.iterdir())
        except FileNotFoundError:
            return 0
        except OSError as exc:
            log.warning("handoff retention: cannot list %s: %s", self.sessions_dir, in_words(exc))
            return 0
        removed = 0
        for folder in folders:
            sid = folder.name
            if sid == except_id or _MADE_ID.fullmatch(sid) is None:
                continue
            if _expired(folder, self.path(sid), cutoff):
                import shutil  # with bz2 and lzma: only when there is a folder to remove (pruning runs at start)

                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed

    def delete(self, session_id: str) -> None:
        """Remove the session file, then its handoff folder. The file goes first, so a session is never
        listed without its file. A session some ama process has open (its writer's lock is held) is not
        removed: SessionBusy, naming the holder's pid where the system says, and nothing is touched. Something
        else under the file's name (docs/sessions.md "Odd files in the sessions folder"): a symlink, FIFO,
        socket or device node loses its name (never followed, never opened); a directory is left alone
        (NotASessionFile)."""
        import shutil

        path = self.path(session_id)
        existed = _remove_session_file(path, session_id)
        folder = self.handoff_dir(session_id)
        try:
            info = os.lstat(folder)
        except (FileNotFoundError, NotADirectoryError):
            pass
        else:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(folder)
            elif stat.S_ISLNK(info.st_mode):  # a link in its place: the link goes, never what it points to
                folder.unlink()
        remove_checkpoints(self.sessions_dir.parent, session_id)  # its /rewind copies go with it
        remove_task_journal(self.sessions_dir.parent, session_id)  # and its tasks (session/store/task_journal.py)
        if not existed:
            raise SessionNotFound(f"no session {session_id}")


def _open_for_append(path: Path, session_id: str) -> int:
    """A descriptor on the session's file, for appending; only a regular file is opened."""
    try:
        fd, _ = open_regular(path, os.O_RDWR | os.O_APPEND)
    except (FileNotFoundError, NotADirectoryError):
        raise SessionNotFound(f"no session {session_id}") from None
    except NotRegularFile as exc:
        raise NotASessionFile(path, exc.kind) from None
    except OSError as exc:  # e.g. a read-only file: the session can be read but not continued on disk
        raise SessionWriteError(path, in_words(exc), exc) from exc
    return fd


def _cut_torn_line(fd: int, path: Path, size: int) -> int:
    """The file's size once a torn last line (no newline: a crash mid-write) is cut off, so the next entry
    starts on a line of its own."""
    if os.pread(fd, 1, size - 1) == b"\n":
        return size
    end = _last_newline(fd, size) + 1
    log.warning("%s: cut off a torn last line at byte offset %d (%d bytes)", path, end, size - end)
    try:
        os.ftruncate(fd, end)
    except OSError as exc:
        raise SessionWriteError(path, f"its torn last line cannot be cut off: {in_words(exc)}", exc) from exc
    return end


def _expired(folder: Path, file: Path, cutoff: float) -> bool:
    """Whether a handoff folder is to go: a real folder whose session file is gone, or whose session is neither
    touched since `cutoff` nor open in an ama process (its file locked)."""
    try:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode):  # a file, or a symlink: not a folder of ours
            return False
        touched = info.st_mtime
        try:
            touched = max(touched, os.lstat(file).st_mtime)
        except FileNotFoundError:
            return True  # its session is gone: nothing will read the folder again
    except OSError:
        return False
    if touched >= cutoff:
        return False
    return not in_use(file)


def _names(path: Path, info: os.stat_result) -> bool:
    """Whether `path` (not followed) is still the file `info` was taken of."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def _remove_session_file(path: Path, session_id: str) -> bool:
    """delete()'s first half: whether there was something to remove under the name."""
    try:
        fd, info = open_regular(path)
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: the sessions path is a file
        return False
    except NotRegularFile as exc:
        if exc.kind == "a directory":  # not ama's to remove: it may hold anything
            raise NotASessionFile(path, exc.kind) from None
        path.unlink()  # the name only: a link is not followed, a FIFO or device is not opened
        log.warning("%s was %s, not a session file; its name was removed", path, exc.kind)
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy_error(session_id, lock_holder(info)) from None
        except OSError as exc:  # a file system that cannot lock cannot say whether it is open: remove it anyway
            log.info("%s: cannot lock it before deleting (%s)", path, exc)
        # Locked: no writer holds it, and one opening now finds the name gone (open_writer checks it after its
        # lock). The name must still be this file: never remove one put there since the open.
        if not _names(path, info):
            raise SessionBusy(f"session {session_id} changed while it was being deleted (another process is using it)")
        path.unlink()
    finally:
        os.close(fd)
    return True
