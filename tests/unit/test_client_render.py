"""The editor view of session/update notifications (ama_acp.client.display.render)."""

from __future__ import annotations

import io

import pytest

from ama_acp.client.display.ansi import RED
from ama_acp.client.display.content import compact_diff, permission_details
from ama_acp.client.display.meter import format_ctx, format_percent, meter_bar
from ama_acp.client.display.render import Renderer
from ama_acp.rpc.dispatch import JSONObject, JSONValue

SID = "sess-1"


def render(*updates: JSONObject, colour: bool = False, cwd: str | None = "/work") -> str:
    out = io.StringIO()
    r = Renderer(out, colour=colour, cwd=cwd)
    for u in updates:
        r.update({"sessionId": SID, "update": u})
    r.end_stream()
    return out.getvalue()


def usage(used: int, size: int, **extra: JSONValue) -> JSONObject:
    return {"sessionUpdate": "usage_update", "used": used, "size": size, **extra}


# --- the context meter -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("percent", "text"),
    [
        (34.0, "34%"),
        (34.4, "34%"),
        (34.5, "35%"),
        (1.3, "1.3%"),
        (1.25, "1.3%"),
        (0.0, "0.0%"),
        (9.94, "9.9%"),
        (9.96, "10%"),
        (10.0, "10%"),
        (100.0, "100%"),
    ],
)
def test_percent_has_one_decimal_below_ten(percent, text):
    assert format_percent(percent) == text


def test_ctx_line_shows_percent_tokens_cost_and_source():
    line = format_ctx(
        usage(68_000, 200_000, cost={"amount": 0.0451, "currency": "USD"}, _meta={"ama": {"source": "usage"}})
    )
    assert line.startswith("ctx 34% (68,000 / 200,000) $0.0451 [source usage] ")
    bar = line.rsplit(" ", 1)[-1]
    assert len(bar) == 20 and bar.count("█") == 7
    assert "\x1b[" not in line


def test_ctx_below_ten_percent_uses_one_decimal():
    assert format_ctx(usage(2_600, 200_000)).startswith("ctx 1.3% (2,600 / 200,000)")


def test_ctx_unknown_when_nothing_reported():
    assert format_ctx(None) == "ctx ? $?"  # nothing reported: the cost is as unknown as the window


def test_ctx_without_cost_says_the_cost_is_unknown():
    line = format_ctx(usage(50_000, 100_000))
    assert line.startswith("ctx 50% (50,000 / 100,000) $? █")
    assert "source" not in line and "≈" not in line


@pytest.mark.parametrize("cost", [None, {}, {"amount": None, "currency": "USD"}, {"amount": True}, {"amount": "1"}])
def test_a_cost_that_is_not_a_number_is_unknown_not_free(cost):
    extra = {} if cost is None else {"cost": cost}
    assert " $? " in format_ctx(usage(1, 10, **extra))


def test_a_null_cost_shows_the_lower_bound_ama_measured():
    bound: JSONValue = {"ama": {"source": "usage", "costLowerBound": {"amount": 0.0123, "currency": "USD"}}}
    line = format_ctx(usage(50_000, 100_000, cost=None, _meta=bound))
    assert line.startswith("ctx 50% (50,000 / 100,000) $? (≥ $0.0123) [source usage] ")
    no_window = {"sessionUpdate": "usage_update", "used": 5, "cost": None, "_meta": bound}
    assert format_ctx(no_window) == "ctx ? (5 tokens) $? (≥ $0.0123)"
    known = format_ctx(usage(50_000, 100_000, cost={"amount": 0.02, "currency": "USD"}, _meta=bound))
    assert "$0.0200" in known and "≥" not in known  # a known cost is the figure; a stray bound is not shown


@pytest.mark.parametrize("bound", [None, "0.01", {"amount": "x"}, {"amount": float("nan"), "currency": "USD"}, [1]])
def test_a_lower_bound_that_is_not_a_cost_is_not_shown(bound):
    line = format_ctx(usage(1, 10, cost=None, _meta={"ama": {"costLowerBound": bound}}))
    assert " $? " in line and "≥" not in line


