"""session/list without parsing whole session files.

What a listing needs from a session — cwd, creation time, title, additional directories — lives in the
header line and in the last `title` / `dirs` entries; `updatedAt` is the file's mtime. Scanning for the last
title is cheap because every line starts with its tag (`{"t":"title",...`), and since files are
append-only, a scan never has to look at bytes it has seen before.

`index.json` beside the sessions caches what each file yielded, keyed by inode, size and mtime, plus how
far the file was scanned. It is only a cache: a missing, stale or corrupt index is rebuilt, concurrent
processes each replace it atomically (the last one wins, and the loser's work is just redone next time),
and a file that changed since is rescanned from where the cache stopped.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import stat
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import msgspec

from ama_acp import ownfiles
from ama_acp.errors import StoreError
from ama_acp.session.store.cwd import normal_cwd
from ama_acp.session.store.entries import DirectoriesEntry, Header, TitleEntry
from ama_acp.session.store.files import first_line, kind_of, open_regular, read_bounded

log = logging.getLogger(__name__)

T = TypeVar("T")

INDEX_NAME = "index.json"
_INDEX_VERSION = 2  # 2: `spoken` added (an index of version 1 would list every old session as unspoken)
_CHUNK = 1 << 20
_INDEX_LIMIT = 64 << 20  # a bigger index.json is not one this ama wrote (a thousand sessions take ~200 KB)

# A line holding this entry starts right after a newline; nested JSON never does (lines hold no raw newline).
_TITLE = b'{"t":"title",'
_DIRS = b'{"t":"dirs",'
_TITLE_AT = b"\n" + _TITLE
# A person spoke in the session: a prompt (its message) or a slash command they typed. session/new writes neither.
_SPOKEN = (b'{"t":"msg",', b'{"t":"command",')
_SPOKEN_AT = tuple(b"\n" + m for m in _SPOKEN)
_HEAD = max(len(m) for m in (_TITLE, _DIRS, *_SPOKEN))  # bytes enough to tell a line's tag
_DIRS_AT = b"\n" + _DIRS
_title_decoder = msgspec.json.Decoder(TitleEntry)
_dirs_decoder = msgspec.json.Decoder(DirectoriesEntry)
_header_decoder = msgspec.json.Decoder(Header)


class InvalidCursor(StoreError, ValueError):
    """A session/list cursor this store did not hand out."""


class SessionSummary(msgspec.Struct, frozen=True):
    session_id: str
    cwd: str
    title: str | None
    updated_at: str  # ISO 8601 UTC, from the file's mtime
    created_at: str
    additional_directories: list[str]


class _Cached(msgspec.Struct, array_like=True):
    ino: int
    size: int
    mtime_ns: int
    scanned: int  # the file is known up to here (the byte after the last complete line seen)
    cwd: str | None  # None: the header is unreadable; the file is left out of listings until it changes
    created_at: str = ""
    dirs: list[str] = []
    title: str | None = None
    spoken: bool = False  # a prompt or slash command is in the file: listed (an unspoken session is not)


class _Index(msgspec.Struct):
    version: int
    sessions: dict[str, _Cached]


def encode_cursor(mtime_ns: int, session_id: str) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode([mtime_ns, session_id])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        mtime_ns, session_id = msgspec.json.decode(raw, type=tuple[int, str])
    except (binascii.Error, ValueError, msgspec.DecodeError) as exc:
        raise InvalidCursor(f"invalid cursor {cursor!r}") from exc
    return mtime_ns, session_id


def _iso(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Wanted(msgspec.Struct, frozen=True):
    """Which sessions a listing takes: those of one folder (None: any), only the prompted ones or all, and
    only those after the cursor's position (None: from the newest)."""

    cwd: str | None
    spoken_only: bool
    after: tuple[int, str] | None

    def admits(self, session_id: str, rec: _Cached) -> bool:
        if rec.cwd is None:  # its header is unreadable
            return False
        if self.cwd is not None and normal_cwd(rec.cwd) != self.cwd:
            return False
        if self.spoken_only and not rec.spoken:
            return False
        return self.after is None or (rec.mtime_ns, session_id) < self.after


