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
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import msgspec

from ama_acp.errors import StoreError
from ama_acp.session.entries import DirectoriesEntry, Header, TitleEntry

log = logging.getLogger(__name__)

T = TypeVar("T")

INDEX_NAME = "index.json"
_INDEX_VERSION = 1
_CHUNK = 1 << 20

# A line holding this entry starts right after a newline; nested JSON never does (lines hold no raw newline).
_TITLE_AT = b'\n{"t":"title",'
_DIRS_AT = b'\n{"t":"dirs",'
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


class SessionLister:
    def __init__(self, sessions_dir: Path, is_valid_id: Callable[[str], bool]) -> None:
        self.dir = sessions_dir
        self._index_path = sessions_dir / INDEX_NAME
        self._is_valid_id = is_valid_id

    def list(
        self, cwd: str | None = None, cursor: str | None = None, page_size: int = 50
    ) -> tuple[list[SessionSummary], str | None]:
        """Newest first (mtime, then id, both descending). The cursor is the position after the page."""
        after = decode_cursor(cursor) if cursor is not None else None
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        want_cwd = os.path.normpath(cwd) if cwd is not None else None
        rows: list[tuple[int, str, _Cached]] = []
        for session_id, rec in self._refresh().items():
            if rec.cwd is None or (want_cwd is not None and os.path.normpath(rec.cwd) != want_cwd):
                continue
            if after is not None and (rec.mtime_ns, session_id) >= after:
                continue
            rows.append((rec.mtime_ns, session_id, rec))
        rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
        page = rows[:page_size]
        next_cursor = encode_cursor(page[-1][0], page[-1][1]) if len(rows) > page_size else None
        summaries = [
            SessionSummary(
                session_id=sid,
                cwd=rec.cwd or "",
                title=rec.title,
                updated_at=_iso(mtime_ns),
                created_at=rec.created_at,
                additional_directories=list(rec.dirs),
            )
            for mtime_ns, sid, rec in page
        ]
        return summaries, next_cursor

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
                try:
                    st = de.stat()
                except FileNotFoundError:  # deleted while we looked
                    continue
                rec = old.get(session_id)
                if rec is not None and (rec.ino, rec.size, rec.mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns):
                    new[session_id] = rec
                    continue
                if st.st_size == 0:  # being created: the header is written in one go right after
                    continue
                # Append-only: the bytes the cache saw are still there unless the file was replaced or cut.
                if rec is not None and (rec.ino != st.st_ino or st.st_size < rec.scanned or rec.cwd is None):
                    rec = None
                try:
                    scanned = _scan(self.dir / name, rec, st)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    log.warning("cannot read session file %s: %s", self.dir / name, exc)
                    continue
                new[session_id] = scanned
                changed = True
        if changed or new.keys() != old.keys():
            self._save_index(new)
        return new

    def _load_index(self) -> dict[str, _Cached]:
        try:
            index = msgspec.json.decode(self._index_path.read_bytes(), type=_Index)
        except FileNotFoundError:
            return {}
        except (OSError, msgspec.DecodeError) as exc:
            log.info("rebuilding the session index %s: %s", self._index_path, exc)
            return {}
        return index.sessions if index.version == _INDEX_VERSION else {}

    def _save_index(self, sessions: dict[str, _Cached]) -> None:
        # A unique temporary name, then an atomic rename: concurrent listers never see a half-written index.
        tmp = self.dir / f".{INDEX_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            tmp.write_bytes(msgspec.json.encode(_Index(version=_INDEX_VERSION, sessions=sessions)))
            os.replace(tmp, self._index_path)
        except OSError as exc:  # a read-only data dir still lists, just without the cache
            log.info("cannot write the session index %s: %s", self._index_path, exc)
            tmp.unlink(missing_ok=True)


def _scan(path: Path, prev: _Cached | None, st: os.stat_result) -> _Cached:
    """Read what a listing needs from `path`, starting where `prev` stopped (or at the header)."""
    with open(path, "rb") as f:
        if prev is None:
            line = f.readline()
            header = None
            if line.endswith(b"\n"):
                try:
                    header = _header_decoder.decode(line)
                except msgspec.DecodeError:
                    pass
            if header is None:
                log.warning("session file %s has no readable header; left out of session/list", path)
                return _Cached(st.st_ino, st.st_size, st.st_mtime_ns, 0, None)
            rec = _Cached(
                st.st_ino,
                st.st_size,
                st.st_mtime_ns,
                len(line),
                header.cwd,
                header.created_at,
                list(header.additional_directories),
                None,
            )
        else:
            rec = msgspec.structs.replace(prev, ino=st.st_ino, size=st.st_size, mtime_ns=st.st_mtime_ns)
        start = rec.scanned
        f.seek(start)
        # `start` is a line start, so the byte before it is a newline: begin with it so the first line matches.
        carry = b"\n"
        read_to = start
        while chunk := f.read(_CHUNK):
            read_to += len(chunk)
            buf = carry + chunk
            cut = buf.rfind(b"\n")  # buf[:cut + 1] is whole lines; a torn or growing tail waits
            title = _last_line(buf, cut, _TITLE_AT, _title_decoder)
            if title is not None:
                rec.title = title.title
            dirs = _last_line(buf, cut, _DIRS_AT, _dirs_decoder)
            if dirs is not None:
                rec.dirs = list(dirs.additional_directories)
            rec.scanned = read_to - len(buf) + cut + 1
            carry = buf[cut:]
    return rec


def _last_line(buf: bytes, cut: int, marker: bytes, decoder: msgspec.json.Decoder[T]) -> T | None:
    i = buf.rfind(marker, 0, cut + 1)
    while i >= 0:
        end = buf.index(b"\n", i + 1)
        try:
            return decoder.decode(buf[i + 1 : end])
        except msgspec.DecodeError:  # a corrupt line: the one before it is the last good value
            i = buf.rfind(marker, 0, i)
    return None
