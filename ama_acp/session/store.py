"""Sessions on disk: one append-only JSONL file per session (layout and guarantees: docs/sessions.md).

    <data_dir>/sessions/<session_id>.jsonl   header line, then one entry a line
    <data_dir>/sessions/<session_id>/        handoffs and inventories
    <data_dir>/sessions/index.json           listing cache (listing.py), safe to delete

Crash safety comes from the write pattern, not from locks or journals: each entry is one `os.write` of one
complete line on an O_APPEND descriptor, so a crash loses at most the line being written, and a line only
counts once its newline is on disk. Readers skip a torn last line and any corrupt line, with a log line.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import secrets
import shutil
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Literal

import msgspec

from ama_acp.conversation.messages import Message
from ama_acp.credentials import fsync_directory
from ama_acp.errors import StoreError
from ama_acp.redact import Redactor
from ama_acp.rpc.framing import MAX_LINE as WIRE_MAX_LINE
from ama_acp.secrets import names_generation
from ama_acp.session.entries import (
    FORMAT_VERSION,
    KNOWN_TAGS,
    REPLAY_TEXT_LIMIT,
    CompactionEntry,
    Entry,
    Header,
    MessageEntry,
    ToolCallEntry,
    TurnEntry,
    clip_replay_text,
)
from ama_acp.session.files import NotRegularFile, first_line, open_regular
from ama_acp.session.listing import InvalidCursor, SessionLister, SessionSummary

__all__ = [
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
]

log = logging.getLogger(__name__)

FsyncPolicy = Literal["turn", "always", "never"]


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


def _reason(exc: BaseException) -> str:
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


_VALID_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def new_session_id() -> str:
    """`ses_` + milliseconds since the epoch (hex, so ids sort by creation) + 48 random bits."""
    return f"ses_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


def is_valid_session_id(session_id: object) -> bool:
    return isinstance(session_id, str) and _VALID_ID.fullmatch(session_id) is not None


def check_session_id(session_id: object) -> str:
    # Letters, digits, _ and - only: no separator, no dot, so an id can never name a path elsewhere.
    if not isinstance(session_id, str) or not is_valid_session_id(session_id):
        raise InvalidSessionId(f"no session {session_id!r} (not a valid session id)")
    return session_id


class _HeaderProbe(msgspec.Struct):
    """Just enough of a first line to decide whether this ama may read the rest."""

    t: str = ""
    format: int = 0


class _TagProbe(msgspec.Struct):
    t: str | None = None


_probe_decoder = msgspec.json.Decoder(_HeaderProbe)
_tag_decoder = msgspec.json.Decoder(_TagProbe)
_header_decoder = msgspec.json.Decoder(Header)
_entry_decoder = msgspec.json.Decoder(Entry)
_encoder = msgspec.json.Encoder()


def _decode_header(line: bytes | memoryview, path: Path) -> Header:
    try:
        probe = _probe_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise SessionFormatError(f"{path}: not an ama session file (unreadable header: {exc})") from exc
    if probe.t != "header" or probe.format < 1:
        raise SessionFormatError(f"{path}: not an ama session file (no header line)")
    if probe.format > FORMAT_VERSION:
        raise SessionFormatError(
            f"{path}: written by a newer ama (format {probe.format}); this ama reads up to format "
            f"{FORMAT_VERSION} — upgrade ama"
        )
    try:
        return _header_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise SessionFormatError(f"{path}: invalid session header: {exc}") from exc


class LoadedSession(msgspec.Struct):
    header: Header
    entries: list[Entry]
    torn_tail: bool = False  # the last line had no newline (a crash mid-write); it was skipped
    skipped_lines: int = 0  # complete lines skipped: corrupt, or an entry type this ama does not know

    @property
    def messages(self) -> list[Message]:
        return [e.message for e in self.entries if isinstance(e, MessageEntry)]


_READ_CHUNK = 1 << 20

# The longest line a session file may hold. ACP takes a message line of up to rpc.framing.MAX_LINE, and a
# prompt that long is stored as one `msg` line of about the same size, so the cap sits a megabyte above it:
# whatever the wire accepted loads back. A longer line is damage or hostile: the reader skips it as corrupt
# (its bytes are dropped as they are read, never held whole), and the writer refuses to write one.
MAX_LINE_BYTES = WIRE_MAX_LINE + (1 << 20)


def read_session(path: Path) -> LoadedSession:
    """Decode a whole session file with one typed decoder, a megabyte at a time.

    Chunks, not one read of the whole file, so the peak memory of a load is the decoded session plus a
    chunk rather than plus the whole file; lines are decoded from memoryview slices, never copied. Only a
    regular file is read (session/files.py): anything else under the name is a NotASessionFile.
    """
    try:
        fd, _ = open_regular(path)
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: the sessions path is a file, so no session
        raise SessionNotFound(f"no session file {path}") from None
    except NotRegularFile as exc:
        raise NotASessionFile(path, exc.kind) from None
    with open(fd, "rb", buffering=0) as f:
        return decode_session(iter(partial(f.read, _READ_CHUNK), b""), path)


def decode_session(chunks: Iterable[bytes], path: Path, max_line: int = MAX_LINE_BYTES) -> LoadedSession:
    """The session in `chunks` (a file's bytes, cut anywhere): the same result however it is cut, in time
    linear in its length. A line longer than `max_line` is skipped as corrupt, its bytes dropped as they come;
    a first line that long is no header (SessionFormatError)."""
    header: Header | None = None
    entries: list[Entry] = []
    append = entries.append
    decode = _entry_decoder.decode
    skipped = _Skipped(path)
    pending: list[bytes] = []  # the start of a line that goes on into the next chunk
    pending_len = 0  # its length so far (also while it is being dropped)
    dropping = False  # the pending line is longer than max_line: its bytes are dropped up to its newline
    at = 0  # file offset of the chunk's first byte
    for chunk in chunks:
        size = len(chunk)
        last = chunk.rfind(b"\n")
        if last < 0:
            pending_len += size
            if not dropping:
                if pending_len > max_line:
                    if header is None:
                        raise _header_too_long(path, max_line)
                    pending, dropping = [], True
                else:
                    pending.append(chunk)
            at += size
            continue
        pos = 0
        if dropping:  # the dropped line ends in this chunk
            pos = chunk.find(b"\n") + 1
            skipped.too_long(at - pending_len, pending_len + pos - 1, max_line)
            buf, buf_at, dropping = chunk, at, False
        elif pending:  # joined once, when the line is whole: each byte is copied once however long the line
            buf, buf_at = b"".join((*pending, chunk)), at - pending_len
            last += pending_len
        else:
            buf, buf_at = chunk, at
        view = memoryview(buf)
        find = buf.find
        if header is None:
            end = find(b"\n")
            if end > max_line:
                raise _header_too_long(path, max_line)
            header = _decode_header(view[:end], path)
            pos = end + 1
        while pos <= last:
            end = find(b"\n", pos)
            if end - pos > max_line:
                skipped.too_long(buf_at + pos, end - pos, max_line)
            elif end > pos:  # blank lines are harmless
                try:
                    append(decode(view[pos:end]))
                except (msgspec.DecodeError, RecursionError) as exc:
                    # One bad line costs that line, never the session: corrupt bytes, a field of the wrong
                    # type, or nesting deeper than the decoder goes (RecursionError).
                    skipped.note(view[pos:end], buf_at + pos, exc)
            pos = end + 1
        del view
        pending_len = len(buf) - last - 1
        if pending_len > max_line:
            pending, dropping = [], True
        else:
            pending = [buf[last + 1 :]] if pending_len else []
        at += size
    if header is None:
        raise SessionFormatError(f"{path}: the header line is incomplete (the session was never fully created)")
    torn = pending_len > 0
    if torn:
        log.warning(
            "%s: skipped a torn last line at byte offset %d (%d bytes; a crash while it was written)",
            path,
            at - pending_len,
            pending_len,
        )
    skipped.report()
    return LoadedSession(header=header, entries=entries, torn_tail=torn, skipped_lines=skipped.count)


def _header_too_long(path: Path, max_line: int) -> SessionFormatError:
    return SessionFormatError(f"{path}: not an ama session file (its first line is longer than {max_line} bytes)")


class _Skipped:
    """Lines the reader could not use: each corrupt one is logged (up to a few), unknown types once per type."""

    _LOG_LIMIT = 5

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self.corrupt = 0
        self.unknown: Counter[str] = Counter()

    def note(self, line: memoryview, offset: int, exc: Exception) -> None:
        self.count += 1
        try:
            tag = _tag_decoder.decode(line).t
        except (msgspec.DecodeError, RecursionError):
            tag = None
        if isinstance(tag, str) and tag not in KNOWN_TAGS:
            self.unknown[tag] += 1  # written by a newer ama of the same format: skip, don't fail
            return
        self.corrupt += 1
        if self.corrupt <= self._LOG_LIMIT:
            log.warning("%s: skipped a corrupt line at byte offset %d: %s", self.path, offset, exc)

    def too_long(self, offset: int, length: int, limit: int) -> None:
        """A line past the cap: damaged like a corrupt one (never decoded, never held whole)."""
        self.count += 1
        self.corrupt += 1
        if self.corrupt <= self._LOG_LIMIT:
            log.warning(
                "%s: skipped a corrupt line at byte offset %d: %d bytes, longer than the %d a line may hold",
                self.path,
                offset,
                length,
                limit,
            )

    def report(self) -> None:
        if self.corrupt > self._LOG_LIMIT:
            log.warning("%s: skipped %d corrupt lines in all", self.path, self.corrupt)
        for tag, n in self.unknown.items():
            log.info("%s: skipped %d entries of unknown type %r (written by a newer ama?)", self.path, n, tag)


# Deeper values than this are not stored: msgspec (like json) stops decoding near 1000 levels, so a line
# nested that deep would be written fine and never read back. Real tool arguments are a few levels deep.
MAX_STORED_DEPTH = 64


def _deeper_than(value: object, limit: int) -> bool:
    """Whether `value` nests lists/dicts more than `limit` levels (iterative: no recursion to run out of)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _bounded_tool_entry(entry: ToolCallEntry) -> ToolCallEntry:
    """The replay text clipped to its 4 KB; raw input too deep to read back left out (replay shows none)."""
    changes: dict[str, object] = {}
    if len(entry.content_text) > REPLAY_TEXT_LIMIT // 4:
        clipped = clip_replay_text(entry.content_text)
        if clipped is not entry.content_text:
            changes["content_text"] = clipped
    if entry.raw_input is not None and _deeper_than(entry.raw_input, MAX_STORED_DEPTH):
        log.warning("%s: tool call %s: its input nests too deep to store; kept without it", entry.name, entry.wire_id)
        changes["raw_input"] = None
    return msgspec.structs.replace(entry, **changes) if changes else entry


class SessionWriter:
    """Appends entries to one session file; the only writer of that file while open (an exclusive flock).

    Not a coroutine API on purpose: a write of one line to a local file is fast, and keeping it synchronous
    keeps the order of entries the order of calls. The fsync at turn ends is the one slow call.
    """

    # Whether the path still names this writer's file is checked before the first append of each turn and
    # every this many appends: a stat costs about as much as an append, so not before every one.
    CHECK_EVERY = 256

    def __init__(self, path: Path, fd: int, end: int, redactor: Callable[[], Redactor], fsync: FsyncPolicy) -> None:
        self.path = path
        self.session_id = path.stem
        self._fd = fd
        self._end = end  # the end of the last complete line: where a failed write is cut back to
        self._redactor = redactor  # the store's: it learns secrets registered later (an MCP server's token)
        self._fsync = fsync
        self._needs_repair = False
        info = os.fstat(fd)
        self._ident = (info.st_dev, info.st_ino)
        self._until_check = 0  # appends before the next check; 0: the next append checks

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, entry: Entry) -> None:
        """Write one entry as one line. Raises SessionWriteError when the file cannot take it (the file stays
        consistent: whatever part of the line reached the disk is cut off again)."""
        if self._fd < 0:
            raise ValueError(f"session writer for {self.path} is closed")
        if self._until_check <= 0:
            self._check_still_there()
        self._until_check -= 1
        if type(entry) is ToolCallEntry:
            entry = _bounded_tool_entry(entry)
        try:
            line = _encoder.encode(entry)
        except (RecursionError, msgspec.EncodeError, TypeError, OverflowError) as exc:
            raise SessionWriteError(self.path, f"an entry could not be encoded: {type(exc).__name__}", exc) from exc
        self._write_line(line)
        if type(entry) is TurnEntry:
            self._until_check = 0  # the next turn's first entry checks again
        if self._fsync == "always" or (self._fsync == "turn" and type(entry) in (TurnEntry, CompactionEntry)):
            self._sync()

    def _check_still_there(self) -> None:
        """The path still names the file this writer appends to: another program may have removed it (`rm`,
        another tool) or put another file in its place, and appending to an unlinked file saves nothing. Raises
        SessionWriteError saying so (the session then goes on unsaved, and the person is told once)."""
        self._until_check = self.CHECK_EVERY
        try:
            now = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            raise SessionWriteError(self.path, "it was deleted by another program") from None
        except OSError as exc:
            raise SessionWriteError(self.path, f"it cannot be found again: {_reason(exc)}", exc) from exc
        if (now.st_dev, now.st_ino) != self._ident:
            raise SessionWriteError(self.path, "another program replaced it with a different file")

    def _write_line(self, line: bytes) -> None:
        redactor = self._redactor()
        if redactor:
            line = redactor.redact_line(line)
        if len(line) >= MAX_LINE_BYTES:  # it would never read back: the reader skips such a line as damaged
            raise SessionWriteError(
                self.path, f"an entry of {len(line)} bytes is longer than the {MAX_LINE_BYTES} a session line may hold"
            )
        data = line + b"\n"
        if self._needs_repair:
            try:
                self._repair()
            except OSError as exc:
                raise SessionWriteError(self.path, _reason(exc), exc) from exc
        written = 0
        try:
            # One write in practice; the loop only covers a short write (a signal, a full disk, a size limit:
            # the kernel writes what fits and the next write fails with ENOSPC / EFBIG).
            while written < len(data):
                n = os.write(self._fd, data[written:] if written else data)
                if n <= 0:
                    raise OSError(f"short write to {self.path}")
                written += n
        except BaseException as exc:
            if written:
                # A partial line would glue itself to the next entry: cut it off now, or before the next write.
                self._needs_repair = True
                try:
                    self._repair()
                except OSError as cut:  # expected on a failing disk: a log line, not a traceback
                    log.warning(
                        "%s: cannot cut off a partial line (%s); will retry before the next write", self.path, cut
                    )
            if isinstance(exc, OSError):
                raise SessionWriteError(self.path, _reason(exc), exc) from exc
            raise
        self._end += written

    def _sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:  # the line is written, but may not survive a power cut
            raise SessionWriteError(self.path, f"it could not be flushed to disk: {_reason(exc)}", exc) from exc

    def _repair(self) -> None:
        os.ftruncate(self._fd, self._end)
        self._needs_repair = False

    def sync(self) -> None:
        if self._fd >= 0:
            self._sync()

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._needs_repair:  # a partial line the failed write could not cut off: the last chance
            try:
                self._repair()
            except OSError as exc:
                log.warning("%s: a partial last line stays (the next load skips it): %s", self.path, exc)
        fd, self._fd = self._fd, -1
        try:
            if self._fsync != "never":
                os.fsync(fd)
        finally:
            os.close(fd)  # also releases the flock

    def _discard(self) -> None:
        """Closed without the fsync of close(): for a file that is about to be removed (a failed create)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lock(fd: int, path: Path) -> None:
    """The writer's exclusive lock, or the descriptor closed and SessionBusy (held elsewhere) or
    SessionWriteError (the file system cannot lock: ENOLCK on some network file systems)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = lock_holder(os.fstat(fd))
        except OSError:
            holder = None
        finally:
            os.close(fd)
        raise _busy(path.stem, holder) from None
    except OSError as exc:
        os.close(fd)
        raise SessionWriteError(path, f"it cannot be locked: {_reason(exc)}", exc) from exc