@pytest.mark.parametrize("source", ["estimate", "prefix"])
def test_estimated_figures_carry_the_approximation_mark(source):
    line = format_ctx(usage(2_500, 200_000, _meta={"ama": {"source": source}}))
    assert line.startswith(f"ctx ≈1.3% (≈2,500 / 200,000) $? [source {source}] ")


def test_a_provider_reading_carries_no_approximation_mark():
    assert "≈" not in format_ctx(usage(2_500, 200_000, _meta={"ama": {"source": "usage"}}))


@pytest.mark.parametrize(
    ("update", "text"),
    [
        ({"sessionUpdate": "usage_update", "used": 12_345}, "ctx ? (12,345 tokens) $?"),
        ({"sessionUpdate": "usage_update", "used": 12_345, "size": 0}, "ctx ? (12,345 tokens) $?"),
        ({"sessionUpdate": "usage_update", "used": "many", "size": 10}, "ctx ? $?"),
        ({"sessionUpdate": "usage_update", "used": True, "size": 10}, "ctx ? $?"),
        ({"sessionUpdate": "usage_update", "used": 5, "size": -1}, "ctx ? (5 tokens) $?"),
        (
            {"sessionUpdate": "usage_update", "used": 5, "_meta": {"ama": {"source": "estimate"}}},
            "ctx ? (≈5 tokens) $?",
        ),
        (
            {"sessionUpdate": "usage_update", "used": 5, "cost": {"amount": 0.25, "currency": "USD"}},
            "ctx ? (5 tokens) $0.2500",  # a cost the agent did report is shown even without a window
        ),
    ],
)
def test_no_window_means_an_unknown_percentage(update, text):
    assert format_ctx(update) == text


def test_other_currency_is_not_shown_as_dollars():
    assert "1.5000 EUR" in format_ctx(usage(1, 10, cost={"amount": 1.5, "currency": "EUR"}))


def test_bar_turns_red_past_80_percent_only_with_colour():
    assert RED in meter_bar(81.0, colour=True)
    assert "\x1b[" not in meter_bar(80.0, colour=True)  # not coloured at all up to 80 %
    assert RED not in meter_bar(95.0, colour=False)
    assert RED in format_ctx(usage(170_000, 200_000), colour=True)
    assert RED not in format_ctx(usage(100_000, 200_000), colour=True)


def test_bar_is_full_and_capped():
    assert meter_bar(100.0) == "█" * 20
    assert meter_bar(150.0) == "█" * 20
    assert meter_bar(0.0) == "░" * 20


def test_meter_printed_when_it_changes_and_at_turn_end():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.update({"sessionId": SID, "update": usage(2_600, 200_000)})
    r.update({"sessionId": SID, "update": usage(2_600, 200_000)})  # the same figure again: no second line
    r.update({"sessionId": SID, "update": usage(2_601, 200_000)})  # the same percentage, other tokens: a line
    r.update({"sessionId": SID, "update": usage(68_000, 200_000)})
    r.turn_end(SID, "end_turn")
    lines = out.getvalue().splitlines()
    meters = [line.split(" $")[0] for line in lines if line.startswith("ctx")]
    assert meters == [
        "ctx 1.3% (2,600 / 200,000)",
        "ctx 1.3% (2,601 / 200,000)",
        "ctx 34% (68,000 / 200,000)",
        "ctx 34% (68,000 / 200,000)",  # the turn's summary
    ]
    assert "[stop: end_turn]" in lines


def test_show_meter_at_open_prints_unknown_once_and_the_first_figure_after():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.show_meter(SID)
    r.show_meter(SID)
    r.update({"sessionId": SID, "update": usage(1, 100)})
    assert out.getvalue().splitlines() == ["ctx ? $?", "ctx 1.0% (1 / 100) $? " + "░" * 20]


def test_turn_end_without_any_usage_shows_unknown():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.update({"sessionId": "other", "update": usage(1, 2)})  # another session's figure is not this one's
    r.turn_end(SID, "end_turn")
    assert out.getvalue().splitlines()[-1] == "ctx ? $?"


# --- messages and thoughts ---------------------------------------------------------------------------


def chunk(kind: str, text: str, **extra: JSONValue) -> JSONObject:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}


