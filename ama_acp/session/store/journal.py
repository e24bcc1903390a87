"""A live session's file as the session writes it: every entry appended as it happens (session/store/session_store.py's
writer), and what happens when the file cannot be written.

A full disk, a read-only folder or a file deleted under the session must not end the conversation: the first
failure closes the writer, the session runs on unsaved, and the person is told once, at the next update
(docs/sessions.md "Unsaved sessions").
"""

from __future__ import annotations

import logging
from typing import Protocol

from ama_acp.session.store import entries as en
from ama_acp.session.store.writer import SessionWriter
from ama_acp.wire import types as w
from ama_acp.wire.warning import takes_notices, warning

log = logging.getLogger(__name__)


class Writer(Protocol):
    """The store's writer of one session file (session/store/session_store.py `SessionWriter`)."""

    def append(self, entry: en.Entry) -> None: ...

    def close(self) -> None: ...


class Journal:
    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self.writer: Writer | None = None  # None: no file yet, or the session runs unsaved
        # The slash commands the person ran in this process: the inventory of a session with no file to read
        # them from (session/turn/compacting.py `_history`).
        self.commands: list[str] = []
        self._unsaved: str | None = None  # why the session file cannot be written, until the person is told
        self._told = False

    @property
    def saving(self) -> bool:
        return self.writer is not None

    def attach(self, writer: Writer) -> None:
        """The session's file, created (session/new) or opened again (load, resume)."""
        self.writer = writer

    def mark_turn(self, running: bool) -> None:
        """A turn started or ended, marked on the file for other ama processes' session/list (holders.py)."""
        if isinstance(self.writer, SessionWriter):  # a stand-in writer (a test's full disk) has no file to mark
            self.writer.mark_turn(running)

    def append(self, entry: en.Entry) -> None:
        if isinstance(entry, en.CommandEntry):
            self.commands.append(entry.text)
        if self.writer is None:
            return
        try:
            self.writer.append(entry)
        except OSError as exc:  # a full disk must not end the conversation (store's SessionWriteError is one)
            self.cannot_save(exc)

    def cannot_save(self, exc: OSError) -> None:
        """The session file cannot be written (created, opened or appended to): the session runs on unsaved,
        and the person is told at the next update (`unsaved_notice`)."""
        reason = getattr(exc, "reason", None)  # SessionWriteError: the why, without the sentence around it
        if reason is not None:  # its str() is already the whole sentence
            log.error("session %s: %s", self._session_id, exc)
        else:
            log.error(
                "session %s: cannot write the session file (%s); it will not survive a restart", self._session_id, exc
            )
        writer, self.writer = self.writer, None
        if writer is not None:  # its descriptor and lock go now, not when the process ends
            try:
                writer.close()
            except OSError as close_exc:  # its fsync, on the disk that just failed: nothing more to lose
                log.info("session %s: closing the session file after the failure: %s", self._session_id, close_exc)
        self._unsaved = str(reason or exc.strerror or exc) or type(exc).__name__

    def unsaved_notice(self, caps: w.ClientCapabilities) -> w.SessionUpdate | None:
        """The warning that the session can no longer be saved, once, at the first chance after the failure: an
        ACP `notice` when the client shows them, else an agent message."""
        if self._unsaved is None or self._told:
            return None
        self._told = True
        title = "This session can no longer be saved"
        text = f"{self._unsaved}. It will not survive a restart."
        return warning(takes_notices(caps), title, text, lead=f"{title}: ")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def hand_over(self) -> None:
        """The file closed and let go: another ama process writes it from now on (session/handover.py), so
        whatever this session would still persist (its MCP servers' stop) is written nowhere."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()