def _summary(session_id: str, rec: _Cached) -> SessionSummary:
    return SessionSummary(
        session_id=session_id,
        cwd=normal_cwd(rec.cwd or ""),  # a file stored before the normal form may hold `/x/proj/`
        title=rec.title,
        updated_at=_iso(rec.mtime_ns),
        created_at=rec.created_at,
        additional_directories=list(rec.dirs),
    )


def _stat(de: os.DirEntry[str], path: Path) -> os.stat_result | None:
    """The file's own status (a link, to /dev/zero or round a loop, is not followed); None when it is gone or
    cannot be looked at."""
    try:
        return de.stat(follow_symlinks=False)
    except FileNotFoundError:  # deleted while we looked
        return None
    except OSError as exc:
        log.warning("cannot stat session file %s: %s", path, exc)
        return None


class SessionLister:
    def __init__(self, sessions_dir: Path, is_valid_id: Callable[[str], bool], max_line: int) -> None:
        self.dir = sessions_dir
        self._index_path = sessions_dir / INDEX_NAME
        self._is_valid_id = is_valid_id
        self._max_line = max_line  # the store's cap: a longer line is damage, skipped unread

    def list(
        self, cwd: str | None = None, cursor: str | None = None, page_size: int = 50, *, spoken_only: bool = False
    ) -> tuple[list[SessionSummary], str | None]:
        """Newest first (mtime, then id, both descending). The cursor is the position after the page.
        `spoken_only`: only sessions someone prompted (session/list, `ama sessions`): an editor that opens
        threads freely must not fill the first page with sessions nobody spoke in."""
        after = decode_cursor(cursor) if cursor is not None else None
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        wanted = _Wanted(normal_cwd(cwd) if cwd is not None else None, spoken_only, after)
        rows = [(rec.mtime_ns, sid, rec) for sid, rec in self._refresh().items() if wanted.admits(sid, rec)]
        rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
        page = rows[:page_size]
        next_cursor = encode_cursor(page[-1][0], page[-1][1]) if len(rows) > page_size else None
        return [_summary(sid, rec) for _, sid, rec in page], next_cursor

    def _refresh(self) -> dict[str, _Cached]:
        """Every session file with what it yields, from the cache where the file has not changed."""
        old = self._load_index()
        new: dict[str, _Cached] = {}
        changed = False
        try:
            it = os.scandir(self.dir)
        except FileNotFoundError:
            return {}
        with it:
            for de in it:
                name = de.name
                if not name.endswith(".jsonl") or not self._is_valid_id(name[:-6]):
                    continue
                session_id = name[:-6]
                rec, fresh = self._record(de, old.get(session_id))
                if rec is not None:
                    new[session_id] = rec
                    changed = changed or fresh
        if changed or new.keys() != old.keys():
            self._save_index(new)
        return new

    def _record(self, de: os.DirEntry[str], rec: _Cached | None) -> tuple[_Cached | None, bool]:
        """What one session file yields (None: left out of this listing) and whether that is new to the cache;
        `rec` is what the cache holds for it."""
        path = self.dir / de.name
        st = _stat(de, path)
        if st is None:
            return None, False
        if rec is not None and (rec.ino, rec.size, rec.mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns):
            return rec, False
        if not stat.S_ISREG(st.st_mode):
            # A FIFO, a link, a device, a directory under a session's name: never opened. Remembered as
            # unreadable, so it is logged once (until it changes), not at every listing.
            log.warning("%s is %s, not a session file; left out of session/list", path, kind_of(st.st_mode))
            return _Cached(st.st_ino, st.st_size, st.st_mtime_ns, 0, None), True
        if st.st_size == 0:  # being created: the header is written in one go right after
            return None, False
        # Append-only: the bytes the cache saw are still there unless the file was replaced or cut.
        if rec is not None and (rec.ino != st.st_ino or st.st_size < rec.scanned or rec.cwd is None):
            rec = None
        scanned = self._rescan(path, rec)
        return scanned, scanned is not None

    def _rescan(self, path: Path, rec: _Cached | None) -> _Cached | None:
        """The file scanned on from where `rec` stopped (from the start without one); None when it is gone or
        cannot be read."""
        try:
            return _scan(path, rec, self._max_line)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read session file %s: %s", path, exc)
            return None

    def _load_index(self) -> dict[str, _Cached]:
        try:
            fd, _ = open_regular(self._index_path)  # a FIFO or a link to /dev/zero here must not block a listing
            try:
                raw = read_bounded(fd, _INDEX_LIMIT)
            finally:
                os.close(fd)
            if raw is None:
                raise ValueError(f"longer than {_INDEX_LIMIT} bytes")
            index = msgspec.json.decode(raw, type=_Index)
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except (OSError, ValueError) as exc:  # msgspec.DecodeError is a ValueError
            log.info("rebuilding the session index %s: %s", self._index_path, exc)
            return {}
        return index.sessions if index.version == _INDEX_VERSION else {}

    def _save_index(self, sessions: dict[str, _Cached]) -> None:
        # A unique temporary name, then an atomic rename (ownfiles): concurrent listers never see a half-written
        # index, and a link or FIFO planted anywhere on the way is neither followed nor opened.
        data = msgspec.json.encode(_Index(version=_INDEX_VERSION, sessions=sessions))
        try:
            ownfiles.write_file(self._index_path, self.dir, data, sync=False)
        except OSError as exc:  # a read-only data dir still lists, just without the cache
            log.info("cannot write the session index %s: %s", self._index_path, exc)