def test_message_chunks_are_joined():
    text = render(chunk("agent_message_chunk", "Hello, "), chunk("agent_message_chunk", "world."))
    assert text == "Hello, world.\n"


def test_thoughts_are_prefixed_and_separate_from_the_answer():
    text = render(
        chunk("agent_thought_chunk", "I should read "),
        chunk("agent_thought_chunk", "calc.py.\nThen fix it."),
        chunk("agent_message_chunk", "Done."),
    )
    assert text.splitlines() == ["│ I should read calc.py.", "│ Then fix it.", "Done."]


def test_thoughts_are_dimmed_with_colour():
    assert "\x1b[2m" in render(chunk("agent_thought_chunk", "hmm"), colour=True)


def test_new_message_id_starts_a_new_line():
    text = render(
        chunk("agent_message_chunk", "one", messageId="m1"), chunk("agent_message_chunk", "two", messageId="m2")
    )
    assert text.splitlines() == ["one", "two"]


def test_non_text_blocks_get_placeholders():
    text = render(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "", "mimeType": "image/png"}}
    )
    assert "[image image/png]" in text


# --- tool calls ------------------------------------------------------------------------------------


def test_tool_call_status_chain():
    text = render(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Read src/app.py",
            "kind": "read",
            "status": "pending",
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"},
    )
    lines = text.splitlines()
    assert lines[0] == "▸ Read src/app.py [read] pending"
    assert lines[-1] == "▸ Read src/app.py [read] pending → in_progress → completed"


def test_tool_result_text_is_shown_once_and_clipped():
    body = "\n".join(f"line {i}" for i in range(1, 31))
    result: JSONObject = {"type": "content", "content": {"type": "text", "text": body}}
    text = render(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run tests", "kind": "execute"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "content": [result]},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "content": [result]},
    )
    assert text.count("line 1\n") == 1
    assert "line 30" in text and "more lines" in text and "line 15\n" not in text


def test_diff_is_compact_unified():
    diff: JSONObject = {
        "type": "diff",
        "path": "/work/calc.py",
        "oldText": "def add(a, b):\n    return a - b\n",
        "newText": "def add(a, b):\n    return a + b\n",
    }
    text = render(
        {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Edit calc.py", "kind": "edit"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "status": "completed", "content": [diff]},
    )
    lines = text.splitlines()
    assert "  calc.py" in lines  # shortened to the cwd
    assert "    -    return a - b" in lines and "    +    return a + b" in lines
    assert any(line.startswith("    @@") for line in lines)


def test_new_file_diff_is_marked():
    diff: JSONObject = {"type": "diff", "path": "/work/new.py", "oldText": None, "newText": "x = 1\n"}
    text = render(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t3",
            "title": "Write new.py",
            "kind": "edit",
            "status": "completed",
            "content": [diff],
        }
    )
    assert "  new.py (new file)" in text and "    +x = 1" in text


def test_compact_diff_is_bounded():
    old = "".join(f"{i}\n" for i in range(200))
    new = "".join(f"{i}!\n" for i in range(200))
    body = compact_diff("f", old, new, max_lines=10)
    assert len(body) == 11 and body[-1].startswith("…")


def test_terminal_content_shows_its_output_when_done():
    out = io.StringIO()
    r = Renderer(out, colour=False, terminal_output=lambda tid: "1 passed\n" if tid == "term-1" else None)
    term: JSONObject = {"type": "terminal", "terminalId": "term-1"}
    r.update(
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "t",
                "title": "Run",
                "kind": "execute",
                "status": "in_progress",
                "content": [term],
            },
        }
    )
    assert "1 passed" not in out.getvalue()
    r.update(
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "status": "completed",
                "content": [term],
            },
        }
    )
    assert "  [terminal term-1]" in out.getvalue() and "  │ 1 passed" in out.getvalue()


# --- plan, modes, options, info, permission --------------------------------------------------------


def test_plan_is_a_checkbox_list():
    text = render(
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read calc.py", "priority": "high", "status": "completed"},
                {"content": "Fix add()", "priority": "high", "status": "in_progress"},
                {"content": "Run the tests", "priority": "medium", "status": "pending"},
            ],
        }
    )
    assert text.splitlines() == ["Plan:", "  [x] Read calc.py", "  [~] Fix add()", "  [ ] Run the tests"]


