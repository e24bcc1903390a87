"""Project instructions, protocol-free (agent/instructions.py, agent/instruction_files.py) and their config.

The files are hostile input: a link out of the workspace, a FIFO, a directory, bytes that are not UTF-8, a huge
file, a note of ama's forged in a person's message. The parsers (the cap, the notes' tag, the `[instructions]`
names) are checked as properties.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.agent.instruction_files import (
    NESTED_CHARS,
    PER_FILE_CHARS,
    PROMPT_CHARS,
    InstructionFile,
    announced_in,
    clip,
    find,
    kept_file,
    nested_section,
)
from ama_acp.agent.instructions import SessionInstructions
from ama_acp.config import ConfigError, InstructionsConfig, parse_config
from ama_acp.conversation.messages import Message, TextPart, UserMessage
from tests.support.conversation import first_text

NAMES = ["AGENTS.md", "CLAUDE.md"]


def session(ws: Path, mine: Path | None = None, enabled: bool = True) -> SessionInstructions:
    return SessionInstructions(InstructionsConfig(enabled=enabled), str(ws), str(mine) if mine else None)


# --- the cap -----------------------------------------------------------------------------------------------


@given(st.text(), st.integers(min_value=1, max_value=500))
def test_clip_keeps_short_texts_and_marks_every_cut(text: str, cap: int) -> None:
    out, cut = clip(text, cap, len(text.encode()))
    assert cut == (len(text) > cap)
    if not cut:
        assert out == text
    else:
        body, _, marker = out.rpartition("\n[ama cut this file here")
        assert len(body) <= cap + 1 and text.startswith(body.rstrip("\n")) and marker.endswith("need it.]")


def test_a_huge_file_is_cut_at_the_cap_with_the_size_said(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("line\n" * 20_000, encoding="utf-8")  # 100,000 characters
    f = find(str(tmp_path), NAMES, "workspace", "", str(tmp_path.resolve()), PER_FILE_CHARS)
    assert f is not None and f.cut and f.size == 100_000
    assert "it holds 100,000 bytes, and at most 40,000 characters of it are loaded" in f.text
    assert len(f.text) < PER_FILE_CHARS + 200


def test_bytes_that_are_not_utf8_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"ok \xff\xfe end\n")
    f = find(str(tmp_path), NAMES, "workspace", "", str(tmp_path.resolve()), PER_FILE_CHARS)
    assert f is not None and f.text == "ok \ufffd\ufffd end\n"


# --- what is refused ---------------------------------------------------------------------------------------


def test_a_link_out_of_the_workspace_is_refused_and_the_next_name_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    out.mkdir()
    (out / "x.md").write_text("OUTSIDE", encoding="utf-8")
    (ws / "AGENTS.md").symlink_to(out / "x.md")
    (ws / "CLAUDE.md").write_text("inside", encoding="utf-8")
    f = find(str(ws), NAMES, "workspace", "", str(ws.resolve()), PER_FILE_CHARS)
    assert f is not None and f.shown == "CLAUDE.md" and f.text == "inside"
    assert "AGENTS.md refused: it links outside the workspace" in caplog.text


def test_a_link_inside_the_workspace_is_followed_and_the_global_file_may_link_anywhere(tmp_path: Path) -> None:
    ws, mine, out = tmp_path / "ws", tmp_path / "mine", tmp_path / "out"
    for d in (ws, mine, out):
        d.mkdir()
    (ws / "CLAUDE.md").write_text("shared rules", encoding="utf-8")
    (ws / "AGENTS.md").symlink_to("CLAUDE.md")  # the usual `ln -s CLAUDE.md AGENTS.md`
    (out / "mine.md").write_text("my rules", encoding="utf-8")
    (mine / "AGENTS.md").symlink_to(out / "mine.md")
    s = session(ws, mine)
    assert [(f.scope, f.text) for f in s.files] == [("global", "my rules"), ("workspace", "shared rules")]
    assert s.files[1].shown == "AGENTS.md"


def test_a_fifo_a_directory_and_a_dangling_link_are_refused_without_blocking(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    os.mkfifo(ws / "AGENTS.md")
    (ws / "CLAUDE.md").mkdir()
    (ws / "a" / "AGENTS.md").symlink_to(ws / "missing.md")
    done: list[SessionInstructions] = []
    worker = threading.Thread(target=lambda: done.append(session(ws)), daemon=True)
    worker.start()
    worker.join(timeout=5)  # a blocking open of the FIFO would never return
    assert done and done[0].files == [] and done[0].block() == ""
    s = done[0]
    s.touched([str(ws / "a" / "f.py")], [])
    assert s.take_note([]) is None


# --- the session's files -------------------------------------------------------------------------------------


def _convo(*notes: UserMessage) -> list[Message]:
    return [UserMessage(content=[TextPart("hi")]), *notes]


def test_nested_files_are_announced_once_nearest_first_and_not_the_workspace_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("top", encoding="utf-8")
    (ws / "a" / "AGENTS.md").write_text("rule a", encoding="utf-8")
    (ws / "a" / "b" / "CLAUDE.md").write_text("rule b", encoding="utf-8")
    s = session(ws)
    messages = _convo()
    s.touched([str(ws / "a" / "b" / "x.py"), "/elsewhere/y.py", str(ws), "rel\0bad"], messages)
    note = s.take_note(messages)
    assert note is not None and note.origin == "ama"
    text = first_text(note)
    assert [p for p, _ in announced_in(text)] == ["a/AGENTS.md", "a/b/CLAUDE.md"]
    assert "top" not in text
    messages.append(note)
    s.refresh()  # the next turn: folders are looked at again, but announced files are not repeated
    s.touched([str(ws / "a" / "b" / "z.py")], messages)
    assert s.take_note(messages) is None


def test_a_note_gone_from_the_context_is_announced_again(tmp_path: Path) -> None:
    """A compaction or a rewind replaced the context: the note is not there any more."""
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "a" / "AGENTS.md").write_text("rule a", encoding="utf-8")
    s = session(ws)
    messages = _convo()
    s.touched([str(ws / "a" / "x.py")], messages)
    note = s.take_note(messages)
    assert note is not None
    messages.append(note)
    s.touched([str(ws / "a" / "x.py")], messages)
    assert s.take_note(messages) is None
    compacted = _convo()  # a new context without the note
    s.touched([str(ws / "a" / "x.py")], compacted)
    assert s.take_note(compacted) is not None


def test_a_loaded_context_s_notes_count_but_a_person_cannot_forge_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "a" / "AGENTS.md").write_text("rule a", encoding="utf-8")
    probe = find(str(ws / "a"), NAMES, "nested", "a", str(ws.resolve()), PER_FILE_CHARS)
    assert probe is not None
    forged = UserMessage(content=[TextPart(nested_section(probe, False))])  # the person's message
    s = session(ws)
    s.touched([str(ws / "a" / "x.py")], [forged])
    assert s.take_note([forged]) is not None  # a person's text is not ama's note
    real = UserMessage(content=[TextPart(nested_section(probe, False))], origin="ama")
    t = session(ws)
    t.touched([str(ws / "a" / "x.py")], [real])
    assert t.take_note([real]) is None  # a loaded session: already announced


def test_the_session_s_room_for_nested_files_is_bounded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(4):
        (ws / f"d{i}").mkdir(parents=True)
        (ws / f"d{i}" / "AGENTS.md").write_text(f"d{i} " + "x" * (PER_FILE_CHARS - 10), encoding="utf-8")
    s = session(ws)
    s.touched([str(ws / f"d{i}" / "f.py") for i in range(4)], [])
    note = s.take_note([])
    assert note is not None
    text = first_text(note)
    assert len(announced_in(text)) == NESTED_CHARS // PER_FILE_CHARS
    assert "d3/AGENTS.md (39,993 bytes) was not loaded: this session's room for instruction files" in text


def test_refresh_sees_a_file_appear_change_and_vanish(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    s = session(ws)
    assert s.block() == "" and s.refresh() is False
    (ws / "CLAUDE.md").write_text("uno", encoding="utf-8")
    assert s.refresh() is True and "uno" in s.block()
    assert s.refresh() is False  # nothing changed: a stat each, no read
    (ws / "AGENTS.md").write_text("dos", encoding="utf-8")  # the first name wins now
    assert s.refresh() is True and "dos" in s.block() and "uno" not in s.block()
    (ws / "AGENTS.md").unlink()
    (ws / "CLAUDE.md").unlink()
    assert s.refresh() is True and s.block() == ""


def test_disabled_reads_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("top", encoding="utf-8")
    (ws / "a" / "AGENTS.md").write_text("rule a", encoding="utf-8")
    s = session(ws, enabled=False)
    s.touched([str(ws / "a" / "x.py")], [])
    assert s.block() == "" and s.take_note([]) is None and s.refresh() is False


def test_the_workspace_file_has_room_before_the_global_one(tmp_path: Path) -> None:
    ws, mine = tmp_path / "ws", tmp_path / "mine"
    ws.mkdir()
    mine.mkdir()
    (ws / "AGENTS.md").write_text("w" * 50_000, encoding="utf-8")
    (mine / "AGENTS.md").write_text("g" * 50_000, encoding="utf-8")
    s = session(ws, mine)
    (ws_file,) = [f for f in s.files if f.scope == "workspace"]
    (mine_file,) = [f for f in s.files if f.scope == "global"]
    lead = {f.scope: len(f.text) - len(f.text.lstrip(f.text[0])) for f in s.files}
    assert lead["workspace"] == PER_FILE_CHARS  # the project's file whole up to its own cap
    assert 19_000 < lead["global"] <= PROMPT_CHARS - PER_FILE_CHARS  # the rest of the room
    assert ws_file.cut and mine_file.cut


# --- the notes' tag ------------------------------------------------------------------------------------------


@given(st.text(max_size=80))
def test_a_note_s_tag_names_any_path_back(shown: str) -> None:
    f = InstructionFile("nested", "/x", shown, "text", 4, False, "0123456789ab", ("/x", 4, 0, 0))
    assert announced_in(nested_section(f, False)) == [(shown, "0123456789ab")]


@given(st.text())
def test_any_text_parses_as_notes_without_raising(text: str) -> None:
    for path, digest in announced_in(text):
        assert isinstance(path, str) and len(digest) == 12


# --- the config --------------------------------------------------------------------------------------------


def test_the_config_s_names_are_plain_file_names() -> None:
    cfg = parse_config('[instructions]\nenabled = false\nfiles = ["GEMINI.md", "AGENTS.md"]\n')
    assert cfg.instructions == InstructionsConfig(enabled=False, files=["GEMINI.md", "AGENTS.md"])
    assert parse_config("").instructions.files == ["AGENTS.md", "CLAUDE.md"]
    for bad, why in (
        ("files = []", "instructions.files must list 1–10 file names"),
        ('files = ["docs/AGENTS.md"]', "instructions.files[0] = 'docs/AGENTS.md' must be a plain file name"),
        ('files = ["a", ".."]', "instructions.files[1] = '..' must be a plain file name"),
        ('files = ["a\\u0000b"]', "instructions.files[0]"),
        ('files = "AGENTS.md"', "Expected `array`"),
        ("size = 3", "unknown field `size`"),
    ):
        with pytest.raises(ConfigError, match=None) as exc:
            parse_config(f"[instructions]\n{bad}\n", "cfg")
        assert why in str(exc.value), (bad, str(exc.value))


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=3))
def test_any_list_of_names_is_taken_or_refused_with_a_config_error(names: list[str]) -> None:
    import json

    try:
        cfg = parse_config(f"[instructions]\nfiles = {json.dumps(names)}\n")
    except ConfigError:
        return
    for name in cfg.instructions.files:
        assert "/" not in name and "\\" not in name and name not in (".", "..") and name.isprintable()


@given(st.lists(st.text(max_size=40), max_size=5))
def test_any_paths_a_model_names_are_looked_at_without_raising(names: list[str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "a").mkdir()
        (ws / "a" / "AGENTS.md").write_text("rule a", encoding="utf-8")
        s = session(ws)
        s.touched([str(ws / n) for n in names] + names, [])
        note = s.take_note([])
        if note is not None:
            assert [p for p, _ in announced_in(first_text(note))] == ["a/AGENTS.md"]


@given(st.binary(max_size=2_000), st.integers(min_value=1, max_value=600))
def test_any_bytes_are_read_as_text_within_the_cap(data: bytes, cap: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "AGENTS.md").write_bytes(data)
        f = find(tmp, NAMES, "workspace", "", os.path.realpath(tmp), cap)
        assert f is not None and f.size == len(data)
        assert f.cut == (len(data.decode("utf-8", errors="replace")) > cap)
        if not f.cut:
            assert f.text == data.decode("utf-8", errors="replace")


# --- a prompt file changed after the freeze (the seed's `<system-reminder>`, issue 42) -----------------------------


def _changed(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(1, os.stat(path).st_mtime_ns + 1_000_000_000))  # a new mtime even on a coarse clock


def test_a_prompt_file_changed_after_the_freeze_is_told_once_and_again_after_a_compaction(tmp_path: Path) -> None:
    top = tmp_path / "AGENTS.md"
    top.write_text("old rule", encoding="utf-8")
    s = session(tmp_path)
    frozen = s.block()
    assert s.take_reminder(_convo()) is None  # before the freeze the system prompt itself follows the file
    s.freeze()
    _changed(top, "new rule")
    assert s.refresh() is True and s.block() == frozen  # the system prompt's copy stays
    messages = _convo()
    reminder = s.take_reminder(messages)
    assert reminder is not None and reminder.origin == "ama"
    text = first_text(reminder)
    assert text.startswith("<system-reminder>\n") and text.endswith("</system-reminder>") and "new rule" in text
    messages.append(reminder)
    assert s.take_reminder(messages) is None  # told: the context says so
    assert s.take_reminder(_convo()) is not None  # a compaction dropped it: told again
    _changed(top, "old rule")
    s.refresh()
    assert s.take_reminder(_convo()) is None  # back to what the system prompt says: nothing to tell
    assert s.take_reminder(messages) is not None  # but the context told "new rule": the change back is told


def test_a_removed_prompt_file_is_told_and_a_kept_copy_stays_frozen(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule", encoding="utf-8")
    s = session(tmp_path)
    kept = s.freeze()
    (tmp_path / "AGENTS.md").unlink()
    s.refresh()
    reminder = s.take_reminder(_convo())
    assert reminder is not None and "AGENTS.md was removed" in first_text(reminder)
    loaded = session(tmp_path)  # a load: the disk has no file, the session file has the copy
    loaded.keep(kept)
    assert loaded.block() == s.block() and "rule" in loaded.block() and loaded.current_block() == ""
    assert loaded.take_reminder(_convo()) is not None


def test_a_stored_copy_is_taken_only_as_ama_stores_one(tmp_path: Path) -> None:
    """The session file is hostile input: a scope ama never freezes, or a text longer than it ever stores, is
    refused; a good copy has the digest `find` gives the same text (so a reminder compares like for like)."""
    (tmp_path / "AGENTS.md").write_text("rule", encoding="utf-8")
    found = find(str(tmp_path), NAMES, "workspace", "", str(tmp_path.resolve()), PER_FILE_CHARS)
    assert found is not None
    kept = kept_file("workspace", found.shown, found.text, found.size, found.cut)
    assert kept is not None and kept.digest == found.digest and kept.scope == "workspace"
    assert kept_file("nested", "a/AGENTS.md", "rule", 4, False) is None
    assert kept_file("workspace", "AGENTS.md", "x" * (PER_FILE_CHARS * 2 + 1), 1, True) is None
    assert kept_file("global", "/home/p/.config/ama/AGENTS.md", "mine", -5, False) is not None  # size floored at 0
