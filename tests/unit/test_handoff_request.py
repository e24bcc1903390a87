"""The handoff request and the inventory the model reads, as seed 003 has them (issue 29 point 3;
docs/sessions.md "Compaction"): nine sections with the environment and "anything else", a reason beside every
file to re-read, the previous handoff carried over, completeness over brevity with a budget only where the
window forces one, the MCP servers named, and each inventory list capped on its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.agent.compaction import (
    CHARS_PER_TOKEN,
    HANDOFF_CAP,
    MIN_ROOM_TOKENS,
    Plan,
    budgets,
    handoff_prompt,
    handoff_request,
    plan_compaction,
    reread_files,
    wrapper_text,
)
from ama_acp.agent.inventory import (
    COMMANDS,
    ERRORS,
    FILES,
    LIST_CAPS,
    SEARCHES,
    SLASH,
    SUBAGENTS,
    TOOLS,
    USERS,
    build_inventory,
    model_copy,
    sections,
)
from ama_acp.context.estimate import HeuristicEstimator
from ama_acp.context.meter import effective_reserve
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.providers import base as pb
from tests.support.conversation import first_text
from tests.support.hypothesis_profiles import examples

EST = HeuristicEstimator()
INVENTORY = "# Inventory (mechanical)\n\n## Tool errors\n- (none)\n"


def numbered(prompt: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^(\d)\. (.+)$", prompt, re.MULTILINE)]


# --- the request's words ------------------------------------------------------------------------------------


def test_nine_sections_with_the_environment_a_reason_per_file_and_anything_else() -> None:
    prompt = handoff_prompt(INVENTORY, HANDOFF_CAP)
    items = numbered(prompt)
    assert [n for n, _ in items] == list(range(1, 10)), items
    sections_text = dict(items)
    assert sections_text[5].startswith("Environment: commands that work (build, test, run), the MCP servers in use")
    assert "where\n   credentials live (the names of environment variables and files, never their values)" in prompt
    assert (
        sections_text[8]
        == "The files to re-read first: one a line, the path in backticks, then the reason to re-read it"
    )
    assert sections_text[9].startswith("Anything else")
    # Seed 003_'s sub-items: what changed and why, the skills, risks, failing tests.
    assert sections_text[4].endswith("and what changed in it and why")
    assert "never their values); the skills loaded" in prompt
    assert sections_text[7].startswith("Open questions, risks, failing tests, and verbatim error messages")


def test_completeness_over_brevity_and_no_budget_where_the_window_does_not_force_one() -> None:
    free = handoff_prompt(INVENTORY, HANDOFF_CAP)
    assert "Be complete rather than brief" in free
    assert not re.search(r"\d,\d{3} characters", free) and "under about" not in free
    forced = handoff_prompt(INVENTORY, 6_000)
    assert "Be complete rather than brief, within one limit: this model's context window leaves room" in forced
    assert "about 6,000 characters of the handoff" in forced


def test_the_previous_handoff_is_carried_over_only_when_there_was_one() -> None:
    first = handoff_prompt(INVENTORY, HANDOFF_CAP)
    assert "compacted before" not in first
    second = handoff_prompt(INVENTORY, HANDOFF_CAP, previous="/data/s/compaction-1/handoff.md")
    assert "the previous handoff opens it (its full text: /data/s/compaction-1/handoff.md)" in second
    assert "Carry over everything it says that still holds" in second


def test_the_mcp_servers_of_the_session_are_named_or_their_absence_said() -> None:
    assert "No MCP servers are connected to this session." in handoff_prompt(INVENTORY, HANDOFF_CAP)
    named = handoff_prompt(INVENTORY, HANDOFF_CAP, mcp_servers=["github", "my\nfs"])
    assert "MCP servers connected to this session: `github`, `my fs`." in named  # one line per server name
    assert "No MCP servers" not in named


def test_a_files_reason_does_not_become_a_file_to_reread() -> None:
    handoff = (
        "## 8. The files to re-read first\n"
        "- `src/calc.py` — the parser; `config.load` changed its signature\n"
        "- tests/test_calc.py: the failing case\n"
        "## 9. Anything else\n- `other.py`\n"
    )
    assert reread_files(handoff, "") == ["src/calc.py", "tests/test_calc.py"]


# --- the request's size --------------------------------------------------------------------------------------


def turn(i: int, chars: int) -> list[Message]:
    call = ToolCallPart(f"c{i}", "run_command", json.dumps({"command": f"step {i}"}))
    return [
        UserMessage([TextPart(f"step {i} " + "u" * (chars // 4))]),
        AssistantMessage([TextPart("running"), call], stop="tool_use"),
        ToolResultMessage(f"c{i}", "run_command", [TextPart("r" * (chars // 2))]),
        AssistantMessage([TextPart("done " + "a" * (chars // 4))]),
    ]


def previous_handoff(chars: int) -> UserMessage:
    return UserMessage(
        [TextPart("This conversation was compacted (compaction 1). PREVIOUS " + "p" * chars)], origin="ama"
    )


def request_for(messages: list[Message], window: int, carried: int, handoff_chars: int = 2_000) -> pb.ModelRequest:
    return handoff_request(
        pb.ModelRequest(model="m", system="s", messages=messages),
        build_inventory(messages),
        handoff_chars,
        instructions="",
        window=window,
        prefix_tokens=500,
        estimate_text=EST.text,
        estimate=EST.message,
        previous="/d/compaction-1/handoff.md",
        carried=carried,
    )


def test_the_previous_handoff_stays_in_a_request_that_must_leave_out_the_oldest_turns() -> None:
    messages: list[Message] = [previous_handoff(4_000)]
    for i in range(30):
        messages += turn(i, 4_000)
    request = request_for(messages, 16_384, carried=1)
    assert request.messages[0] is messages[0]  # kept, though older than every turn
    assert request.messages[1] is not messages[1]  # the oldest turns went
    assert isinstance(request.messages[1], UserMessage)  # whole turns: no result without its call
    sent = 500 + sum(EST.message(m) for m in request.messages) + 2_000 // CHARS_PER_TOKEN
    assert sent <= 16_384
    # Without `carried` the same trim drops it (the behaviour before issue 29).
    assert request_for(messages, 16_384, carried=0).messages[0] is not messages[0]


def test_a_previous_handoff_too_big_for_the_window_goes_rather_than_crowd_out_the_newest_work() -> None:
    messages: list[Message] = [previous_handoff(40_000)]
    for i in range(10):
        messages += turn(i, 4_000)
    request = request_for(messages, 16_384, carried=1)
    assert request.messages[0] is not messages[0]
    assert request.messages[-2] is messages[-1]  # the newest turn is there, before the prompt


def test_the_inventory_in_the_request_has_its_lists_capped() -> None:
    messages: list[Message] = []
    for i in range(LIST_CAPS[COMMANDS] + 7):
        call = ToolCallPart(f"c{i}", "run_command", json.dumps({"command": f"cmd {i}"}))
        messages += [
            AssistantMessage([call], stop="tool_use"),
            ToolResultMessage(f"c{i}", "run_command", [TextPart("ok")]),
        ]
    request = request_for(messages, 1_000_000, carried=0)
    prompt = first_text(request.messages[-1])
    assert "- (7 earlier entries left out; inventory.md has them all)" in prompt
    assert "`cmd 6`" not in prompt and "`cmd 7`" in prompt


def test_a_small_window_gives_a_stated_budget_and_a_big_one_none() -> None:
    """8K: the window forces a budget and the request says so; 1M: the seed's cap, and only completeness."""
    for window, forced in ((8_192, True), (1_000_000, False)):
        auto = window - effective_reserve(window, 16_384)
        messages: list[Message] = []
        for i in range(12):
            messages += turn(i, auto * CHARS_PER_TOKEN // 12)
        used = 500 + sum(EST.message(m) for m in messages)
        plan = plan_compaction(
            messages,
            0,
            used=used,
            prefix_tokens=500,
            wrapper_tokens=EST.text(wrapper_text("/h", "/i")),
            auto_compact_at=auto,
            keep_tokens=20_000,
            estimate=EST.message,
        )
        assert isinstance(plan, Plan) and plan.room_tokens >= MIN_ROOM_TOKENS
        room = budgets(plan.room_tokens, build_inventory(messages))
        assert (room.handoff_chars < HANDOFF_CAP) is forced, (window, room)
        prompt = first_text(request_for(messages, window, 0, room.handoff_chars).messages[-1])
        assert (f"about {room.handoff_chars:,} characters" in prompt) is forced
        assert "Be complete rather than brief" in prompt


# --- the inventory's caps --------------------------------------------------------------------------------------


def test_each_list_has_the_seeds_cap() -> None:
    """Seed 003_: files 500, tools used 200, commands 300, searches 100, subagents 100, tool errors 50; the person's
    messages uncapped but for a bound on hostile input; the slash commands (ama's list) 50."""
    caps = [LIST_CAPS[t] for t in (FILES, TOOLS, COMMANDS, SEARCHES, SUBAGENTS, ERRORS, SLASH)]
    assert caps == [500, 200, 300, 100, 100, 50, 50]
    assert LIST_CAPS[USERS] >= 100_000


@settings(max_examples=examples(25), deadline=None)
@given(
    counts=st.fixed_dictionaries(
        {
            USERS: st.integers(0, 600),  # past the seed's old 500, never near the bound
            **{title: st.integers(0, LIST_CAPS[title] + 40) for title in (FILES, COMMANDS, SEARCHES, ERRORS, SLASH)},
        }
    )
)
def test_property_the_copy_keeps_the_newest_entries_of_each_list_up_to_its_cap(counts: dict[str, int]) -> None:
    messages: list[Message] = []
    for i in range(counts[USERS]):
        messages.append(UserMessage([TextPart(f"ask {i}")]))
    calls: list[tuple[str, str, dict[str, object], bool]] = []
    calls += [("read_file", "read_file", {"path": f"f{i}.py"}, False) for i in range(counts[FILES])]
    calls += [("run_command", "run_command", {"command": f"cmd {i}"}, False) for i in range(counts[COMMANDS])]
    calls += [("search", "search", {"pattern": f"p{i}"}, False) for i in range(counts[SEARCHES])]
    calls += [("write_file", "write_file", {}, True) for _ in range(counts[ERRORS])]
    for n, (_, name, args, error) in enumerate(calls):
        call = ToolCallPart(f"c{n}", name, json.dumps(args))
        messages += [
            AssistantMessage([call], stop="tool_use"),
            ToolResultMessage(f"c{n}", name, [TextPart(f"e{n}")], is_error=error),
        ]
    full = build_inventory(messages, slash_commands=[f"/model m{i}" for i in range(counts[SLASH])])
    whole = dict(sections(full))
    copy = dict(sections(model_copy(full, 10**8)))
    for title, n in counts.items():
        cap = LIST_CAPS[title]
        if n == 0:
            assert copy[title] == ["- (none)"]
        elif n <= cap:
            assert copy[title] == whole[title]
        else:
            assert copy[title] == [
                f"- ({n - cap} earlier entries left out; inventory.md has them all)",
                *whole[title][-cap:],
            ]


# --- a load rebuilds the copy with the caps the compaction used ------------------------------------------------


def test_a_load_rebuilds_the_copy_with_the_stored_caps_and_an_older_entry_with_30_a_list(tmp_path: Path) -> None:
    from ama_acp.agent.inventory import LEGACY_LIST_CAPS, stored_caps
    from ama_acp.session.conversation import Conversation
    from ama_acp.session.store import entries as en

    full = build_inventory([], slash_commands=[f"/model m{i}" for i in range(45)])
    folder = tmp_path / "compaction-1"
    folder.mkdir()
    (folder / "handoff.md").write_text("## 1. Goal\nship it\n", encoding="utf-8")
    (folder / "inventory.md").write_text(full, encoding="utf-8")

    def restored(list_caps: dict[str, object] | None = None) -> str:
        entry = en.CompactionEntry(
            number=1,
            summary_path="compaction-1/handoff.md",
            inventory_path="compaction-1/inventory.md",
            kept_from_index=0,
            handoff_chars=10_000,
            inventory_chars=50_000,
            list_caps=list_caps,
        )
        message = Conversation.restore([entry], tmp_path, "m").conversation.messages[0]
        return "".join(p.text for p in message.content if isinstance(p, TextPart))

    today = restored(list_caps=dict(LIST_CAPS))
    assert "`/model m0`" in today and "earlier entries left out" not in today  # 45 under today's 50
    older = restored()  # written before the caps were stored: the newest 30, as that ama sent it
    assert "- (15 earlier entries left out; inventory.md has them all)" in older and "`/model m14`" not in older
    assert stored_caps({"Searches": 7}) == {"Searches": 7}
    for damaged in ({"Searches": -1}, {"nope": 3}, {"Searches": True}, [1], "x"):
        assert stored_caps(damaged) is None
    assert restored(list_caps={"nope": 3}) == today  # a damaged entry gets today's caps, and still loads
    assert LEGACY_LIST_CAPS[SLASH] == 30
