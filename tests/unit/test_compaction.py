"""Compaction: the mechanical inventory, the recent messages kept (whole tool-call pairs, within
keep_tokens), the handoff message, and `/compact` on a real in-process session (context replaced, a
CompactionEntry persisted, the same context after a reload)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.agent.compaction import context_message, recent_messages, reread_files
from ama_acp.agent.inventory import (
    COMMANDS,
    ERRORS,
    FILES,
    LIST_CAPS,
    SEARCHES,
    SUBAGENTS,
    TOOLS,
    USER_MESSAGE_CLIP,
    USERS,
    build_inventory,
    model_copy,
)
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.session.store import entries as en
from ama_acp.session.store.session_store import read_session
from tests.support.conversation import first_text, paired_everywhere
from tests.support.hypothesis_profiles import examples
from tests.support.inprocess import make_manager, prompt, reload, workspace


def user(text: str) -> UserMessage:
    return UserMessage([TextPart(text)])


def asks(*calls: tuple[str, str, dict[str, object] | str]) -> AssistantMessage:
    parts = [ToolCallPart(cid, name, args if isinstance(args, str) else json.dumps(args)) for cid, name, args in calls]
    return AssistantMessage(content=[TextPart("working"), *parts], stop="tool_use")


def result(cid: str, name: str, text: str = "ok", error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(cid, name, [TextPart(text)], is_error=error)


def section(inventory: str, title: str) -> list[str]:
    """The lines of one `## title (N)` section (N: its entry count; absent in an inventory from before it)."""
    lines = inventory.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(rf"## {re.escape(title)}( \(\d+\))?", line)) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line]


# --- build_inventory --------------------------------------------------------------------------------------


def test_the_inventory_lists_requests_files_tools_commands_searches_and_every_error():
    messages: list[Message] = [
        user("Fix the failing test in calc.py"),
        asks(
            ("c1", "read_file", {"path": "calc.py"}),
            ("c2", "edit_file", {"path": "calc.py", "edits": []}),
            ("c3", "read_file", {"path": "README.md"}),
        ),
        result("c1", "read_file"),
        result("c2", "edit_file", "old_text not found", error=True),
        result("c3", "read_file"),
        asks(
            ("c4", "run_command", {"command": "pytest -q"}),
            ("c5", "run_command", {"command": "make lint"}),
            ("c6", "search", {"pattern": "def add", "path": "src"}),
            ("c7", "find_files", {"pattern": "*.py"}),
        ),
        result("c4", "run_command"),
        result("c5", "run_command", "exit 2\nlint: E501", error=True),
        result("c6", "search"),
        result("c7", "find_files"),
        AssistantMessage([TextPart("Done.")]),
        user("  "),  # blank: not a request
        user("Now run it again"),
    ]
    inventory = build_inventory(messages)
    assert inventory.startswith("# Inventory (mechanical)\n")
    assert section(inventory, USERS) == ["- Fix the failing test in calc.py", "- Now run it again"]
    assert section(inventory, FILES) == ["- calc.py: read_file×1, edit_file×1", "- README.md: read_file×1"]
    assert section(inventory, TOOLS) == [
        "- read_file×2",
        "- run_command×2",
        "- edit_file×1",
        "- search×1",
        "- find_files×1",
    ]
    assert section(inventory, COMMANDS) == ["- ✓ `pytest -q`", "- ✗ `make lint`"]
    assert section(inventory, SEARCHES) == ["- search `def add` in `src`", "- find_files `*.py` in `.`"]
    # every tool error, a failed command with its command and the first part of its output
    assert section(inventory, ERRORS) == [
        "- edit_file: old_text not found",
        "- run_command `make lint`: exit 2 lint: E501",
    ]


def test_headings_count_their_entries_and_commands_and_patterns_are_clipped_as_the_seed():
    """Seed 003_: `## Files touched (N)` headings; a command clipped at 400 characters, a search pattern at 200."""
    long_command, long_pattern = "echo " + "x" * 600, "p" * 450
    messages: list[Message] = [
        user("go"),
        asks(
            ("c1", "run_command", {"command": long_command}),
            ("c2", "search", {"pattern": long_pattern}),
            ("c3", "read_file", {"path": "a.py"}),
            ("c4", "read_file", {"path": "b.py"}),
        ),
        result("c1", "run_command"),
        result("c2", "search"),
        result("c3", "read_file"),
        result("c4", "read_file"),
    ]
    inventory = build_inventory(messages)
    for heading in (f"## {USERS} (1)", f"## {FILES} (2)", f"## {TOOLS} (3)", f"## {COMMANDS} (1)", f"## {ERRORS} (0)"):
        assert heading in inventory.splitlines()
    assert f"## {SUBAGENTS}" not in inventory  # no delegation: no list
    (command,) = section(inventory, COMMANDS)
    assert command == f"- ✓ `{long_command[:400]} […205 characters left out]`"
    (search,) = section(inventory, SEARCHES)
    assert search == f"- search `{long_pattern[:200]} […250 characters left out]` in `.`"
    copy = model_copy(inventory, 10**6)
    assert f"## {FILES} (2)" in copy.splitlines()  # the model's copy keeps the counts


def test_the_subagents_launched_list_names_each_task_with_its_agent_and_outcome():
    messages: list[Message] = [
        user("go"),
        asks(
            ("t1", "task", {"prompt": "find the bug", "description": "Find the bug", "agent": "explore"}),
            ("t2", "task", {"prompt": "write\nthe   docs"}),
            ("t3", "task", {"prompt": 7, "agent": ["x"]}),  # hostile arguments: still one entry
        ),
        result("t1", "task"),
        result("t2", "task", "failed", error=True),
        result("t3", "task"),
    ]
    inventory = build_inventory(messages)
    assert section(inventory, SUBAGENTS) == [
        "- ✓ `explore`: Find the bug",
        "- ✗ `general`: write the docs",
        "- ✓ `general`: ",
    ]
    assert f"## {SUBAGENTS} (3)" in inventory.splitlines()


def test_the_inventory_header_names_session_cwd_model_figure_time_and_the_previous_files():
    from ama_acp.agent.inventory import SESSION, Header

    header = Header("s1", "/w", "local/m", "17,020 / 32,768 tokens (usage)", "2025-01-01T00:00:00.000Z", "/h/1", "/i/1")
    lines = section(build_inventory([], header), SESSION)
    assert lines == [
        "- session: s1",
        "- cwd: /w",
        "- model: local/m",
        "- context at compaction: 17,020 / 32,768 tokens (usage)",
        "- time: 2025-01-01T00:00:00.000Z",
        "- previous handoff: /h/1",
        "- previous inventory: /i/1",
    ]
    first = section(build_inventory([], Header("s1", "/w", "m", "1 tokens (estimate)", "t")), SESSION)
    assert not any("previous" in line for line in first)  # the first compaction has none


def test_a_file_touched_again_moves_to_the_end_of_the_list():
    messages: list[Message] = [
        asks(
            ("c1", "read_file", {"path": "a"}), ("c2", "read_file", {"path": "b"}), ("c3", "edit_file", {"path": "a"})
        ),
        result("c1", "read_file"),
        result("c2", "read_file"),
        result("c3", "edit_file"),
    ]
    assert section(build_inventory(messages), FILES) == ["- b: read_file×1", "- a: read_file×1, edit_file×1"]


def test_an_empty_conversation_has_every_section_saying_none():
    inventory = build_inventory([])
    for title in (USERS, FILES, TOOLS, COMMANDS, SEARCHES, ERRORS):
        assert section(inventory, title) == ["- (none)"]


def test_every_user_message_is_kept_each_clipped_with_a_note_and_the_file_keeps_every_list_entry():
    # Issue 29: each list has its own cap (seed 003), no longer the newest 30 of every list.
    cap = LIST_CAPS[COMMANDS]
    long = "x" * (USER_MESSAGE_CLIP + 500)
    messages: list[Message] = [user(long)]
    for i in range(cap + 5):
        messages += [user(f"request {i}"), asks((f"c{i}", "run_command", {"command": f"cmd {i}"}))]
        messages.append(result(f"c{i}", "run_command"))
    inventory = build_inventory(messages)
    requests = section(inventory, USERS)
    assert requests[0] == "- " + "x" * USER_MESSAGE_CLIP + " […500 characters left out]"
    assert len(requests) == cap + 6  # the file keeps every entry
    assert section(inventory, COMMANDS) == [f"- ✓ `cmd {i}`" for i in range(cap + 5)]
    # the model's copy keeps the newest entries of each list, up to its cap, and says how many it left out
    copy = model_copy(inventory, 10**7)
    commands = section(copy, COMMANDS)
    assert commands[0] == "- (5 earlier entries left out; inventory.md has them all)"
    assert commands[1:] == [f"- ✓ `cmd {i}`" for i in range(5, cap + 5)]
    assert len(section(copy, USERS)) == cap + 6  # under the person's messages' own cap (500): all of them


def test_a_multi_line_user_message_stays_one_entry():
    inventory = build_inventory([user("first line\n- looks like an item\n## and a heading")])
    copy = model_copy(inventory, 10**6)
    assert section(copy, USERS) == ["- first line", "  - looks like an item", "  ## and a heading"]


def test_results_without_a_known_call_or_with_bad_arguments_still_count_without_a_path():
    messages: list[Message] = [
        user("go"),
        asks(("c1", "read_file", "{not json")),
        result("c1", "read_file", "bad arguments", error=True),
        result("orphan", "write_file", "denied", error=True),
        asks(("c2", "read_file", {"path": 7})),  # a path that is not a string names no file
        result("c2", "read_file"),
    ]
    inventory = build_inventory(messages)
    assert section(inventory, FILES) == ["- (none)"]
    assert section(inventory, ERRORS) == ["- read_file: bad arguments", "- write_file: denied"]


def test_tool_error_texts_are_clipped_to_300_characters():
    messages: list[Message] = [asks(("c", "read_file", {})), result("c", "read_file", "e" * 1000, error=True)]
    (line,) = section(build_inventory(messages), ERRORS)
    assert line == "- read_file: " + "e" * 300


# --- context_message ------------------------------------------------------------------------------------


def test_the_context_message_names_the_files_to_reread_and_where_the_full_texts_are():
    handoff = "## 1. Goal\nship it\n## 8. The few files to re-read first\n- `src/calc.py`\n- `tests/test_calc.py`\n"
    message = context_message(
        2,
        handoff,
        "# Inventory (mechanical)\n",
        handoff_path="/d/s/compaction-2/handoff.md",
        inventory_path="/d/s/compaction-2/inventory.md",
        handoff_chars=None,
        inventory_chars=None,
    )
    assert isinstance(message, UserMessage) and len(message.content) == 1
    body = message.content[0]
    assert isinstance(body, TextPart)
    assert body.text.startswith("This conversation was compacted (compaction 2).")
    assert "Re-read these files before you continue: `src/calc.py`, `tests/test_calc.py`." in body.text
    assert "- handoff: /d/s/compaction-2/handoff.md\n- inventory: /d/s/compaction-2/inventory.md" in body.text
    assert "read them if something you need is missing" in body.text
    assert body.text.index("## 1. Goal\nship it") < body.text.index("# Inventory (mechanical)")


def test_without_a_section_8_the_most_recently_touched_files_are_named():
    messages: list[Message] = [
        asks(("c1", "read_file", {"path": "old.py"}), ("c2", "edit_file", {"path": "new.py"})),
        result("c1", "read_file"),
        result("c2", "edit_file"),
    ]
    inventory = build_inventory(messages)
    message = context_message(
        1, "no sections", inventory, handoff_path="h", inventory_path="i", handoff_chars=None, inventory_chars=None
    )
    assert "Re-read these files before you continue: `new.py`, `old.py`." in first_text(message)


# --- recent_messages --------------------------------------------------------------------------------------


def size(message: Message) -> int:
    """A deterministic stand-in for the token estimate: one token per 10 bytes of the stored form."""
    return len(msgspec.json.encode(message)) // 10 + 1


def test_recent_messages_keep_whole_turns_from_a_user_message_within_keep_tokens():
    turn1: list[Message] = [
        user("a" * 400),
        asks(("c1", "read_file", {"path": "x"})),
        result("c1", "read_file", "r" * 400),
    ]
    turn2: list[Message] = [user("second"), asks(("c2", "read_file", {"path": "y"})), result("c2", "read_file")]
    messages = turn1 + turn2
    budget = sum(size(m) for m in turn2)
    assert recent_messages(messages, budget, size) == turn2
    assert recent_messages(messages, budget - 1, size) == []  # the last turn does not fit whole: nothing kept
    assert recent_messages(messages, 10**9, size) == messages


def test_recent_messages_never_start_at_a_tool_result_even_when_its_result_would_fit():
    messages: list[Message] = [user("go"), asks(("c1", "t", {})), result("c1", "t")]
    just_the_tail = size(messages[-1]) + size(messages[-2])
    assert recent_messages(messages, just_the_tail, size) == []


TURN = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 600)), max_size=3)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    n = 0
    for rounds in draw(st.lists(TURN, max_size=6)):
        messages.append(user("u" * draw(st.integers(0, 300))))
        for ncalls, body in rounds:
            ids = [f"c{n + i}" for i in range(ncalls)]
            n += ncalls
            calls: list[tuple[str, str, dict[str, object] | str]] = [(cid, "read_file", {"path": cid}) for cid in ids]
            messages.append(asks(*calls))
            messages += [result(cid, "read_file", "r" * body) for cid in ids]
        messages.append(AssistantMessage([TextPart("done")]))
    return messages


@settings(max_examples=examples(200), deadline=None)
@given(messages=conversations(), keep=st.integers(0, 1000))
def test_property_recent_messages_are_the_longest_whole_turn_suffix_within_keep_tokens(messages, keep):
    kept = recent_messages(messages, keep, size)
    start = len(messages) - len(kept)
    assert messages[start:] == kept
    assert kept == [] or isinstance(kept[0], UserMessage)
    assert sum(size(m) for m in kept) <= keep
    assert paired_everywhere(kept)  # no result without its call, no call without its result
    for j, m in enumerate(messages[:start]):  # no earlier turn start would still have fit
        if isinstance(m, UserMessage):
            assert sum(size(x) for x in messages[j:]) > keep


# --- /compact on a real session ---------------------------------------------------------------------------

HANDOFF = "## Goal and current state\nThe add() bug is fixed; tests pass."


def test_slash_compact_replaces_the_context_persists_the_entry_and_a_reload_gives_the_same_context(tmp_path):
    ws = workspace(tmp_path)
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    replies: list[dict[str, Any]] = [
        {"text": "Reading.", "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "calc.py"}}]},
        {"text": "It subtracts. " + "Explained at length. " * 60},
        {"text": "Sure, short answer."},
        {"text": HANDOFF},  # the compaction request's reply
    ]
    # keep_tokens: the short last turn fits, the long first one does not (and is big enough that replacing it
    # frees more than the 20 % margin: a smaller one would be refused, see the refusal tests)
    manager, peer = make_manager(tmp_path, replies, keep_tokens=200)

    async def main() -> tuple[str, list[Message], list[Message]]:
        session = manager.new_session(str(ws), None, [])
        assert await prompt(session, "Why do the tests of calc.py fail? " + "context " * 2000) == "end_turn"
        assert await prompt(session, "Thanks") == "end_turn"
        before = list(session.conversation.messages)
        assert await prompt(session, "/compact keep the test commands") == "end_turn"
        after = list(session.conversation.messages)
        await manager.close(session.id)
        return session.id, before, after

    sid, before, after = anyio.run(main)
    assert len(before) == 6  # user, call, result, answer; user, answer
    assert after[1:] == before[-2:]  # the last whole turn is kept as it was
    handoff = after[0]
    assert isinstance(handoff, UserMessage) and HANDOFF in first_text(handoff)
    assert "- calc.py: read_file×1" in first_text(handoff)  # the inventory

    loaded = read_session(manager.store.path(sid))
    (entry,) = [e for e in loaded.entries if isinstance(e, en.CompactionEntry)]
    assert entry.number == 1 and entry.kept_from_index == 4
    folder = manager.store.handoff_dir(sid)
    assert (folder / entry.summary_path).read_text(encoding="utf-8") == HANDOFF
    assert entry.inventory_path is not None
    assert "# Inventory (mechanical)" in (folder / entry.inventory_path).read_text(encoding="utf-8")
    summary = [u for u in peer.updates if u["sessionUpdate"] == "agent_message_chunk" and "Compacted" in str(u)]
    assert summary and "2 recent messages kept" in summary[0]["content"]["text"]

    async def again() -> list[Message]:
        manager2, _ = make_manager(tmp_path, replies, keep_tokens=200)
        return list((await reload(manager2, sid, ws)).conversation.messages)

    assert anyio.run(again) == after


def test_slash_compact_whose_model_fails_changes_nothing_and_says_so(tmp_path):
    ws = workspace(tmp_path)
    replies: list[dict[str, Any]] = [{"text": "hello"}, {"failure": {"kind": "server", "message": "overloaded"}}]
    manager, peer = make_manager(tmp_path, replies)

    async def main() -> tuple[list[Message], list[Message], str]:
        session = manager.new_session(str(ws), None, [])
        await prompt(session, "hi " + "long context " * 1000)  # enough that a compaction would help
        before = list(session.conversation.messages)
        await prompt(session, "/compact")
        after = list(session.conversation.messages)
        await manager.close(session.id)
        return before, after, session.id

    before, after, sid = anyio.run(main)
    assert after == before
    assert "Compaction failed (overloaded); the conversation is unchanged" in peer.agent_text()
    loaded = read_session(manager.store.path(sid))
    assert not any(isinstance(e, en.CompactionEntry) for e in loaded.entries)


@pytest.mark.parametrize(
    "heading", ["8. Files", "## 8. Files", "  ### 8) Files", "**8. Files**", "** 8: Files", "\t8 Files"]
)
def test_the_reread_section_is_found_under_each_heading_style(heading: str) -> None:
    handoff = f"## 1. Goal\nship it\n{heading}\n- `src/calc.py`\n## 9. More\n- `not/this.py`\n"
    assert reread_files(handoff, "") == ["src/calc.py"]


def test_a_hostile_handoff_line_is_scanned_in_linear_time() -> None:
    # A model may write anything: 200,000 spaces (or '#'s, or '*'s) on one line. The quadratic pattern this
    # replaced took minutes on such a line; a linear one takes milliseconds.
    for filler in (" ", "#", "*", " \t"):
        line = filler * 200_000
        started = time.perf_counter()
        assert reread_files(f"{line}\n8. files\n- `a.py`\n## 9. more\n{line}x\n", "") == ["a.py"]
        assert time.perf_counter() - started < 2.0, filler


@pytest.mark.parametrize("filled", [False, True])
def test_a_hold_is_released_when_the_context_falls_under_prune_at_and_only_then(tmp_path: Path, filled: bool) -> None:
    from ama_acp.config import ModelEntry

    ws = workspace(tmp_path)
    # window 8,192: autoCompactAt 4,096, pruneAt 2,867; the prefix alone is under pruneAt, 6,000 more chars are not
    model = ModelEntry(id="scripted/test", context_window=8_192, name="Test")
    manager, _ = make_manager(tmp_path, [], models=[model])

    async def main() -> tuple[bool, int | None, list[en.Entry]]:
        session = manager.new_session(str(ws), None, [])
        if filled:
            await session.host.append(user("y " * 3_000))  # ~1,500 tokens: over pruneAt, under autoCompactAt
        session.compactor.hold(True, "a compaction failed")
        assert session.ctx.figures().auto_compact_at is None  # held: the thresholds are hidden (U13)
        await session.compactor.before_request()
        held, at = session.ctx.meter.compaction_held, session.ctx.figures().auto_compact_at
        await manager.close(session.id)
        return held, at, read_session(manager.store.path(session.id)).entries

    held, at, entries = anyio.run(main)
    holds = [e.held for e in entries if isinstance(e, en.CompactionHoldEntry)]
    if filled:
        assert held and at is None and holds == [True]  # still at/over pruneAt: the hold stands
    else:
        assert not held and at == 4_096 and holds == [True, False]  # released, and the release persisted


# --- handoff fidelity: slash commands, the git state, the language ---------------------------------------


def test_the_inventory_lists_the_slash_commands_one_line_each_clipped():
    from ama_acp.agent.inventory import SLASH, SLASH_CLIP

    long = "/compact " + "focus " * 200
    inventory = build_inventory([user("hi")], slash_commands=["/context", "/model  local/x\nnext", "  ", long])
    items = section(inventory, SLASH)
    assert items[:2] == ["- `/context`", "- `/model local/x next`"]
    assert len(items) == 3 and items[2].startswith("- `/compact focus") and "characters left out]`" in items[2]
    assert len(items[2]) < SLASH_CLIP + 60
    assert section(build_inventory([]), SLASH) == ["- (none)"]


def test_the_models_copy_keeps_the_newest_50_slash_commands_and_says_how_many_were_left_out():
    from ama_acp.agent.inventory import SLASH

    full = build_inventory([], slash_commands=[f"/model m{i}" for i in range(55)])
    assert len(section(full, SLASH)) == 55  # the file keeps them all
    copy = section(model_copy(full, 100_000), SLASH)
    assert copy[0] == "- (5 earlier entries left out; inventory.md has them all)"
    assert copy[1:] == [f"- `/model m{i}`" for i in range(5, 55)] and len(copy) == LIST_CAPS[SLASH] + 1


def test_the_handoff_prompt_asks_for_the_conversations_language_and_carries_the_git_state():
    from ama_acp.agent.compaction import handoff_prompt, handoff_request
    from ama_acp.providers import base as pb

    prompt_text = handoff_prompt("# Inventory (mechanical)", 4000, "", "# Git state\n- branch feat")
    assert "Write the handoff in the language of the conversation (the language the user writes in)" in prompt_text
    assert prompt_text.index("# Git state") < prompt_text.index("# Inventory (mechanical)")
    assert "Git state" not in handoff_prompt("# Inventory (mechanical)", 4000)

    base = pb.ModelRequest(model="m", system="s", messages=[user("x " * 4000)], tools=[], max_output=None)
    git_text = "# Git state of the workspace (at compaction)\n- branch feat\n" + "    M f.txt\n" * 400
    sized = handoff_request(
        base,
        "# Inventory (mechanical)\n" + "- entry\n" * 4000,
        1000,
        instructions="",
        window=8000,
        prefix_tokens=100,
        estimate_text=lambda t: len(t) // 4,
        estimate=lambda m: len(first_text(m)) // 4,
        git_state=git_text,
    )
    last = first_text(sized.messages[-1])
    assert git_text in last and sized.tools == []
    # The git state counts against the window: the whole request stays under it.
    assert sum(len(first_text(m)) // 4 for m in sized.messages) + 100 + 1000 // 4 <= 8000


def test_slash_commands_of_a_saved_and_of_an_unsaved_session_reach_the_inventory(tmp_path):
    replies: list[dict[str, Any]] = [{"text": "Long answer. " * 300}, {"text": "ok"}, {"text": HANDOFF}]
    manager, _ = make_manager(tmp_path, replies, keep_tokens=50)
    ws = workspace(tmp_path)

    async def main(unsaved: bool) -> str:
        session = manager.new_session(str(ws), None, [])
        if unsaved:
            writer = session.journal.writer
            assert writer is not None
            writer.close()
            session.journal.writer = None
        assert await prompt(session, "/context") == "end_turn"
        assert await prompt(session, "explain " * 300) == "end_turn"
        assert await prompt(session, "/model nonexistent/model") == "end_turn"
        assert await prompt(session, "thanks") == "end_turn"
        assert await prompt(session, "/compact keep it short") == "end_turn"
        await manager.close(session.id)
        folder = manager.store.handoff_dir(session.id) / "compaction-1"
        return (folder / "inventory.md").read_text(encoding="utf-8")

    from ama_acp.agent.inventory import SLASH

    expected = ["- `/context`", "- `/model nonexistent/model`", "- `/compact keep it short`"]
    assert section(anyio.run(main, False), SLASH) == expected
    manager, _ = make_manager(tmp_path, replies, keep_tokens=50)
    assert section(anyio.run(main, True), SLASH) == expected
