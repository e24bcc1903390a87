"""session/fork (ACP, unstable): a new session that starts where another one is (docs/sessions.md "Forks").

The fork is built from the original's session file, never from its live objects: the file is what a load would
rebuild the original from, so the fork gets the conversation as the model sees it (compactions and pruning
included), the mode, model and thought level, and the meter's and billing's stored state — its first
usage_update is the original's figure, measured, not recomputed. The fork's own file is a copy of the
original's entries under a header of its own, and the handoff folders its compactions name are copied too: it
loads, lists and resumes by itself, also after the original is deleted. The original is only read: its file
stays byte-identical and its live session (if any) is not touched, even while a turn of it runs — the fork then
stops before that turn's prompt (`completed_turns`), so no half-streamed reply is carried over.

This module makes the copy; session/lifecycle.py `Lifecycle.fork` opens the fork from it as a resume opens a
session (only the manager and the lifecycle build a Session: tests/unit/test_layers.py).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from ama_acp import ownfiles
from ama_acp.conversation.messages import UserMessage
from ama_acp.rpc.errors import RESOURCE_NOT_FOUND, AcpError
from ama_acp.session.store import entries as en
from ama_acp.session.store import session_store as st
from ama_acp.session.store.checkpoint_files import copy_checkpoints
from ama_acp.session.store.cwd import normal_cwd, same_cwd
from ama_acp.session.store.journal import Journal
from ama_acp.session.store.locks import in_use
from ama_acp.session.store.repair import MAX_HANDOFF_BYTES
from ama_acp.session.store.rewound_thread import prompt_start

log = logging.getLogger(__name__)

FORK_MARK = " (fork)"  # added to the original's title: an editor's thread list tells the two apart

# Entries that record a setting the person chose, not a step of a turn: kept even when they were written
# while the turn the fork leaves out was running (a mode chosen mid-turn is the session's mode now).
_SETTINGS = (en.ModeEntry, en.ModelEntry, en.ConfigEntry, en.DirectoriesEntry)


class ForkCopy(NamedTuple):
    """What the fork starts from: its file's header and entries (what session/lifecycle.py restores it from)."""

    loaded: st.LoadedSession
    running: bool  # a turn of the original was running: the copy stops before it


def refuse_unsaved(session_id: str, saving: bool) -> None:
    """A live original whose file could not be written has no file to copy: the fork is refused, saying why."""
    if not saving:
        raise AcpError(
            RESOURCE_NOT_FOUND,
            f"Session {session_id} cannot be forked: it has no session file (it could not be saved), and a "
            "fork is made from that file",
            {"sessionId": session_id},
        )


def fork_copy(
    store: st.SessionStore, loaded: st.LoadedSession, cwd: str, dirs: list[str], busy: bool | None
) -> ForkCopy:
    """The fork of the session `loaded` was read from, in `cwd` with `dirs`: a new id and header, the entries to
    copy, and the handoff folders they name copied already. `busy`: whether the original's live session runs a
    turn (None: it is not open in this process; then a turn may be running in another ama process that holds
    its file, and the file tells whether its last prompt ended)."""
    source_id = loaded.header.session_id
    if not same_cwd(loaded.header.cwd, cwd):  # the history's paths and the frozen prompt name that folder
        raise AcpError.invalid_params(
            f"cwd: session {source_id} belongs to {normal_cwd(loaded.header.cwd)!r}, not {cwd!r}; "
            "a fork stays in its original's folder"
        )
    running = busy if busy is not None else in_use(store.path(source_id))
    copied = completed_turns(loaded.entries) if running else list(loaded.entries)
    copied += _fork_marks(loaded.header, copied, dirs)
    header = en.Header(session_id=st.new_session_id(), cwd=cwd, additional_directories=dirs)
    _copy_handoffs(store.handoff_dir(source_id), store.handoff_dir(header.session_id), copied)
    copy_checkpoints(store.sessions_dir.parent, source_id, header.session_id)  # /rewind in the fork, too
    log.info(
        "session %s: forked from %s (%d of %d entries%s)",
        header.session_id,
        source_id,
        len(copied),
        len(loaded.entries),
        ", before the running turn" if running else "",
    )
    return ForkCopy(st.LoadedSession(header, copied), running)


def write_fork(store: st.SessionStore, journal: Journal, copy: ForkCopy) -> None:
    """The fork's file, made whole (header and every copied entry, one fsync) and attached to its journal; when
    it cannot be made the fork runs unsaved and says so, as a session/new whose file fails does."""
    header = copy.loaded.header
    try:
        journal.attach(store.create(header, copy.loaded.entries))
    except OSError as exc:  # SessionWriteError: the disk, the folder
        journal.cannot_save(exc)
    except st.StoreError as exc:  # SessionExists / SessionBusy: a fresh id is neither, but never a crash
        journal.cannot_save(st.SessionWriteError(store.path(header.session_id), str(exc), exc))


