"""Appending to a session file: one entry, one line, one `write` on an O_APPEND descriptor, so a crash loses at
most the line being written and a failed write leaves no partial line behind (docs/sessions.md "Crash
safety"). Secrets are redacted from each line before it is written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

import msgspec

from ama_acp.conversation.messages import UserMessage
from ama_acp.redact import Redactor
from ama_acp.session.store.entries import (
    REPLAY_TEXT_LIMIT,
    CompactionEntry,
    Entry,
    Header,
    MessageEntry,
    ToolCallEntry,
    TurnEntry,
    clip_replay_text,
)
from ama_acp.session.store.errors import SessionWriteError, in_words
from ama_acp.session.store.holders import mark_turn
from ama_acp.session.store.reader import MAX_LINE_BYTES

log = logging.getLogger(__name__)

FsyncPolicy = Literal["turn", "always", "never"]

_encoder = msgspec.json.Encoder()

# A line longer than this is written with its newline by one `writev`, not copied whole to add the newline: a
# model's reply can be 200 MB, and a copy of it is 200 MB more at the process's peak (issue 39 item 13).
_COPY_LINE_BYTES = 1024 * 1024


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


def _ends_or_starts_a_turn(entry: Entry) -> bool:
    """A turn's end, a compaction, or the person's prompt: synced under the "turn" policy, the prompt before
    the turn's first request or tool (issue 39 point 6: what the editor still shows survives a crash)."""
    if isinstance(entry, MessageEntry):
        return isinstance(entry.message, UserMessage) and entry.message.origin == "person"
    return type(entry) in (TurnEntry, CompactionEntry)


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

    def mark_turn(self, running: bool) -> None:
        """Whether a turn is running in this session, as other processes see it (session/store/holders.py)."""
        if self._fd >= 0:
            mark_turn(self._fd, running)

    def append(self, entry: Entry, *, sync: bool = True) -> None:
        """Write one entry as one line. Raises SessionWriteError when the file cannot take it (the file stays
        consistent: whatever part of the line reached the disk is cut off again). `sync=False`: no fsync for
        this line whatever the policy (a fork's copied entries: the store syncs the whole file once)."""
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
        if not sync:
            return
        if self._fsync == "always" or (self._fsync == "turn" and _ends_or_starts_a_turn(entry)):
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
            raise SessionWriteError(self.path, f"it cannot be found again: {in_words(exc)}", exc) from exc
        if (now.st_dev, now.st_ino) != self._ident:
            raise SessionWriteError(self.path, "another program replaced it with a different file")

    def write_header(self, header: Header) -> None:
        """The file's first line (the store's `create` writes it before anything else)."""
        self._write_line(_encoder.encode(header))

    def _write_line(self, line: bytes) -> None:
        redactor = self._redactor()
        if redactor:
            line = redactor.redact_line(line)
        if len(line) >= MAX_LINE_BYTES:  # it would never read back: the reader skips such a line as damaged
            raise SessionWriteError(
                self.path, f"an entry of {len(line)} bytes is longer than the {MAX_LINE_BYTES} a session line may hold"
            )
        if self._needs_repair:
            try:
                self._repair()
            except OSError as exc:
                raise SessionWriteError(self.path, in_words(exc), exc) from exc
        self._end += self._write_all(line)

    def _write_all(self, line: bytes) -> int:
        """`line` and its newline appended whole (their length returned), or a SessionWriteError with no partial
        line left behind (cut off now, or before the next write when the cut fails too)."""
        written = 0
        try:
            # One write in practice; the loop only covers a short write (a signal, a full disk, a size limit:
            # the kernel writes what fits and the next write fails with ENOSPC / EFBIG).
            while written <= len(line):
                n = self._write_from(line, written)
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
                raise SessionWriteError(self.path, in_words(exc), exc) from exc
            raise
        return written

    def _write_from(self, line: bytes, start: int) -> int:
        """One write of `line` and its newline from byte `start` on; the bytes written."""
        if len(line) <= _COPY_LINE_BYTES:
            data = line + b"\n"
            return os.write(self._fd, data[start:] if start else data)
        with memoryview(line) as whole:
            return os.writev(self._fd, [whole[start:], b"\n"] if start < len(line) else [b"\n"])

    def _sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:  # the line is written, but may not survive a power cut
            raise SessionWriteError(self.path, f"it could not be flushed to disk: {in_words(exc)}", exc) from exc

    def _repair(self) -> None:
        os.ftruncate(self._fd, self._end)
        self._needs_repair = False

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

    def discard(self) -> None:
        """Closed without the fsync of close(): for a file that is about to be removed (a failed create)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
