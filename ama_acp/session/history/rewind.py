"""`/rewind`: the prompts of the session with the files each changed; `/rewind N` puts the files ama changed since
prompt N back as they were before it and takes prompts N… out of the conversation (docs/sessions.md
"Checkpoints and /rewind").

Files: a file is put back only when it still holds the bytes ama last wrote to it; one the person (or anything
else) changed since is left as it is and named — a conflict is reported, never overwritten. A file ama created
since prompt N is removed (the same way: only if it is still what ama wrote). Nothing is done through a symlink,
outside the session's folders, or to anything but a regular file (a FIFO is never opened); a copy whose bytes no
longer match its hash is not used.

The conversation: a `rewind` entry is appended through the journal, and the live session is rebuilt from its
file the way a load rebuilds it (session/store/rewound_thread.py drops the rewound prompts for every reader), so the next
request, the meter (a figure stored before prompt N, or an estimate — never one measured on the removed turns)
and a later load agree. A session without a file cannot be rebuilt: it is refused.

The timing guard: a rewind is a prompt of the session, and a session runs one prompt at a time — `/rewind`
sent while a turn runs is refused with -32010 like any second prompt, before anything is touched.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio
import msgspec

from ama_acp import ownfiles
from ama_acp.conversation.messages import Message
from ama_acp.session.commands import say
from ama_acp.session.conversation import Conversation, StoredFigures
from ama_acp.session.facets import Identified, Located, Persists, UsesModel
from ama_acp.session.history.checkpoints import CheckpointLog, Checkpoints, FileRecord
from ama_acp.session.runtime import Stores
from ama_acp.session.store import entries as en
from ama_acp.session.store.checkpoint_files import BlobStore, Unreadable, file_digest
from ama_acp.textsafe import one_line
from ama_acp.tools.paths import PathPolicy

if TYPE_CHECKING:
    from ama_acp.session.accounting.held_figure import PendingPrefix, ServerStatus
    from ama_acp.session.store.session_store import SessionStore

log = logging.getLogger(__name__)


class _Journal(Protocol):
    @property
    def saving(self) -> bool: ...


class _Accounting(Protocol):
    reopen: PendingPrefix | None

    def reload(self, messages: list[Message], stored: StoredFigures, compactions: int = 0) -> None: ...


class _Tools(Protocol):
    @property
    def mcp(self) -> ServerStatus | None: ...


class RewoundSession(Identified, Located, UsesModel, Persists, Protocol):
    """What a rewind uses of its session (session/live.py `Session`)."""

    @property
    def rt(self) -> Stores: ...

    @property
    def journal(self) -> _Journal: ...

    @property
    def ctx(self) -> _Accounting: ...

    @property
    def tools(self) -> _Tools: ...

    conversation: Conversation
    checkpoints: Checkpoints


class Outcome(msgspec.Struct):
    """What a rewind did to the files."""

    restored: list[str] = msgspec.field(default_factory=list)  # put back, or removed (created since)
    removed: list[str] = msgspec.field(default_factory=list)  # of `restored`: the ones removed
    already: list[str] = msgspec.field(default_factory=list)  # already as they were before the prompt
    kept: list[tuple[str, str]] = msgspec.field(default_factory=list)  # left alone, and why


class Rewinder:
    def __init__(self, session: RewoundSession) -> None:
        self._s = session

    async def rewind(self, argument: str) -> None:
        s = self._s
        prompts = s.checkpoints.log.prompts
        if not argument:
            await self._say(describe(s.checkpoints.log, s.cwd))
            return
        number = _number(argument)
        if number is None or not 1 <= number <= len(prompts):
            have = f"1–{len(prompts)}" if len(prompts) > 1 else ("1" if prompts else "none yet")
            await self._say(
                f"`/rewind {one_line(argument[:40])}`: give a prompt number (this session's: {have}). Type `/rewind` to list them."
            )
            return
        if not s.journal.saving:
            await self._say(
                "This session is not saved (its file cannot be written), so its conversation cannot be rewound; "
                "nothing was changed."
            )
            return
        mark = prompts[number - 1]
        policy = PathPolicy([s.cwd, *s.additional_directories])
        # Files and conversation go together: a cancel once the files are being put back must not leave the
        # conversation unrewound (the work is local and bounded), and the person is told what was done.
        with anyio.CancelScope(shield=True):
            blobs = s.checkpoints.blobs
            outcome = await anyio.to_thread.run_sync(restore_files, s.checkpoints.log, number, policy, blobs)
            compactions = s.conversation.compactions
            s.persist(
                en.RewindEntry(
                    prompt=number,
                    message_index=mark.message_index,
                    restored=outcome.restored,
                    kept=[p for p, _ in outcome.kept],
                )
            )
            rebuilt = s.journal.saving and self._rebuild()  # a failed write left the session unsaved
            undone = compactions - s.conversation.compactions if rebuilt else 0
            await self._say(summary(number, len(prompts), mark.first_line, outcome, s.cwd, undone, rebuilt))

    def _rebuild(self) -> bool:
        """The live session as a load of its file builds it now (False: the file could not be read again)."""
        s = self._s
        store = s.rt.store
        try:
            loaded = store.read(s.id)
        except (OSError, ValueError) as exc:  # SessionNotFound / SessionFormatError / a read error
            log.error("session %s: cannot read its file after a rewind: %s", s.id, exc)
            return False
        rebuilt = Conversation.restore(loaded.entries, store.handoff_dir(s.id), s.model_id)
        for _call, result in rebuilt.repaired.tail:  # calls left open before prompt N: ended as a load ends them
            s.persist(en.MessageEntry(message=result))
        s.conversation = rebuilt.conversation
        s.checkpoints.log = CheckpointLog.from_entries(loaded.entries)
        s.ctx.reload(s.conversation.messages, rebuilt.figures, s.conversation.compactions)
        if s.ctx.reopen is not None:  # the servers are those of this connection already: the prefix is final
            s.ctx.reopen.servers_known(s.tools.mcp)
        return True

    async def _say(self, text: str) -> None:
        await say(self._s, text)


def _number(argument: str) -> int | None:
    text = argument.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else None


def _shown(path: str, cwd: str) -> str:
    """The path as the person knows it (relative inside the cwd), on one line whatever a damaged file holds."""
    inside = path.startswith(cwd.rstrip(os.sep) + os.sep)
    return one_line(path[len(cwd.rstrip(os.sep)) + 1 :] if inside else path)


def describe(cp_log: CheckpointLog, cwd: str) -> str:
    if not cp_log.prompts:
        return "No prompts yet: nothing to rewind."
    lines = [
        "Prompts of this session (`/rewind N` puts the files back as they were before prompt N and takes "
        "prompts N… out of the conversation):",
        "",
    ]
    for mark in cp_log.prompts:
        changed = ", ".join(f"{_shown(p, cwd)} ({_kind(r)})" for p, r in mark.files.items())
        lines.append(f"{mark.number}. {mark.first_line} — {changed or 'no file changes'}")
    lines += ["", "Changes made by shell commands are not recorded."]
    return "\n".join(lines)


def _kind(record: FileRecord) -> str:
    if record.unrecorded:
        return "changed; no copy kept: " + record.unrecorded
    if record.before is None:
        return "created" if record.after is not None else "created and removed"
    return "deleted" if record.after is None else "modified"


def restore_files(cp_log: CheckpointLog, number: int, policy: PathPolicy, blobs: BlobStore) -> Outcome:
    """Every file ama changed in prompt `number` or later, put back as it was before that prompt (see the
    module's doc for what is left alone)."""
    out = Outcome()
    firsts: dict[str, FileRecord] = {}
    for mark in cp_log.prompts[number - 1 :]:
        for path, record in mark.files.items():
            firsts.setdefault(path, record)
    for path, record in firsts.items():
        _, last = cp_log.last_written(path, number)
        try:
            why = _restore_one(path, record, last, policy, blobs, out)
        except (ValueError, OSError) as exc:  # a path no file can have (a NUL: a damaged file), an I/O error
            log.warning("rewind: %r left alone: %s", path, exc)
            why = "it cannot be looked at" if isinstance(exc, ValueError) else f"it cannot be read ({exc})"
        if why is not None:
            out.kept.append((path, why))
    return out


def _restore_one(
    path: str, record: FileRecord, last: str | None, policy: PathPolicy, blobs: BlobStore, out: Outcome
) -> str | None:
    """None when done (restored, or already so); else why the file was left alone."""
    if record.unrecorded:
        return f"no copy was kept ({record.unrecorded})"
    # The folder, links resolved, must lie in the session's folders (a session file is not trusted to name the
    # path); the file itself is looked at without following a link.
    if not os.path.isabs(path) or not policy.contains(os.path.realpath(os.path.dirname(path))):
        return "it is outside the session's folders"
    try:
        now = file_digest(path)
    except Unreadable as exc:
        return f"{exc.reason} now"
    if now == record.before:
        out.already.append(path)
        return None
    if now != last:
        return "it changed since ama last wrote it"
    return _put_back(path, record.before, policy, blobs, out)


def _put_back(path: str, before: str | None, policy: PathPolicy, blobs: BlobStore, out: Outcome) -> str | None:
    """The file as it was before the prompt (`before` its digest; None: it did not exist, so it is removed)."""
    if before is None:
        why = _remove(path, policy)
        if why is None:
            out.restored.append(path)
            out.removed.append(path)
        return why
    data = blobs.get(before)
    if data is None:
        return "its saved copy is missing or damaged"
    why = _write_back(path, data, policy)
    if why is None:
        out.restored.append(path)
    return why


def _parent_fd(path: str, policy: PathPolicy, create: bool) -> int | str:
    """A descriptor on `path`'s folder, which must be a real folder (no symlink on the way) inside the session's
    folders; else why not."""
    parent = os.path.dirname(path)
    if create:
        why = _make_folders(parent, policy)
        if why is not None:
            return why
    if os.path.realpath(parent) != parent or not policy.contains(parent):
        return "its folder is a symbolic link now, or outside the session's folders"
    try:
        return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return f"its folder cannot be opened ({exc.strerror or exc})"


def _make_folders(parent: str, policy: PathPolicy) -> str | None:
    """`parent` and the folders above it that are missing, made below the nearest existing one, which must be a
    real folder inside the session's folders; None when done, else why not."""
    missing = []
    probe = parent
    while not os.path.lexists(probe) and probe != os.path.dirname(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if not policy.contains(os.path.realpath(probe)) or os.path.realpath(probe) != probe:
        return "its folder is outside the session's folders"
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        except OSError as exc:
            return f"its folder cannot be made ({exc.strerror or exc})"
    return None


def _remove(path: str, policy: PathPolicy) -> str | None:
    fd = _parent_fd(path, policy, create=False)
    if isinstance(fd, str):
        return fd
    try:
        name = os.path.basename(path)
        if not stat.S_ISREG(os.lstat(name, dir_fd=fd).st_mode):
            return "it is no longer a regular file"
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"it cannot be removed ({exc.strerror or exc})"
    finally:
        os.close(fd)
    return None


def _write_back(path: str, data: bytes, policy: PathPolicy) -> str | None:
    """`data` written to a new file beside `path`, then renamed over it: the name is replaced, never followed."""
    fd = _parent_fd(path, policy, create=True)
    if isinstance(fd, str):
        return fd
    name = os.path.basename(path)
    try:
        try:
            mode: int | None = stat.S_IMODE(os.lstat(name, dir_fd=fd).st_mode)
        except FileNotFoundError:
            mode = None
        ownfiles.replace_in(fd, name, data, mode)
    except OSError as exc:
        return f"it cannot be written ({exc.strerror or exc})"
    finally:
        os.close(fd)
    return None


def summary(number: int, total: int, first_line: str, out: Outcome, cwd: str, undone: int, rebuilt: bool) -> str:
    lines = [_headline(number, total, first_line, rebuilt), *_file_lines(out, cwd)]
    if undone:
        lines.append(
            f"This also undid {undone} compaction{'s' if undone > 1 else ''}: the conversation is back as it was "
            "before that prompt, with the messages the compaction had summarised (the session file keeps them); "
            "ama compacts again when the context fills."
        )
    return "\n".join(lines)


def _headline(number: int, total: int, first_line: str, rebuilt: bool) -> str:
    if not rebuilt:
        return (
            f"Rewound the files to before prompt {number} ({first_line}), but the session file could not be "
            "written or read again (the log says why), so the conversation is unchanged here."
        )
    span = f"prompt {number}" if number == total else f"prompts {number}–{total}"
    return f"Rewound to before prompt {number} ({first_line}): {span} left the conversation."


def _file_lines(out: Outcome, cwd: str) -> list[str]:
    """What the rewind did to each file, a line an outcome."""
    restored = [p for p in out.restored if p not in out.removed]
    named = (("Restored", restored), ("Removed (created since)", out.removed), ("Already as before", out.already))
    lines = [f"{label}: " + ", ".join(_shown(p, cwd) for p in paths) for label, paths in named if paths]
    lines += [f"Left as it is: {_shown(path, cwd)} — {why}." for path, why in out.kept]
    return lines or ["ama changed no files since then."]


def checkpoints_folder(store: SessionStore, session_id: str) -> Path:
    from ama_acp.session.store.checkpoint_files import checkpoints_dir

    return checkpoints_dir(store.sessions_dir.parent, session_id)
