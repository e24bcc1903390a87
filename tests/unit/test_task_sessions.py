"""session/tasks/stored.py: a task's session id parsed strictly, its journal line found safely, its history rebuilt."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.session.store import entries as en
from ama_acp.session.store.session_store import is_valid_session_id
from ama_acp.session.store.task_journal import StoredTask
from ama_acp.session.tasks.stored import TaskSessionId, find_task, history, meter, parse_task_session_id, refuse
from tests.support.hypothesis_profiles import examples

PARENT = "ses_01a2286878d46e614eadbd86"


@settings(max_examples=examples(400))
@given(st.text(alphabet=st.sampled_from("ses_01aZ.-/\\task-09 \x00é"), max_size=60) | st.text(max_size=60))
def test_a_task_id_is_parsed_only_in_its_exact_form(text: str) -> None:
    task_id = parse_task_session_id(text)
    if task_id is not None:
        assert is_valid_session_id(task_id.parent) and task_id.number >= 1
        assert task_id.session_id == text  # nothing else (no `/`, no leading zero, no extra part) parses
        assert "/" not in text and "\\" not in text and ".." not in text


@settings(max_examples=examples(200))
@given(st.from_regex(r"[A-Za-z0-9_-]{1,128}", fullmatch=True), st.integers(min_value=1, max_value=999_999_999))
def test_every_parent_and_positive_number_round_trips(parent: str, number: int) -> None:
    assert parse_task_session_id(f"{parent}.task-{number}") == TaskSessionId(parent, number)
    assert refuse(f"{parent}.task-{number}") is not None and refuse(parent) is None


def test_odd_ids_are_not_task_ids() -> None:
    for bad in (f"{PARENT}.task-0", f"{PARENT}.task-01", f"{PARENT}.task-", f"../{PARENT}.task-1", None, 7):
        assert parse_task_session_id(bad) is None, bad


def _task(n: int, messages: list[dict[str, object]], **extra: object) -> dict[str, object]:
    return {
        "id": f"t{n}",
        "agent": "explore",
        "description": "Read",
        "model": "m",
        "status": "completed",
        "requests": 1,
        "tokens": 10,
        "contextTokens": 10,
        "sessionId": f"{PARENT}.task-{n}",
        "messages": messages,
        **extra,
    }


def test_the_journal_line_is_found_and_damaged_or_linked_journals_are_not_trusted(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    path = tasks / f"{PARENT}.jsonl"
    lines = [
        json.dumps(_task(1, [])),
        '{"id": "t2", "sessionId": "' + f"{PARENT}.task-2" + '", "tokens": -1',  # cut short: skipped
        json.dumps(_task(2, [], contextWindow=1000)),
    ]
    path.write_text("\n".join(lines) + "\n")
    found = find_task(tmp_path, TaskSessionId(PARENT, 2))
    assert found is not None and found.context_window == 1000
    assert find_task(tmp_path, TaskSessionId(PARENT, 3)) is None
    assert find_task(tmp_path, TaskSessionId("ses_other", 1)) is None  # no file
    path.rename(tasks / "real.jsonl")
    os.symlink(tasks / "real.jsonl", path)
    assert find_task(tmp_path, TaskSessionId(PARENT, 2)) is None  # a link is not followed


def test_history_pairs_each_call_with_its_result_and_ends_an_unanswered_one_failed() -> None:
    messages: list[Message] = [
        UserMessage(content=[TextPart("look")]),
        AssistantMessage(
            content=[TextPart("ok"), ToolCallPart("a", "nope", '{"x": 1}'), ToolCallPart("b", "nope", "not json")],
            stop="tool_use",
        ),
        ToolResultMessage(tool_call_id="a", name="nope", content=[TextPart("done")], is_error=True),
    ]
    task = StoredTask(
        id="t1", agent="general", description="", model="m", status="cancelled", requests=1,
        session_id=f"{PARENT}.task-1", messages=messages,
    )  # fmt: skip
    header = en.Header(session_id=PARENT, cwd="/w", created_at="2026-01-01T00:00:00.000Z", ama_version="0")
    updates = history(task, header, lambda name: None, "/w")
    kinds = [(type(u).__name__, getattr(u, "status", None)) for u in updates]
    assert kinds == [
        ("UserMessageChunk", None),
        ("AgentMessageChunk", None),
        ("ToolCall", "pending"),
        ("ToolCallUpdate", "failed"),  # answered with an error
        ("ToolCall", "pending"),
        ("ToolCallUpdate", "failed"),  # never answered
    ]
    assert meter(task) is None  # no window stored: no figure invented
