"""A new session's file, made before session/new is answered (issue 39 point 6).

The editor holds the session's id from the answer on, and may send the first prompt at once; the Session
itself is built after the answer (session/manager.py `open_session`: ~50 ms of imports the first session/new
must not wait for). A process killed in between used to leave no file, and the next one answered the editor's
session/load with "Session not found". So the file is made here, before the answer, with the few modules this
needs (no listing, no reader): created exclusively through the one opener of ama's folders, locked, its header
written in one `write`. That survives the process being killed (the bytes are the kernel's); the fsyncs that
make it survive a power cut too come right after the answer, when the store takes the file over
(`SessionStore.adopt`), before any work of a turn.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import msgspec

from ama_acp import ownfiles
from ama_acp.redact import default_redactor
from ama_acp.session.store.entries import Header
from ama_acp.session.store.errors import SessionExists, SessionWriteError, in_words
from ama_acp.session.store.locks import lock_for_writing


class Reserved(NamedTuple):
    """A session file made and locked, its header written: what `SessionStore.adopt` takes over."""

    path: Path
    fd: int
    end: int  # the header line's length: where the next entry goes


def reserve(data_dir: Path, header: Header) -> Reserved:
    """The new session's file `<data dir>/sessions/<id>.jsonl` holding `header`. `SessionExists` when the name
    is taken (by anything: O_EXCL), SessionBusy / SessionWriteError as the store's `create`; nothing is left
    behind by a failure."""
    sessions = data_dir / "sessions"
    path = sessions / f"{header.session_id}.jsonl"
    try:
        with ownfiles.folder(sessions, sessions, create=True):
            pass
    except (FileExistsError, NotADirectoryError) as exc:  # a file (or a dangling link) where the folder belongs
        raise SessionWriteError(path, f"{sessions} is not a directory", exc) from exc
    except OSError as exc:
        raise SessionWriteError(path, f"the folder {sessions} cannot be used: {in_words(exc)}", exc) from exc
    fd = open_new_locked(path, sessions, header.session_id)
    line = default_redactor().redact_line(msgspec.json.encode(header)) + b"\n"
    try:
        view = memoryview(line)
        while view:  # a short write (a file-size limit) is followed by the write that fails (EFBIG)
            view = view[os.write(fd, view) :]
    except OSError as exc:
        os.close(fd)
        _remove(path)
        raise SessionWriteError(path, in_words(exc), exc) from exc
    return Reserved(path, fd, len(line))


def open_new_locked(path: Path, sessions: Path, session_id: str) -> int:
    """A new session file's descriptor, made exclusively below `sessions` through the one opener of ama's folders
    (whatever already has the name — a file, a FIFO, a link, even a dangling one — is never opened) and locked.
    `SessionExists` when the name is taken, SessionBusy / SessionWriteError as locking and opening fail; a
    file made but not locked is removed again."""
    try:
        fd = ownfiles.open_file(path, sessions, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        raise SessionExists(f"session {session_id} already exists") from None
    except OSError as exc:
        raise SessionWriteError(path, in_words(exc), exc) from exc
    try:
        lock_for_writing(fd, path)  # closes `fd` when it fails
    except BaseException:
        _remove(path)
        raise
    return fd


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