def _scan(path: Path, prev: _Cached | None, max_line: int) -> _Cached:
    """Read what a listing needs from `path`, starting where `prev` stopped (or at the header). Only a regular
    file is read (NotRegularFile otherwise, an OSError); the cache key is the open file's own fstat."""
    fd, st = open_regular(path)
    with open(fd, "rb", buffering=0) as f:
        if prev is None:
            line = first_line(fd, max_line)
            header = None
            if line is not None:
                try:
                    header = _header_decoder.decode(line)
                except (msgspec.DecodeError, RecursionError):
                    pass
            if header is None:
                log.warning("session file %s has no readable header; left out of session/list", path)
                return _Cached(st.st_ino, st.st_size, st.st_mtime_ns, 0, None)
            rec = _Cached(
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                len(line) + 1 if line is not None else 0,
                header.cwd,
                header.created_at,
                list(header.additional_directories),
                None,
            )
        else:
            rec = msgspec.structs.replace(prev, ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns)
        f.seek(rec.scanned)
        scan = scan_chunks(iter(lambda: f.read(_CHUNK), b""), max_line)
    if scan.title is not None:
        rec.title = scan.title.title
    if scan.dirs is not None:
        rec.dirs = list(scan.dirs.additional_directories)
    rec.spoken = rec.spoken or scan.spoken  # append-only: once spoken, always
    rec.scanned += scan.consumed
    return rec