def test_mode_change_uses_the_display_name():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.session_opened(
        SID,
        {
            "modes": {
                "currentModeId": "manual",
                "availableModes": [{"id": "manual", "name": "Manual"}, {"id": "accept_edits", "name": "Accept edits"}],
            }
        },
    )
    r.update({"sessionId": SID, "update": {"sessionUpdate": "current_mode_update", "currentModeId": "accept_edits"}})
    assert out.getvalue() == "⚙ mode: Accept edits\n"


MODEL_OPTION: JSONObject = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "scripted/demo",
    "options": [{"value": "scripted/demo", "name": "Demo script"}, {"value": "openai/gpt-4.1", "name": "GPT-4.1"}],
}


def test_config_options_show_changes_only():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.update({"sessionId": SID, "update": {"sessionUpdate": "config_option_update", "configOptions": [MODEL_OPTION]}})
    r.update({"sessionId": SID, "update": {"sessionUpdate": "config_option_update", "configOptions": [MODEL_OPTION]}})
    changed: JSONObject = {**MODEL_OPTION, "currentValue": "openai/gpt-4.1"}
    r.update({"sessionId": SID, "update": {"sessionUpdate": "config_option_update", "configOptions": [changed]}})
    assert out.getvalue().splitlines() == ["⚙ Model: Demo script (scripted/demo)", "⚙ Model: GPT-4.1 (openai/gpt-4.1)"]
    assert r.current_model(SID) == "openai/gpt-4.1"


def test_session_opened_quietly_records_the_model():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.session_opened(SID, {"sessionId": SID, "configOptions": [MODEL_OPTION]}, quiet=True)
    assert r.current_model(SID) == "scripted/demo" and out.getvalue() == ""


def test_session_title_and_commands():
    text = render(
        {"sessionUpdate": "session_info_update", "title": "Fix calc", "updatedAt": "2026-01-01T00:00:00Z"},
        {"sessionUpdate": "session_info_update", "updatedAt": "2026-01-01T00:01:00Z"},
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "context", "description": "x"}, {"name": "compact", "description": "y"}],
        },
    )
    assert text.splitlines() == ["title: Fix calc", "commands: /context /compact"]


def test_notice_compaction_and_unknown_kinds():
    text = render(
        {"sessionUpdate": "notice", "severity": "warning", "title": "Context 72% full"},
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "c1",
            "status": "completed",
            "summary": [{"type": "text", "text": "Fixed add()."}],
        },
        {"sessionUpdate": "something_new"},
    )
    assert text.splitlines() == [
        "! warning: Context 72% full",
        "⟳ compaction completed",
        "  ≡ Fixed add().",
        "[something_new]",
    ]


def test_permission_request_and_answer():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    params: JSONObject = {
        "sessionId": SID,
        "toolCall": {"toolCallId": "t1", "title": "Run pytest -q"},
        "options": [
            {"optionId": "a", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "r", "name": "Reject", "kind": "reject_once"},
        ],
    }
    r.permission(params, {"outcome": "selected", "optionId": "a"})
    r.permission(params, {"outcome": "cancelled"})
    assert out.getvalue().splitlines() == [
        "? permission: Run pytest -q — Allow once (allow_once), Reject (reject_once)",
        "  → Allow once (allow_once)",
        "? permission: Run pytest -q — Allow once (allow_once), Reject (reject_once)",
        "  → cancelled",
    ]


def test_hold_queues_updates_until_release():
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.hold()
    r.update({"sessionId": SID, "update": usage(1_000, 100_000)})
    r.line("model: x")
    r.release()
    assert out.getvalue().splitlines()[0] == "model: x"
    assert out.getvalue().splitlines()[1].startswith("ctx 1.0%")


def test_stream_is_ended_before_other_output():
    text = render(chunk("agent_message_chunk", "Looking"), usage(10, 100))
    assert text.splitlines()[0] == "Looking" and text.splitlines()[1].startswith("ctx 10%")


def test_colour_rewrites_the_tool_line_in_place():
    text = render(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.py", "kind": "read"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"},
        colour=True,
    )
    assert text.count("▸ Read a.py") == 2 and "\x1b[1A\r\x1b[2K" in text


