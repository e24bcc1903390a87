"""Tool results sized to the window (agent/result_fit.py; docs/context.md "Tool results sized to the window")
and the tail a compaction always keeps (agent/compaction.py `unseen_tail`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.agent.compaction import Plan, Refused, plan_compaction, unseen_tail
from ama_acp.agent.result_fit import MIN_RESULT_TOKENS, fit_result, result_budget, tool_chars
from ama_acp.context.estimate import make_estimator
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.tools.base import Location, ToolResult
from tests.support.hypothesis_profiles import examples

EST = make_estimator("heuristic")


def test_no_window_no_bound():
    assert result_budget(None, None, 10, 0) is None
    result = ToolResult("x" * 1_000_000)
    assert fit_result(result, None, EST.text, 0) is result


def test_a_quarter_of_auto_compact_at_for_the_results_of_one_reply():
    assert result_budget(32_768, 16_384, 2_000, 0) == 4_096
    assert result_budget(32_768, 16_384, 6_000, 3_000) == 1_096  # what the reply's earlier results left
    assert result_budget(32_768, 16_384, 30_000, 0) == MIN_RESULT_TOKENS  # a full window: the minimum
    assert result_budget(32_768, None, 2_000, 0) == 8_192  # compaction off: a quarter of the window


@settings(max_examples=examples(300), deadline=None)
@given(
    window=st.integers(1, 2_000_000),
    auto_share=st.none() | st.integers(1, 100),
    used=st.integers(0, 3_000_000),
    unseen=st.integers(0, 1_000_000),
)
def test_the_budget_is_never_under_the_minimum_nor_over_the_share_or_the_room(window, auto_share, used, unseen):
    auto = None if auto_share is None else max(1, window * auto_share // 100)
    budget = result_budget(window, auto, used, unseen)
    assert budget is not None and budget >= MIN_RESULT_TOKENS
    base = auto if auto is not None else window
    if budget > MIN_RESULT_TOKENS:
        assert budget <= base // 4 - unseen and budget <= window - used - window // 10


@settings(max_examples=examples(200), deadline=None)
@given(
    text=st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "Zs", "Cc"]), max_size=20_000),
    budget=st.integers(MIN_RESULT_TOKENS, 4_000),
)
def test_a_cut_result_fits_its_budget_keeps_a_prefix_and_says_what_was_left_out(text, budget):
    result = ToolResult(text, locations=[Location("/w/a.txt")])
    fitted = fit_result(result, budget, EST.text, 32_768)
    if EST.text(text) <= budget:
        assert fitted is result
        return
    assert EST.text(fitted.text) <= budget
    shown, _, marker = fitted.text.partition("\n\n[ama cut this result")
    assert text.startswith(shown) and "were left out" in marker and "offset" in marker
    assert fitted.locations == result.locations


def test_cjk_is_cut_by_its_token_count_not_by_characters():
    text = "重构这个函数。\n" * 2_000  # ~8 tokens a line
    fitted = fit_result(ToolResult(text), 1_000, EST.text, 32_768)
    assert EST.text(fitted.text) <= 1_000 and fitted.text.startswith("重构这个函数。\n")


def test_tool_chars_leaves_room_for_the_marker():
    assert tool_chars(None) is None
    assert tool_chars(4_096) == (4_096 - 80) * 4


# --- the tail a compaction keeps -----------------------------------------------------------------------------

CALL = AssistantMessage([TextPart("reading"), ToolCallPart("c1", "read_file", "{}")], stop="tool_use")
BIG = ToolResultMessage("c1", "read_file", [TextPart("x" * 40_000)])


def test_the_results_of_the_last_reply_are_kept_with_that_reply():
    old: list[Message] = [UserMessage([TextPart("hi")]), AssistantMessage([TextPart("hello")])]
    assert unseen_tail([*old, UserMessage([TextPart("read")]), CALL, BIG]) == [CALL, BIG]
    prompt = UserMessage([TextPart("next")])
    assert unseen_tail([*old, prompt]) == [prompt]
    assert unseen_tail(old) == []


def test_a_compaction_keeps_an_unread_result_whatever_keep_tokens_says():
    messages: list[Message] = [
        UserMessage([TextPart("a" * 40_000)]),
        AssistantMessage([TextPart("b" * 40_000)]),
        CALL,
        BIG,
    ]
    plan = plan_compaction(
        messages,
        0,
        used=40_000,
        prefix_tokens=1_000,
        wrapper_tokens=200,
        auto_compact_at=100_000,
        keep_tokens=0,
        estimate=EST.message,
    )
    assert isinstance(plan, Plan), plan
    assert plan.kept == [CALL, BIG]


def test_an_unread_tail_too_big_for_a_handoff_is_refused_with_why():
    plan = plan_compaction(
        [UserMessage([TextPart("a" * 400)]), CALL, BIG],
        0,
        used=12_000,
        prefix_tokens=1_000,
        wrapper_tokens=200,
        auto_compact_at=12_000,
        keep_tokens=0,
        estimate=EST.message,
    )
    assert isinstance(plan, Refused) and "not read yet" in plan.reason