class LineScan:
    """The last decodable `title` and `dirs` lines of a run of whole lines, fed in chunks cut anywhere: the
    same result however it is cut, in time linear in its length.

    Each chunk is searched from its end for the markers (one `rfind`, not a loop over lines). A line that goes
    on into the next chunk is kept only while it may be a title or dirs line (its first bytes say) and is no
    longer than `max_line`; any other is just passed over to its newline, so one 200 MB line costs one pass,
    not a copy per chunk. A line that does not decode, or is longer than `max_line`, is skipped: the last good
    value before it stands. Bytes after the last newline (a torn or growing tail) are not counted.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.title: TitleEntry | None = None
        self.dirs: DirectoriesEntry | None = None
        self.spoken = False  # a whole `msg` or `command` line was seen
        self.consumed = 0  # bytes up to and including the last newline seen
        self._fed = 0
        self._line: list[bytes] = []  # the pending line's bytes, while it may be a line that counts
        self._line_len = 0
        self._keep = True  # False: the pending line is not a title or dirs line, or is too long
        self._spoken_line = False  # the pending line is a `msg` or `command` line

    def feed(self, chunk: bytes) -> None:
        nl = chunk.find(b"\n")
        if nl < 0:
            self._grow(chunk, 0, len(chunk))
            self._fed += len(chunk)
            return
        self._grow(chunk, 0, nl)
        self._finish_line()
        cut = chunk.rfind(b"\n")
        if cut > nl:  # whole lines in chunk[nl + 1 : cut + 1]; the newline at nl precedes the first
            title = _last_line(chunk, nl, cut, _TITLE_AT, _title_decoder, self.max_line)
            if title is not None:
                self.title = title
            dirs = _last_line(chunk, nl, cut, _DIRS_AT, _dirs_decoder, self.max_line)
            if dirs is not None:
                self.dirs = dirs
            if not self.spoken:  # a marker after a newline starts a whole line (lines hold no raw newline)
                self.spoken = any(chunk.find(m, nl, cut + 1) >= 0 for m in _SPOKEN_AT)
        self.consumed = self._fed + cut + 1
        self._fed += len(chunk)
        self._line, self._line_len, self._keep, self._spoken_line = [], 0, True, False
        self._grow(chunk, cut + 1, len(chunk))

    def _grow(self, chunk: bytes, start: int, end: int) -> None:
        if end <= start:
            return
        before = self._line_len
        self._line_len += end - start
        if not self._keep:
            return
        if before < _HEAD <= self._line_len:  # enough bytes to tell what line this is, before copying
            head = b"".join([*(piece[:_HEAD] for piece in self._line), chunk[start : start + _HEAD]])
            if head.startswith(_SPOKEN):  # whatever its length, as for a whole line found by `find`
                self._spoken_line = True  # counted once its newline comes (a torn tail is not a line)
            if not head.startswith((_TITLE, _DIRS)):
                self._line, self._keep = [], False
                return
        if self._line_len > self.max_line:
            self._line, self._keep = [], False
            return
        self._line.append(chunk[start:end])

    def _finish_line(self) -> None:
        if self._spoken_line:
            self.spoken = True
        if self._keep and self._line:
            line = b"".join(self._line)
            if line.startswith(_SPOKEN):  # shorter than _HEAD: never a real entry, but a whole line all the same
                self.spoken = True
            try:
                if line.startswith(_TITLE):
                    self.title = _title_decoder.decode(line)
                elif line.startswith(_DIRS):
                    self.dirs = _dirs_decoder.decode(line)
            except (msgspec.DecodeError, RecursionError):  # a corrupt line: the value before it stands
                pass
        self._line, self._line_len, self._keep, self._spoken_line = [], 0, True, False


def scan_chunks(chunks: Iterable[bytes], max_line: int) -> LineScan:
    scan = LineScan(max_line)
    for chunk in chunks:
        scan.feed(chunk)
    return scan


def _last_line(
    buf: bytes, start: int, cut: int, marker: bytes, decoder: msgspec.json.Decoder[T], max_line: int
) -> T | None:
    """The last line of buf[start + 1 : cut + 1] (buf[start] and buf[cut] are newlines) that begins with
    `marker` (newline included), is at most `max_line` long and decodes."""
    i = buf.rfind(marker, start, cut + 1)
    while i >= 0:
        end = buf.index(b"\n", i + 1)
        if end - i - 1 <= max_line:
            try:
                return decoder.decode(buf[i + 1 : end])
            except (msgspec.DecodeError, RecursionError):  # a corrupt line: the one before it is the last good value
                pass
        i = buf.rfind(marker, start, i)
    return None
