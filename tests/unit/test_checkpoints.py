"""Checkpoints' parts (session/store/checkpoint_files.py, checkpoints.py, rewind.py): the copies, the recording around a
write, the putting back with its refusals, and a deleted session's copies going with it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.session.history.checkpoints import CheckpointLog, Checkpoints, RecordingWorkspace
from ama_acp.session.history.rewind import restore_files
from ama_acp.session.store import entries as en
from ama_acp.session.store.checkpoint_files import BlobStore, Unreadable, checkpoints_dir, digest, read_file
from ama_acp.session.store.session_store import SessionStore
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import LocalWorkspace


def test_copies_are_content_addressed_private_and_checked_when_read(tmp_path):
    blobs = BlobStore(tmp_path / "cp")
    name = blobs.put(b"hello")
    assert name == digest(b"hello") and blobs.put(b"hello") == name
    assert blobs.get(name) == b"hello"
    assert stat.S_IMODE(os.stat(tmp_path / "cp").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "cp" / name).st_mode) == 0o600
    (tmp_path / "cp" / name).write_bytes(b"altered")
    assert blobs.get(name) is None  # a copy that no longer matches its hash is never restored
    for bad in ("../etc/passwd", name.upper(), "", "a" * 63):
        assert blobs.get(bad) is None


def test_reading_a_workspace_file_never_follows_a_link_nor_opens_a_fifo(tmp_path):
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    assert read_file(str(tmp_path / "real")) == b"x"
    assert read_file(str(tmp_path / "missing")) is None
    with pytest.raises(Unreadable, match="symbolic link"):
        read_file(str(tmp_path / "link"))
    with pytest.raises(Unreadable, match="FIFO"):
        read_file(str(tmp_path / "fifo"))  # returns at once: never opened
    (tmp_path / "big").write_bytes(b"y" * 2048)
    with pytest.raises(Unreadable, match="larger"):
        read_file(str(tmp_path / "big"), limit=1024)


def _prompt(text: str) -> en.MessageEntry:
    return en.MessageEntry(message=UserMessage(content=[TextPart(text)]))


class _Recorder:
    def __init__(self, folder: Path) -> None:
        self.entries: list[en.Entry] = []
        self.log = CheckpointLog()
        self.cp = Checkpoints(self.log, lambda: folder, self.persist)

    def persist(self, entry: en.Entry) -> None:
        self.cp.log.observe(entry)
        self.entries.append(entry)


@pytest.mark.anyio
async def test_the_prompts_first_change_keeps_a_copy_and_later_ones_only_say_what_was_written(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("before\n")
    rec = _Recorder(tmp_path / "cp")
    workspace = RecordingWorkspace(LocalWorkspace(), rec.cp)
    await workspace.write_text(str(ws / "a.txt"), "ignored: no prompt yet\n")
    assert rec.entries == []
    rec.persist(_prompt("one"))
    await workspace.write_text(str(ws / "a.txt"), "first\n")
    await workspace.write_text(str(ws / "a.txt"), "second\n")
    await workspace.write_text(str(ws / "new.txt"), "made\n")
    changes = [e for e in rec.entries if isinstance(e, en.FileChangeEntry)]
    assert [(c.path, c.first) for c in changes] == [
        (str(ws / "a.txt"), True),
        (str(ws / "a.txt"), False),
        (str(ws / "new.txt"), True),
    ]
    assert rec.cp.blobs.get(changes[0].before or "") == b"ignored: no prompt yet\n"  # as the prompt found it
    assert changes[2].before is None and changes[2].unrecorded == ""  # it did not exist
    record = rec.log.prompts[0].files[str(ws / "a.txt")]
    assert record.after == digest(b"second\n")


@pytest.mark.anyio
async def test_a_write_that_fails_records_what_is_really_on_disk(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("kept\n")
    rec = _Recorder(tmp_path / "cp")

    class Failing(LocalWorkspace):
        async def write_text(self, path: str, text: str) -> None:
            await anyio.lowlevel.checkpoint()
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        rec.persist(_prompt("one"))
        await RecordingWorkspace(Failing(), rec.cp).write_text(str(ws / "a.txt"), "never\n")
    assert rec.log.prompts[0].files[str(ws / "a.txt")].after == digest(b"kept\n")


def _log(ws: Path, blobs: BlobStore, changes: list[tuple[int, str, bytes | None, bytes | None]]) -> CheckpointLog:
    """Prompts 1 and 2; `changes`: (prompt, name, before, after) — the first change of each per prompt."""
    log = CheckpointLog.from_entries([_prompt("one")])
    seen: set[tuple[int, str]] = set()
    for number, name, before, after in changes:
        while len(log.prompts) < number:
            log.observe(_prompt("next"))
        first = (number, name) not in seen
        seen.add((number, name))
        log.observe(
            en.FileChangeEntry(
                prompt=number,
                path=str(ws / name),
                first=first,
                before=blobs.put(before) if before is not None else None,
                after=digest(after) if after is not None else None,
            )
        )
    return log


def test_files_are_put_back_unless_changed_since_and_a_path_outside_is_never_touched(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("ama\n")
    blobs = BlobStore(tmp_path / "cp")
    log = _log(
        ws,
        blobs,
        [
            (2, "mod.txt", b"old\n", b"ama\n"),
            (2, "new.txt", None, b"ama\n"),
            (2, "gone.txt", b"was\n", None),  # deleted by ama: restored
            (2, "theirs.txt", b"old\n", b"ama\n"),
            (2, "../outside.txt", b"secret\n", b"ama\n"),  # a session file naming a path outside
            (2, "deep/er/x.txt", b"x\n", b"ama\n"),
            (2, "nul\x00.txt", b"x\n", b"ama\n"),  # a damaged file's path: no file can have it
        ],
    )
    (ws / "mod.txt").write_text("ama\n")
    (ws / "new.txt").write_text("ama\n")
    (ws / "theirs.txt").write_text("the person's\n")
    out = restore_files(log, 2, PathPolicy([str(ws)]), blobs)
    assert (ws / "mod.txt").read_text() == "old\n"
    assert not (ws / "new.txt").exists()
    assert (ws / "gone.txt").read_text() == "was\n"
    assert (ws / "theirs.txt").read_text() == "the person's\n"
    assert outside.read_text() == "ama\n"
    kept = dict(out.kept)
    assert kept[str(ws / "theirs.txt")] == "it changed since ama last wrote it"
    assert kept[str(ws / "../outside.txt")] == "it is outside the session's folders"
    assert kept[str(ws / "nul\x00.txt")] == "it cannot be looked at"
    # deep/er/x.txt: no file now and ama's last write was not "no file": the person removed it; left alone.
    assert not (ws / "deep").exists()


def test_a_rewind_to_an_earlier_prompt_uses_the_state_before_it_and_the_last_write_since(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    blobs = BlobStore(tmp_path / "cp")
    log = _log(ws, blobs, [(1, "f.txt", b"v0\n", b"v1\n"), (2, "f.txt", b"v1\n", b"v2\n")])
    (ws / "f.txt").write_text("v2\n")
    restore_files(log, 1, PathPolicy([str(ws)]), blobs)
    assert (ws / "f.txt").read_text() == "v0\n"


def test_deleting_a_session_deletes_its_checkpoints(tmp_path):
    store = SessionStore(tmp_path / "data", fsync="never")
    header = en.Header(session_id="ses_0123456789abcdef", cwd=str(tmp_path))
    store.create(header).close()
    folder = checkpoints_dir(tmp_path / "data", header.session_id)
    BlobStore(folder).put(b"copy")
    other = checkpoints_dir(tmp_path / "data", "ses_other")
    BlobStore(other).put(b"copy")
    store.delete(header.session_id)
    assert not folder.exists()
    assert other.exists()  # another session's copies stay
