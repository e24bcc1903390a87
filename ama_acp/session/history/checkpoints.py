"""Checkpoints: before a prompt's first change to a file, ama keeps a copy of the file as it was, so `/rewind`
(session/history/rewind.py) can put it back (docs/sessions.md "Checkpoints and /rewind").

- `CheckpointLog` is what the session file says: the person's prompts of the thread (number, first line, where
  the message sits in the file) and, per prompt, the files ama changed — each file's state before the prompt
  (a copy's hash, or "did not exist", or why no copy could be kept) and the bytes ama last wrote. It is built
  from the file's entries on load (`from_entries`) and follows every entry the live session writes (`observe`).
- `Checkpoints` records: before each write it reads the file's bytes from the local disk — also when the write
  goes through the editor's `fs/write_text_file`: the rewind puts bytes back on the disk, so the disk's bytes are
  the state to keep (an editor's unsaved buffer is not on the disk) —, saves a copy on the prompt's first change
  to it (session/store/checkpoint_files.py), writes a `file_change` entry, and after the write reads the file back
  so the entry names the bytes really on disk (an editor may save them with other line endings).
- `RecordingWorkspace` is the seam: the session's workspace with the recording around `write_text`, the one way
  ama's tools change a file (write_file, edit_file). Commands (`run_command`) are not recorded: what a shell
  command changes is not known before it runs (like Claude Code's checkpoints).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.session.store import entries as en
from ama_acp.session.store.checkpoint_files import BlobStore, Unreadable, digest, file_digest, read_file
from ama_acp.session.store.rewound_thread import is_prompt
from ama_acp.tools.workspace import CommandResult, DirEntry, FileStat, Workspace

log = logging.getLogger(__name__)

FIRST_LINE_CHARS = 80


class FileRecord(msgspec.Struct):
    """One file a prompt changed."""

    before: str | None  # the copy's hash; None: the file did not exist before the prompt (when `unrecorded` is "")
    unrecorded: str  # why no copy was kept ("" when one was): /rewind leaves the file alone
    after: str | None  # the hash of the bytes ama last wrote in this prompt; None: no file after it


class PromptMark(msgspec.Struct):
    number: int
    first_line: str
    message_index: int  # its MessageEntry index in the file (rewinds applied)
    files: dict[str, FileRecord] = msgspec.field(default_factory=dict)  # by real path, in the order first changed


class CheckpointLog:
    def __init__(self) -> None:
        self.prompts: list[PromptMark] = []
        self.messages = 0  # MessageEntries so far

    @classmethod
    def from_entries(cls, entries: list[en.Entry]) -> CheckpointLog:
        out = cls()
        for entry in entries:
            out.observe(entry)
        return out

    @property
    def current(self) -> PromptMark | None:
        return self.prompts[-1] if self.prompts else None

    def observe(self, entry: en.Entry) -> None:
        match entry:
            case en.MessageEntry():
                if is_prompt(entry):
                    assert isinstance(entry.message, UserMessage)
                    self.prompts.append(PromptMark(len(self.prompts) + 1, _first_line(entry.message), self.messages))
                self.messages += 1
            case en.FileChangeEntry():
                self._change(entry)

    def _change(self, entry: en.FileChangeEntry) -> None:
        # A record names a prompt of the thread as written; one that names another (a damaged file) is ignored.
        if not 1 <= entry.prompt <= len(self.prompts) or not isinstance(entry.path, str) or not entry.path:
            return
        files = self.prompts[entry.prompt - 1].files
        known = files.get(entry.path)
        if known is None:
            if not entry.first:
                return  # the record of its state before the prompt is missing: nothing to restore it to
            files[entry.path] = FileRecord(entry.before, entry.unrecorded, entry.after)
        else:
            known.after = entry.after

    def last_written(self, path: str, since: int = 1) -> tuple[bool, str | None]:
        """Whether ama wrote `path` in prompt `since` or later, and the hash of what it last wrote."""
        found, after = False, None
        for mark in self.prompts[since - 1 :]:
            record = mark.files.get(path)
            if record is not None:
                found, after = True, record.after
        return found, after


def _first_line(message: UserMessage) -> str:
    text = next((p.text for p in message.content if isinstance(p, TextPart) and p.text.strip()), "")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "(no text)")
    return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 1].rstrip() + "…"


class Checkpoints:
    """One session's checkpoints: its log, its copies, and the recording around each write."""

    def __init__(self, log_: CheckpointLog, folder: Callable[[], Path], persist: Callable[[en.Entry], None]) -> None:
        self.log = log_
        self._folder = folder  # where the copies go (resolved when first needed: the data dir)
        self._persist = persist  # the session's: the journal, and `observe` through it

    @property
    def blobs(self) -> BlobStore:
        return BlobStore(self._folder())

    async def before_write(self, path: str, text: str) -> tuple[int, str, str | None] | None:
        """Records the coming write of `text` to `path`; what `after_write` needs, or None when no prompt runs."""
        mark = self.log.current
        if mark is None:
            return None
        real = await anyio.to_thread.run_sync(os.path.realpath, path)  # the file the write changes
        announced = digest(text.encode("utf-8"))
        first = real not in mark.files
        before: str | None = None
        unrecorded = ""
        if first:
            before, unrecorded = await anyio.to_thread.run_sync(self._keep, real)
        self._persist(
            en.FileChangeEntry(
                prompt=mark.number, path=real, after=announced, first=first, before=before, unrecorded=unrecorded
            )
        )
        return mark.number, real, announced

    def _keep(self, real: str) -> tuple[str | None, str]:
        """The copy of `real` as it is now: (its hash or None when there is no file, "") or (None, why not)."""
        try:
            data = read_file(real)
        except Unreadable as exc:
            return None, exc.reason
        if data is None:
            return None, ""
        try:
            return self.blobs.put(data), ""
        except OSError as exc:
            log.warning("checkpoint: cannot save a copy of %s: %s", real, exc)
            return None, f"its copy could not be saved ({exc.strerror or exc})"

    async def after_write(self, recorded: tuple[int, str, str | None]) -> None:
        """The bytes really on disk after the write, when they are not those announced (or the write failed)."""
        number, real, announced = recorded
        try:
            actual = await anyio.to_thread.run_sync(file_digest, real)
        except Unreadable:
            return  # no file ama can compare with: the rewind will find it changed and leave it alone
        if actual != announced:
            self._persist(en.FileChangeEntry(prompt=number, path=real, after=actual))


