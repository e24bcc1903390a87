"""session/store/task_journal.py: a session's kept tasks, read as hostile input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, UserMessage
from ama_acp.session.store.task_journal import TaskFigures, TaskJournal, decode_lines, journal_path, remove_task_journal
from ama_acp.session.tasks.figures import task_lines
from tests.support.hypothesis_profiles import examples

FIGURES: dict[str, object] = {
    "id": "call_1",
    "agent": "explore",
    "description": "Read notes",
    "model": "local/big",
    "status": "completed",
    "requests": 2,
    "tokens": 970,
    "contextTokens": 940,
    "contextWindow": 100000,
    "contextPercent": 0.9,
    "cost": {"amount": 0.00097, "currency": "USD"},
}

figures = st.fixed_dictionaries(
    {
        "id": st.text(max_size=10),
        "agent": st.text(max_size=10),
        "description": st.text(max_size=20),
        "model": st.text(max_size=10),
        "status": st.sampled_from(["completed", "failed", "cancelled"]),
        "requests": st.integers(0, 10**6),
    },
    optional={
        "tokens": st.integers(0, 10**9),  # an external agent's figures are absent when it never reported them
        "contextTokens": st.integers(0, 10**9),
        "external": st.just(True),
        "contextWindow": st.integers(0, 10**9),
        "contextPercent": st.floats(0, 100),
        "cost": st.fixed_dictionaries({"amount": st.floats(0, 1e6), "currency": st.just("USD")}),
        "error": st.text(max_size=30),
        "sessionId": st.text(max_size=20),
    },
)


@settings(max_examples=examples(200))
@given(st.lists(st.one_of(st.binary(max_size=80), figures.map(lambda f: json.dumps(f).encode())), max_size=6))
def test_any_bytes_decode_to_the_valid_lines_only_and_never_raise(lines: list[bytes]) -> None:
    data = b"\n".join(lines)
    got = decode_lines(data)
    assert all(isinstance(t, TaskFigures) for t in got)
    valid = []
    for line in data.split(b"\n"):
        try:
            valid.append(msgspec.json.decode(line, type=TaskFigures))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    assert got == valid


@settings(max_examples=examples(50))
@given(figures)
def test_a_kept_task_reads_back_as_it_was_listed(f: dict[str, object]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tasks" / "s.jsonl"
        TaskJournal(lambda: path).append(f, [UserMessage(content=[TextPart("task")])])
        [back] = TaskJournal(lambda: path).previous()
        assert back.figures() == f


def test_the_conversation_is_kept_and_a_second_journal_sees_both_tasks(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "s1")
    first = TaskJournal(lambda: path)
    assert first.previous() == []
    messages: list[Message] = [
        UserMessage(content=[TextPart("find it")]),
        AssistantMessage(content=[TextPart("found")]),
    ]
    first.append(FIGURES, messages)
    first.append({**FIGURES, "id": "call_2", "status": "failed", "error": "boom"}, [])
    assert first.previous() == []  # read before the first write: this connection's tasks are its records
    kept = TaskJournal(lambda: path).previous()
    assert [t.id for t in kept] == ["call_1", "call_2"]
    assert task_lines(kept[1].figures()) == [
        "- `explore` — Read notes: failed; 2 requests, 970 tokens billed; ctx 0.9% (940 / 100,000); "
        "$0.0010 (local/big)",
        "  boom",
    ]
    stored = json.loads(path.read_bytes().splitlines()[0])
    assert [m["type"] for m in stored["messages"]] == ["user", "assistant"]
    remove_task_journal(tmp_path, "s1")
    assert not path.exists()
    remove_task_journal(tmp_path, "s1")  # gone already: nothing to do


def test_a_fifo_or_a_link_in_its_place_is_not_read_and_nothing_hangs(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "s1")
    path.parent.mkdir()
    os.mkfifo(path)
    assert TaskJournal(lambda: path).previous() == []
    path.unlink()
    target = tmp_path / "elsewhere.jsonl"
    target.write_text(json.dumps(FIGURES) + "\n")
    path.symlink_to(target)
    assert TaskJournal(lambda: path).previous() == []
    TaskJournal(lambda: path).append(FIGURES, [])  # not followed for writing either, and no exception
    assert target.read_text().count("\n") == 1


def test_a_record_that_does_not_fit_or_a_disk_that_refuses_is_logged_not_raised(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    path = blocked / "tasks" / "s.jsonl"  # its folder cannot be made: a file is in the way
    TaskJournal(lambda: path).append(FIGURES, [])
    TaskJournal(lambda: tmp_path / "t.jsonl").append({**FIGURES, "tokens": -1}, [])  # not a valid record
    assert not (tmp_path / "t.jsonl").exists()


def test_a_session_that_runs_unsaved_keeps_no_tasks(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "s1")
    TaskJournal(lambda: path, lambda: False).append(FIGURES, [])
    assert not path.exists()


def test_an_external_task_keeps_its_unknown_figures_unknown(tmp_path: Path) -> None:
    path = journal_path(tmp_path, "s1")
    known = ("tokens", "contextTokens", "contextWindow", "contextPercent", "cost")
    unknown = {**{k: v for k, v in FIGURES.items() if k not in known}, "agent": "ext", "external": True}
    TaskJournal(lambda: path).append(unknown, [])
    TaskJournal(lambda: path).append({**FIGURES, "agent": "ext", "external": True}, [])
    quiet, told = TaskJournal(lambda: path).previous()
    assert quiet.figures() == unknown  # nothing made up on the way back: absent stays absent, never 0
    assert task_lines(quiet.figures()) == [
        "- `ext` (external) — Read notes: completed; tokens not reported; context not reported; cost unknown "
        "(local/big)"
    ]
    assert task_lines(told.figures()) == [
        "- `ext` (external) — Read notes: completed; 970 tokens; ctx 0.9% (940 / 100,000); $0.0010 (local/big)"
    ]
