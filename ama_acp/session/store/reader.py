"""Reading a session file: the header checked first, then one typed entry a line, in time linear in the
file's length however its lines fall across reads. A bad line costs that line, never the session (layout and
guarantees: docs/sessions.md).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import msgspec

from ama_acp.conversation.messages import Message
from ama_acp.rpc.framing import MAX_LINE as WIRE_MAX_LINE
from ama_acp.session.store.entries import FORMAT_VERSION, KNOWN_TAGS, Entry, Header, MessageEntry
from ama_acp.session.store.errors import NotASessionFile, SessionFormatError, SessionNotFound
from ama_acp.session.store.files import NotRegularFile, open_regular
from ama_acp.session.store.rewound_thread import apply_rewinds

log = logging.getLogger(__name__)


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


def decode_header(line: bytes | memoryview, path: Path) -> Header:
    """The header of the session file at `path` from its first line; SessionFormatError when this ama may not
    read the file (not a session file, or a newer format)."""
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
    regular file is read (session/store/files.py): anything else under the name is a NotASessionFile.
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
    reader = _LineReader(path, max_line)
    for chunk in chunks:
        reader.feed(chunk)
    return reader.finish()


class _LineReader:
    """The state of one decode between chunks: the line that goes on into the next chunk, the header once
    read, the entries so far."""

    def __init__(self, path: Path, max_line: int) -> None:
        self.path = path
        self.max_line = max_line
        self.header: Header | None = None
        self.entries: list[Entry] = []
        self.skipped = _Skipped(path)
        self.pending: list[bytes] = []  # the start of a line that goes on into the next chunk
        self.pending_len = 0  # its length so far (also while it is being dropped)
        self.dropping = False  # the pending line is longer than max_line: its bytes are dropped up to its newline
        self.at = 0  # file offset of the chunk's first byte

    def feed(self, chunk: bytes) -> None:
        last = chunk.rfind(b"\n")
        if last < 0:
            self._no_line_end(chunk)
        else:
            self._lines(chunk, last)
        self.at += len(chunk)

    def finish(self) -> LoadedSession:
        if self.header is None:
            raise SessionFormatError(
                f"{self.path}: the header line is incomplete (the session was never fully created)"
            )
        torn = self.pending_len > 0
        if torn:
            log.warning(
                "%s: skipped a torn last line at byte offset %d (%d bytes; a crash while it was written)",
                self.path,
                self.at - self.pending_len,
                self.pending_len,
            )
        self.skipped.report()
        # Rewinds applied (session/store/rewound_thread.py): every reader of the file sees the thread the person kept.
        entries = apply_rewinds(self.entries)
        return LoadedSession(header=self.header, entries=entries, torn_tail=torn, skipped_lines=self.skipped.count)

    def _no_line_end(self, chunk: bytes) -> None:
        """A chunk inside one line: kept for when the line ends, or dropped once the line is too long."""
        self.pending_len += len(chunk)
        if self.dropping:
            return
        if self.pending_len > self.max_line:
            if self.header is None:
                raise _header_too_long(self.path, self.max_line)
            self.pending, self.dropping = [], True
        else:
            self.pending.append(chunk)

    def _lines(self, chunk: bytes, last: int) -> None:
        """A chunk with at least one line end (the last at `last`): its whole lines decoded, its tail kept."""
        pos = 0
        if self.dropping:  # the dropped line ends in this chunk
            pos = chunk.find(b"\n") + 1
            self.skipped.too_long(self.at - self.pending_len, self.pending_len + pos - 1, self.max_line)
            buf, buf_at, self.dropping = chunk, self.at, False
        elif self.pending:  # joined once, when the line is whole: each byte is copied once however long the line
            buf, buf_at = b"".join((*self.pending, chunk)), self.at - self.pending_len
            last += self.pending_len
        else:
            buf, buf_at = chunk, self.at
        view = memoryview(buf)
        if self.header is None:
            pos = self._header(buf, view)
        self._decode(buf, view, buf_at, pos, last)
        del view
        self.pending_len = len(buf) - last - 1
        if self.pending_len > self.max_line:
            self.pending, self.dropping = [], True
        else:
            self.pending = [buf[last + 1 :]] if self.pending_len else []

    def _header(self, buf: bytes, view: memoryview) -> int:
        """The header from the first line of `buf`; where the next line starts."""
        end = buf.find(b"\n")
        if end > self.max_line:
            raise _header_too_long(self.path, self.max_line)
        self.header = decode_header(view[:end], self.path)
        return end + 1

    def _decode(self, buf: bytes, view: memoryview, buf_at: int, pos: int, last: int) -> None:
        """The lines of `buf` from `pos` to the one ending at `last`, decoded from slices of `view` (no copy)."""
        append = self.entries.append
        decode = _entry_decoder.decode
        find = buf.find
        skipped, max_line = self.skipped, self.max_line
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