def _remove_new_file(path: Path) -> None:
    """A file create() made but could not finish (no header, or no lock on it): removed, so that no
    header-less file is left to list or load. A failure to remove it is logged; the first error counts."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("%s: cannot remove the unfinished session file: %s", path, exc)


def _busy(session_id: str, pid: int | None) -> SessionBusy:
    if pid is None:
        where = "another ama process (its file is locked)"
    elif pid == os.getpid():
        where = "this process"
    else:
        where = f"another ama process (pid {pid})"
    return SessionBusy(f"session {session_id} is open in {where}", pid)


_PROC_LOCKS = Path("/proc/locks")


def lock_holder(info: os.stat_result) -> int | None:
    """The pid holding a flock on the file `info` describes, from /proc/locks (Linux); None where the system
    does not say. A line reads `1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF` (device major and minor in
    hex, then the inode); waiting requests (`1: -> FLOCK …`) are not holders."""
    want = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    try:
        with open(_PROC_LOCKS, "rb") as f:
            text = f.read(1 << 20)  # bounded: thousands of locks fit
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] != b"FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(b":")
            if (int(major, 16), int(minor, 16), int(inode)) == want:
                return int(fields[4])
        except ValueError:
            continue
    return None


def _last_newline(fd: int, size: int) -> int:
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        i = os.pread(fd, pos - start, start).rfind(b"\n")
        if i >= 0:
            return start + i
        pos = start
    return -1


def _in_use(path: Path) -> bool:
    """Whether an ama process holds the session file open for writing (its writer's flock), or it cannot be told."""
    try:
        # O_NONBLOCK: a FIFO named like a session file must not block the retention thread for good.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return True
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # not a session file ama writes: nobody holds it
            return False
        # Shared and released at once: a writer opening this very moment could see it as busy, so only a
        # folder that would otherwise be removed is checked.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held; another error: the file system cannot say, so keep the folder
        return True
    finally:
        os.close(fd)  # releases the shared lock
    return False


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

    def create(self, header: Header) -> SessionWriter:
        """A new session file holding `header`. Every way this can fail but a name already taken
        (`SessionExists`) or locked (`SessionBusy`) is a SessionWriteError saying why: the sessions path is not
        a directory, a full disk, a size limit, a read-only directory, a failed fsync. Nothing is left behind
        by a failure: the half-made file is removed again."""
        path = self.path(header.session_id)
        self._private_dir(path)
        # Conversations are private: the directory and files are for this user only.
        try:
            # O_EXCL: whatever already has the name (a file, a FIFO, a link, even a dangling one) is never opened.
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise SessionExists(f"session {header.session_id} already exists") from None
        except OSError as exc:
            raise SessionWriteError(path, _reason(exc), exc) from exc
        try:
            _lock(fd, path)
        except BaseException:
            _remove_new_file(path)
            raise
        writer = SessionWriter(path, fd, 0, self.redactor, self._fsync)
        try:
            writer._write_line(_encoder.encode(header))
            if self._fsync != "never":
                os.fsync(fd)
                fsync_directory(self.sessions_dir)  # so the new name survives a power cut too
        except BaseException as exc:
            writer._discard()
            _remove_new_file(path)
            if isinstance(exc, OSError) and not isinstance(exc, SessionWriteError):  # the fsyncs
                raise SessionWriteError(path, f"it could not be flushed to disk: {_reason(exc)}", exc) from exc
            raise
        return writer

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
                path, f"the folder {self.sessions_dir} cannot be used: {_reason(exc)}", exc
            ) from exc
        self._dir_checked = True

    def open_writer(self, session_id: str) -> SessionWriter:
        """Append to an existing session. A torn last line (from a crash) is cut off first, so the next
        entry starts on a line of its own. Only a regular file is opened (NotASessionFile otherwise)."""
        path = self.path(session_id)
        try:
            fd, _ = open_regular(path, os.O_RDWR | os.O_APPEND)
        except (FileNotFoundError, NotADirectoryError):
            raise SessionNotFound(f"no session {session_id}") from None
        except NotRegularFile as exc:
            raise NotASessionFile(path, exc.kind) from None
        except OSError as exc:  # e.g. a read-only file: the session can be read but not continued on disk
            raise SessionWriteError(path, _reason(exc), exc) from exc
        _lock(fd, path)
        try:
            info = os.fstat(fd)
            if not _names(path, info):  # deleted (or replaced) between the open and the lock
                raise SessionNotFound(f"no session {session_id} (its file was removed while it was opened)")
            size = info.st_size
            first = first_line(fd, MAX_LINE_BYTES)
            if first is None:
                raise SessionFormatError(f"{path}: the header line is incomplete or longer than {MAX_LINE_BYTES} bytes")
            _decode_header(first, path)  # never append to a file of a newer format
            if os.pread(fd, 1, size - 1) != b"\n":
                end = _last_newline(fd, size) + 1
                log.warning("%s: cut off a torn last line at byte offset %d (%d bytes)", path, end, size - end)
                try:
                    os.ftruncate(fd, end)
                except OSError as exc:
                    raise SessionWriteError(path, f"its torn last line cannot be cut off: {_reason(exc)}", exc) from exc
                size = end
        except BaseException as exc:
            os.close(fd)
            if isinstance(exc, OSError) and not isinstance(exc, SessionWriteError):  # a pread that failed (EIO)
                raise SessionWriteError(path, f"it cannot be read back: {_reason(exc)}", exc) from exc
            raise
        return SessionWriter(path, fd, size, self.redactor, self._fsync)

    def read(self, session_id: str) -> LoadedSession:
        return read_session(self.path(session_id))

    def list(
        self, cwd: str | None = None, cursor: str | None = None, page_size: int = 50
    ) -> tuple[list[SessionSummary], str | None]:
        """A page of sessions, newest first, and the cursor of the next page (None: this is the last)."""
        try:
            return self._lister.list(cwd, cursor, page_size)
        except NotADirectoryError:  # the sessions path is a file: nothing was ever saved there
            log.warning("%s is not a directory: no saved sessions to list", self.sessions_dir)
            return [], None

    def prune_handoffs(self, keep_days: int, *, except_id: str | None = None) -> int:
        """Remove the handoff folders of sessions untouched for `keep_days` — neither their file nor their folder
        modified since; with 0 every one — and those whose session file is gone (docs/sessions.md "Handoff
        retention"). Never the folder of `except_id` (the session opening or compacting), nor of a session an ama
        process has open (its file is locked): a live context names its handoff's path. Returns how many were
        removed."""
        cutoff = time.time() - keep_days * 86400
        try:
            folders = list(self.sessions_dir.iterdir())
        except FileNotFoundError:
            return 0
        except OSError as exc:
            log.warning("handoff retention: cannot list %s: %s", self.sessions_dir, _reason(exc))
            return 0
        removed = 0
        for folder in folders:
            sid = folder.name
            if sid == except_id or not is_valid_session_id(sid):
                continue
            file = self.path(sid)
            try:
                info = os.lstat(folder)
                if not stat.S_ISDIR(info.st_mode):  # a file, or a symlink: not a folder of ours
                    continue
                touched = info.st_mtime
                try:
                    touched, orphan = max(touched, os.lstat(file).st_mtime), False
                except FileNotFoundError:
                    orphan = True
            except OSError:
                continue
            if not orphan and ((keep_days > 0 and touched >= cutoff) or _in_use(file)):
                continue
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
        if not existed:
            raise SessionNotFound(f"no session {session_id}")


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
            raise _busy(session_id, lock_holder(info)) from None
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