def completed_turns(entries: list[en.Entry]) -> list[en.Entry]:
    """The entries as they stood before a running turn began: everything before that turn's prompt (the last
    thing the person said: a prompt, or a slash command) and its title (set with the first prompt), plus the
    settings chosen since. What the turn wrote so far (its prompt, replies, tool calls, usage, a compaction)
    is left out: the fork holds the last completed turn, never a half-streamed reply. When a turn entry
    follows that prompt, its turn ended and every entry is kept."""
    start = _last_said(entries)
    if start is None or any(isinstance(e, en.TurnEntry) for e in entries[start:]):
        return list(entries)  # no turn, or the last one ended: nothing is running in this file
    if isinstance(entries[start], en.MessageEntry):
        start = prompt_start(entries, start)  # a command file's prompt: the command typed goes with it
    if start > 0 and isinstance(entries[start - 1], en.TitleEntry):
        start -= 1
    return entries[:start] + [e for e in entries[start:] if isinstance(e, _SETTINGS)]


def _last_said(entries: list[en.Entry]) -> int | None:
    """The index of the last thing the person said (a prompt, or a slash command); None when they said nothing."""
    for i in range(len(entries) - 1, -1, -1):
        if _said_by_person(entries[i]):
            return i
    return None


def _said_by_person(entry: en.Entry) -> bool:
    if isinstance(entry, en.CommandEntry):
        return True
    return (
        isinstance(entry, en.MessageEntry)
        and isinstance(entry.message, UserMessage)
        and entry.message.origin == "person"
    )


def fork_title(title: str | None) -> str | None:
    """The original's title with the fork mark (once: a fork of a fork is marked once); an untitled
    original's fork stays untitled, and its first prompt names it as any session's does."""
    if title is None or title.endswith(FORK_MARK):
        return title
    return title + FORK_MARK


def _fork_marks(header: en.Header, copied: list[en.Entry], dirs: list[str]) -> list[en.Entry]:
    """What the fork's file says after the copy: its title, and its directories when they differ from the
    original's last ones (session/list reads both from the file)."""
    title: str | None = None
    last_dirs = list(header.additional_directories)
    for entry in copied:
        if isinstance(entry, en.TitleEntry):
            title = entry.title
        elif isinstance(entry, en.DirectoriesEntry):
            last_dirs = list(entry.additional_directories)
    out: list[en.Entry] = []
    marked = fork_title(title)
    if marked is not None and marked != title:
        out.append(en.TitleEntry(title=marked))
    if dirs != last_dirs:
        out.append(en.DirectoriesEntry(additional_directories=dirs))
    return out


def _copy_handoffs(source: Path, target: Path, copied: list[en.Entry]) -> None:
    """The folders of the compactions the copied entries name (`compaction-N/`: handoff and inventory), copied
    into the fork's handoff folder, so its context is rebuilt from its own files. Nothing else of the original's
    folder comes along. A folder that cannot be copied is logged; the fork's context then says the handoff is
    missing, as a load of a damaged session does."""
    names: set[str] = set()
    for entry in copied:
        if isinstance(entry, en.CompactionEntry):
            for rel in (entry.summary_path, entry.inventory_path):
                top = _top_folder(rel)
                if top is not None:
                    names.add(top)
    for name in sorted(names):
        src = source / name
        if not src.is_dir() or src.is_symlink():
            log.warning("fork: %s is not a folder; the fork's compaction names a missing handoff", src)
            continue
        try:
            files = sorted(os.listdir(src))
        except OSError as exc:
            log.warning("fork: cannot copy the handoff folder %s: %s", src, exc)
            continue
        for file in files:  # its regular files, through the one opener of ama's folders: no link, no FIFO
            try:
                data = ownfiles.read_file(src / file, source.parent, MAX_HANDOFF_BYTES)
                ownfiles.write_file(target / name / file, source.parent, data, sync=False)
            except OSError as exc:
                log.warning("fork: cannot copy the handoff file %s: %s", src / file, exc)


def _top_folder(rel: str | None) -> str | None:
    """The first segment of a stored relative path, if it is a plain folder name (a session file is not
    trusted: an absolute path or `..` names nothing to copy)."""
    if not rel:
        return None
    parts = PurePosixPath(rel).parts
    if len(parts) < 2 or parts[0] in ("/", "..", "."):
        return None
    return parts[0]