def test_live_terminal_output_replaces_the_text_copy():
    out = io.StringIO()
    r = Renderer(out, colour=False, terminal_output=lambda tid: "Ran 2 tests\nOK\n")
    term: JSONObject = {"type": "terminal", "terminalId": "term-1"}
    copy: JSONObject = {"type": "content", "content": {"type": "text", "text": "Ran 2 tests\nOK\nExit code: 0"}}
    r.update(
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "t",
                "title": "Run",
                "kind": "execute",
                "content": [term],
            },
        }
    )
    r.update(
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "status": "completed",
                "content": [term, copy],
            },
        }
    )
    assert out.getvalue().count("Ran 2 tests") == 1 and "Exit code" not in out.getvalue()


def test_permission_details_show_the_whole_command_and_the_diff():
    long_command = "echo start && " + " && ".join(f"step{i}" for i in range(40)) + " && rm -rf ./build"
    tool: JSONObject = {
        "toolCallId": "t1",
        "title": "Run `echo start && …`",
        "content": [
            {"type": "content", "content": {"type": "text", "text": long_command}},
            {"type": "diff", "path": "/w/a.py", "oldText": "x = 1\n", "newText": "x = 2\n"},
            "junk",
            {"type": "diff", "path": "/w/b.py", "oldText": 5, "newText": None},
        ],
    }
    lines = permission_details(tool)
    assert lines[0] == long_command  # the destructive tail is visible, not cut at 80 characters
    assert lines[1:] == ["/w/a.py", "@@ -1 +1 @@", "-x = 1", "+x = 2"]
    assert permission_details(None) == [] and permission_details({"content": "nope"}) == []


def test_a_permission_prompt_lists_the_details_under_the_title():
    out = io.StringIO()
    r = Renderer(out, colour=False, cwd="/w")
    tool: JSONObject = {
        "toolCallId": "t1",
        "title": "Edit a.py",
        "content": [{"type": "diff", "path": "/w/a.py", "oldText": None, "newText": "hi\n"}],
    }
    r.permission({"sessionId": SID, "toolCall": tool, "options": []}, {"outcome": "cancelled"})
    text = out.getvalue()
    assert "? permission: Edit a.py" in text and "│ +hi" in text


@pytest.mark.parametrize(
    "result",
    [
        {"modes": {"availableModes": 5, "currentModeId": "x"}},
        {"modes": {"availableModes": [5, None, {"id": 3}]}},
        {"configOptions": [{"id": "m", "options": 5, "currentValue": "x"}]},
        {"configOptions": [{"id": "m", "options": [{"options": 7}], "currentValue": "x"}]},
    ],
)
def test_a_session_result_with_junk_arrays_is_shown_not_a_crash(result):
    out = io.StringIO()
    r = Renderer(out, colour=False)
    r.session_opened(SID, result)
    r.update({"sessionId": SID, "update": {"sessionUpdate": "config_option_update", "configOptions": 5}})
    r.update({"sessionId": SID, "update": {"sessionUpdate": "available_commands_update", "availableCommands": 1}})
    r.update({"sessionId": SID, "update": {"sessionUpdate": "plan", "entries": "x"}})
    r.update({"sessionId": SID, "update": {"sessionUpdate": "tool_call", "toolCallId": "t", "content": 3}})
    assert "commands: (none)" in out.getvalue()


def test_a_tool_title_is_one_line_so_its_in_place_rewrite_clears_it_all():
    text = render({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Run\nrm -rf /\tnow", "status": "pending"})
    assert "▸ Run rm -rf / now [other] pending" in text


def test_a_diff_whose_texts_are_lists_is_shown_not_a_crash():
    """A hostile agent's tool call with `newText`/`oldText` of the wrong JSON type: the renderer (whose reader
    task a crash would end) shows the path and goes on to the next update."""
    bad: JSONObject = {"type": "diff", "path": "/work/a.py", "oldText": ["x"], "newText": ["y", 1]}
    out = render(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit", "status": "completed", "content": [bad]},
        chunk("agent_message_chunk", "after"),
    )
    assert "a.py" in out and "after" in out
