"""session/fork's pure parts (ama_acp/session/history/fork.py): where a running turn begins in a session file, the fork's
title, and which handoff folder a stored (untrusted) path names."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.conversation.messages import AssistantMessage, TextPart, UserMessage
from ama_acp.rpc.errors import AcpError
from ama_acp.session.history.fork import FORK_MARK, _top_folder, completed_turns, fork_copy, fork_title
from ama_acp.session.store import entries as en
from ama_acp.session.store.session_store import SessionStore


def person(text: str) -> en.MessageEntry:
    return en.MessageEntry(message=UserMessage(content=[TextPart(text)]))


def ama_note(text: str) -> en.MessageEntry:
    return en.MessageEntry(message=UserMessage(content=[TextPart(text)], origin="ama"))


def reply(text: str) -> en.MessageEntry:
    return en.MessageEntry(message=AssistantMessage(content=[TextPart(text)]))


FIRST_TURN: list[en.Entry] = [
    en.ModelEntry(model_id="local/m"),
    en.TitleEntry(title="one"),
    person("one"),
    reply("answer one"),
    en.TurnEntry(stop_reason="end_turn"),
]


def test_a_running_turn_is_left_out_but_settings_chosen_during_it_are_kept() -> None:
    running: list[en.Entry] = [
        person("two"),
        ama_note("a reminder"),
        en.ModeEntry(mode_id="read_only"),
        reply("half of a rep"),
        en.ModelEntry(model_id="local/big"),
    ]
    kept = completed_turns(FIRST_TURN + running)
    assert kept == [*FIRST_TURN, running[2], running[4]]


def test_the_first_turn_running_leaves_out_its_title_too() -> None:
    entries: list[en.Entry] = [en.ModelEntry(model_id="m"), en.TitleEntry(title="t"), person("t"), reply("par")]
    assert completed_turns(entries) == entries[:1]


def test_a_running_slash_command_is_left_out() -> None:
    entries = [*FIRST_TURN, en.CommandEntry(text="/compact"), en.CommandOutputEntry(text="compacting")]
    assert completed_turns(entries) == FIRST_TURN


def test_an_ended_turn_or_no_turn_keeps_everything() -> None:
    assert completed_turns(FIRST_TURN) == FIRST_TURN
    nothing: list[en.Entry] = [en.ModelEntry(model_id="m"), en.ModeEntry(mode_id="manual")]
    assert completed_turns(nothing) == nothing


_ENTRIES = st.lists(
    st.one_of(  # fresh objects each: the property tells entries apart by identity
        st.text(max_size=5).map(person),
        st.text(max_size=5).map(ama_note),
        st.text(max_size=5).map(reply),
        st.builds(lambda: en.TurnEntry(stop_reason="end_turn")),
        st.builds(lambda: en.TitleEntry(title="t")),
        st.builds(lambda: en.CommandEntry(text="/context")),
        st.sampled_from(["manual", "read_only"]).map(lambda m: en.ModeEntry(mode_id=m)),
    ),
    max_size=30,
)


def _said(e: en.Entry) -> bool:
    """What the person said: a prompt, or a slash command."""
    return isinstance(e, en.CommandEntry) or (
        isinstance(e, en.MessageEntry) and isinstance(e.message, UserMessage) and e.message.origin == "person"
    )


@given(_ENTRIES)
def test_the_fork_keeps_every_completed_turn_and_every_setting(entries: list[en.Entry]) -> None:
    kept = completed_turns(entries)
    ids = [id(e) for e in entries]
    positions = [ids.index(id(e)) for e in kept]  # every kept entry is one of the file's, in the file's order
    assert positions == sorted(set(positions))
    # Settings are never lost: the fork's mode is the original's current one.
    assert [e for e in entries if isinstance(e, en.ModeEntry)] == [e for e in kept if isinstance(e, en.ModeEntry)]
    said = [i for i, e in enumerate(entries) if _said(e)]
    ended = [i for i, e in enumerate(entries) if isinstance(e, en.TurnEntry)]
    if not said or (ended and ended[-1] > said[-1]):
        assert kept == entries  # nothing running: the whole file
        return
    # A turn is running from the last thing the person said: it is left out, and everything before it is kept but
    # what goes with that prompt — the title set with it and the command typed when it is a command file's prompt
    # (at most one command, titles around it), right before it.
    assert said[-1] not in positions
    before = [i for i in range(said[-1]) if not isinstance(entries[i], en.ModeEntry)]  # settings: kept, above
    lost = [i for i in before if i not in positions]
    assert lost == before[len(before) - len(lost) :]  # only a tail, right before the prompt
    assert all(isinstance(entries[i], en.TitleEntry | en.CommandEntry) for i in lost)
    assert sum(isinstance(entries[i], en.CommandEntry) for i in lost) <= 1


def test_fork_title_marks_once_and_leaves_untitled_alone() -> None:
    assert fork_title("Fix the parser") == "Fix the parser" + FORK_MARK
    assert fork_title("Fix the parser" + FORK_MARK) == "Fix the parser" + FORK_MARK
    assert fork_title(None) is None


def test_top_folder_of_stored_paths() -> None:
    assert _top_folder("compaction-3/handoff.md") == "compaction-3"
    for bad in (None, "", "handoff.md", "/etc/passwd", "../x/handoff.md", "./x"):
        assert _top_folder(bad) is None, bad


@given(st.text(max_size=40))
def test_top_folder_never_names_anything_outside_the_folder(rel: str) -> None:
    top = _top_folder(rel)
    if top is not None:
        assert "/" not in top and top not in ("", ".", "..")


def test_a_file_held_by_another_process_mid_turn_is_copied_up_to_its_last_completed_turn(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "data")
    cwd = str(tmp_path)
    header = en.Header(session_id="ses_original", cwd=cwd)
    folder = store.handoff_dir(header.session_id) / "compaction-1"
    folder.mkdir(parents=True)
    (folder / "handoff.md").write_text("HANDOFF")
    (store.handoff_dir(header.session_id) / "unrelated").mkdir()
    compaction = en.CompactionEntry(number=1, summary_path="compaction-1/handoff.md", kept_from_index=1)
    hostile = en.CompactionEntry(number=2, summary_path="../../escape/handoff.md", kept_from_index=1)
    running = [person("two"), reply("half")]
    with store.create(header) as writer:  # its lock: an ama process that has the session open
        for entry in [*FIRST_TURN, compaction, hostile, *running]:
            writer.append(entry)
        held = fork_copy(store, store.read(header.session_id), cwd, [], None)
    assert held.running
    assert [type(e) for e in held.loaded.entries] == [
        *(type(e) for e in FIRST_TURN),
        en.CompactionEntry,
        en.CompactionEntry,
        en.TitleEntry,  # "one (fork)"
    ]
    fork_id = held.loaded.header.session_id
    assert fork_id != header.session_id and held.loaded.header.cwd == cwd
    copied = store.handoff_dir(fork_id)
    assert (copied / "compaction-1" / "handoff.md").read_text() == "HANDOFF"
    assert sorted(p.name for p in copied.iterdir()) == ["compaction-1"]  # nothing else of the original's folder
    # Closed (no process holds it): the whole file, its unfinished prompt included, as a load would show it.
    idle = fork_copy(store, store.read(header.session_id), cwd, [], None)
    assert not idle.running and len(idle.loaded.entries) == len(FIRST_TURN) + 2 + len(running) + 1


def test_a_fork_in_another_folder_is_refused(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "data")
    header = en.Header(session_id="ses_original", cwd=str(tmp_path))
    store.create(header).close()
    with pytest.raises(AcpError) as err:
        fork_copy(store, store.read(header.session_id), "/elsewhere", [], False)
    assert err.value.code == -32602 and "belongs to" in err.value.message
    assert not list(store.sessions_dir.glob("*/"))  # nothing copied for a refused fork