class RecordingWorkspace:
    """A session's workspace, with every write recorded by its checkpoints first (see the module's doc)."""

    def __init__(self, inner: Workspace, checkpoints: Checkpoints) -> None:
        self.inner = inner
        self._checkpoints = checkpoints

    async def write_text(self, path: str, text: str) -> None:
        recorded = await self._checkpoints.before_write(path, text)
        try:
            await self.inner.write_text(path, text)
        finally:
            if recorded is not None:
                # Also when the turn is cancelled during the write (a local write finishes first): the
                # record must say what is on disk.
                with anyio.CancelScope(shield=True):
                    await self._checkpoints.after_write(recorded)

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        return await self.inner.read_text(path, line, limit)

    async def stat(self, path: str) -> FileStat | None:
        return await self.inner.stat(path)

    async def exists(self, path: str) -> bool:
        return await self.inner.exists(path)

    async def is_dir(self, path: str) -> bool:
        return await self.inner.is_dir(path)

    async def list_dir(self, path: str) -> list[DirEntry]:
        return await self.inner.list_dir(path)

    async def run_command(
        self, command: str, cwd: str, timeout: float, output_cap: int, confined: bool = True
    ) -> CommandResult:
        return await self.inner.run_command(command, cwd, timeout, output_cap, confined)
