"""Compaction budgets (docs/sessions.md "Budgets"): the kept tail bounded by the room it may use, budgets that
scale with the window, a prediction that lands under autoCompactAt by the margin or a refusal, a handoff request
that fits the window, and `[+N chars]` clipping. A unit matrix over windows 8k–1M, and hypothesis properties."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.agent.compaction import (
    CHARS_PER_TOKEN,
    HANDOFF_CAP,
    INVENTORY_CAP,
    MIN_ROOM_TOKENS,
    Plan,
    Refused,
    budgets,
    handoff_request,
    keep_budget,
    limit_after,
    plan_compaction,
    wrapper_text,
)
from ama_acp.agent.inventory import build_inventory, clip, marker
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
from tests.support.hypothesis_profiles import examples

EST = HeuristicEstimator()
PREFIX = 1_950  # about ama's system prompt + tool declarations
WINDOWS = (8_192, 32_768, 128_000, 200_000, 1_000_000)
WRAPPER = EST.text(
    wrapper_text("/data/sessions/s/compaction-1/handoff.md", "/data/sessions/s/compaction-1/inventory.md")
)


def auto_for(window: int) -> int:
    return window - effective_reserve(window, 16_384)


def turn(i: int, chars: int) -> list[Message]:
    call = ToolCallPart(f"c{i}", "read_file", json.dumps({"path": f"f{i}.txt"}))
    return [
        UserMessage([TextPart(f"step {i} " + "u" * (chars // 4))]),
        AssistantMessage([TextPart("reading"), call], stop="tool_use"),
        ToolResultMessage(f"c{i}", "read_file", [TextPart("r" * (chars // 2))]),
        AssistantMessage([TextPart("done " + "a" * (chars // 4))]),
    ]


def session_of(tokens: int, turns: int = 12) -> list[Message]:
    messages: list[Message] = []
    for i in range(turns):
        messages += turn(i, tokens * CHARS_PER_TOKEN // turns)
    return messages


def used_by(messages: list[Message]) -> int:
    return PREFIX + sum(EST.message(m) for m in messages)


# --- arithmetic -------------------------------------------------------------------------------------------


def test_the_kept_tail_is_at_most_a_quarter_of_auto_compact_at_whatever_keep_tokens_says():
    assert keep_budget(20_000, 16_384) == 4_096  # the README's 32k example: 20,000 kept everything and looped
    assert keep_budget(1_000, 16_384) == 1_000
    assert keep_budget(20_000, None) == 20_000  # no window: the configured figure
    assert keep_budget(-5, 16_384) == 0


def test_the_limit_is_80_percent_of_the_threshold_or_of_a_smaller_figure():
    assert limit_after(20_000, 16_384) == 13_107
    assert limit_after(10_000, 16_384) == 8_000  # /compact under the threshold must still free 20 %
    assert limit_after(10_000, None) == 8_000


def test_budgets_scale_with_the_room_and_are_capped_for_big_windows():
    inventory = build_inventory(session_of(50_000))
    small, big = budgets(1_000, inventory), budgets(1_000_000, inventory)
    assert len(small.inventory_copy) + small.handoff_chars <= 1_000 * CHARS_PER_TOKEN
    # Issue 29: seed 003's 95,000 characters where the window allows (were 40,000 / 24,000).
    assert big.handoff_chars == HANDOFF_CAP == 95_000 and len(big.inventory_copy) <= INVENTORY_CAP == 95_000


def test_a_prefix_that_leaves_no_room_is_refused_with_a_reason():
    messages = session_of(5_000)
    plan = plan_compaction(
        messages,
        0,
        used=4_100,
        prefix_tokens=3_500,
        wrapper_tokens=WRAPPER,
        auto_compact_at=4_096,
        keep_tokens=20_000,
        estimate=EST.message,
    )
    assert isinstance(plan, Refused) and "leave too little room" in plan.reason


def test_nothing_older_than_the_kept_tail_is_refused():
    messages = turn(0, 40)
    plan = plan_compaction(
        messages,
        0,
        used=50_000,  # e.g. a provider figure: room enough to keep the one turn, and nothing before it
        prefix_tokens=PREFIX,
        wrapper_tokens=WRAPPER,
        auto_compact_at=100_000,
        keep_tokens=20_000,
        estimate=EST.message,
    )
    assert isinstance(plan, Refused) and "nothing to compact" in plan.reason


def test_a_previous_handoff_is_never_kept():
    handoff = UserMessage([TextPart("the previous handoff")], origin="ama")
    messages = [handoff, *turn(0, 40), *turn(1, 40)]

    def plan(keep: int) -> Plan | Refused:
        return plan_compaction(
            messages,
            1,
            used=90_000,
            prefix_tokens=PREFIX,
            wrapper_tokens=WRAPPER,
            auto_compact_at=80_000,
            keep_tokens=keep,
            estimate=EST.message,
        )

    last = plan(sum(EST.message(m) for m in messages[5:]))
    assert isinstance(last, Plan) and last.kept == messages[5:]
    # Everything stored fits: only the handoff would go, which frees nothing. The code before kept the
    # handoff too, counted it as a stored message, and wrote kept_from_index -1.
    everything = plan(10**6)
    assert isinstance(everything, Refused) and "nothing to compact" in everything.reason


# --- the window matrix --------------------------------------------------------------------------------------


def check_window(window: int, keep_tokens: int) -> None:
    auto = auto_for(window)
    messages = session_of(auto, turns=12)
    used = used_by(messages)
    plan = plan_compaction(
        messages,
        0,
        used=used,
        prefix_tokens=PREFIX,
        wrapper_tokens=WRAPPER,
        auto_compact_at=auto,
        keep_tokens=keep_tokens,
        estimate=EST.message,
    )
    assert isinstance(plan, Plan), plan
    assert plan.kept_tokens <= auto // 4
    room = budgets(plan.room_tokens, build_inventory(messages))
    predicted = (
        PREFIX + WRAPPER + plan.kept_tokens + EST.text(room.inventory_copy) + room.handoff_chars // CHARS_PER_TOKEN
    )
    assert predicted <= plan.limit <= auto * 8 // 10, (window, predicted, plan.limit)
    request = handoff_request(
        pb.ModelRequest(model="m", system="s" * (PREFIX * 4), messages=messages),
        build_inventory(messages * 20),  # a long history's inventory: clipped for the request
        room.handoff_chars,
        instructions="",
        window=window,
        prefix_tokens=PREFIX,
        estimate_text=EST.text,
        estimate=EST.message,
    )
    sent = PREFIX + sum(EST.message(m) for m in request.messages) + room.handoff_chars // CHARS_PER_TOKEN
    assert sent <= window, (window, sent)


def test_every_window_from_8k_to_1m_compacts_under_the_margin_with_default_keep_tokens():
    for window in WINDOWS:
        check_window(window, 20_000)


def test_every_window_compacts_under_the_margin_when_keep_tokens_exceeds_auto_compact_at():
    for window in WINDOWS:
        check_window(window, auto_for(window) * 2)


def test_a_context_larger_than_the_window_still_sends_a_handoff_request_that_fits():
    messages = session_of(200_000, turns=40)  # a 200k-token session on a 32k window
    request = handoff_request(
        pb.ModelRequest(model="m", system="s", messages=messages),
        build_inventory(messages),
        8_000,
        instructions="",
        window=32_768,
        prefix_tokens=PREFIX,
        estimate_text=EST.text,
        estimate=EST.message,
    )
    assert PREFIX + sum(EST.message(m) for m in request.messages) + 2_000 <= 32_768
    assert isinstance(request.messages[0], UserMessage)  # whole turns: no result without its call


# --- clipping ------------------------------------------------------------------------------------------------


def test_clip_cuts_at_a_line_boundary_and_says_how_much_was_left_out():
    text = "".join(f"line {i}\n" for i in range(100))
    out = clip(text, 200)
    assert len(out) <= 200
    kept, _, tail = out.rpartition("\n")
    assert tail == marker(len(text) - len(kept)) and text.startswith(kept + "\n")
    assert clip(text, len(text)) == text


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(max_size=3_000), limit=st.integers(30, 4_000))
def test_property_clip_is_within_the_limit_and_its_marker_counts_what_is_left_out(text, limit):
    out = clip(text, limit)
    assert len(out) <= max(limit, len(text) if len(text) <= limit else limit)
    if out != text:
        kept, _, tail = out.rpartition("\n")
        assert text.startswith(kept)
        assert tail == marker(len(text) - len(kept))


# --- the property: compaction shrinks by the margin, or is refused -------------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Message], int]:
    messages: list[Message] = []
    synthetic = draw(st.integers(0, 1))
    if synthetic:
        messages.append(UserMessage([TextPart("h" * draw(st.integers(0, 4_000)))], origin="ama"))
    for i in range(draw(st.integers(0, 12))):
        messages += turn(i, draw(st.integers(0, 40_000)))
    return messages, synthetic


@settings(max_examples=examples(200), deadline=None)
@given(
    session=sessions(),
    window=st.sampled_from(WINDOWS),
    keep=st.integers(0, 2_000_000),
    prefix=st.integers(0, 8_000),
    over=st.integers(0, 3),
    earlier=st.integers(0, 500),
)
def test_property_the_context_lands_under_the_margin_or_compaction_is_refused(
    session, window, keep, prefix, over, earlier
):
    messages, synthetic = session
    auto = auto_for(window)
    estimate = prefix + sum(EST.message(m) for m in messages)
    used = max(estimate, auto) if over else estimate  # at the threshold (automatic) or anywhere (/compact)
    plan = plan_compaction(
        messages,
        synthetic,
        used=used,
        prefix_tokens=prefix,
        wrapper_tokens=WRAPPER,
        auto_compact_at=auto,
        keep_tokens=keep,
        estimate=EST.message,
    )
    if isinstance(plan, Refused):
        assert plan.reason.endswith("Nothing was changed.")
        return
    room = budgets(plan.room_tokens, build_inventory(messages))
    after = prefix + WRAPPER + plan.kept_tokens + EST.text(room.inventory_copy) + room.handoff_chars // CHARS_PER_TOKEN
    assert after <= plan.limit <= min(used, auto) * 8 // 10
    assert plan.room_tokens >= MIN_ROOM_TOKENS
    # kept_from_index as compacting.py computes it: a valid file index, after what was already replaced
    stored = len(messages) - synthetic
    message_total = earlier + stored  # `earlier` messages were replaced by previous compactions
    kept_from = max(earlier, message_total - len(plan.kept))
    assert earlier <= kept_from <= message_total
    assert all(m.origin == "person" for m in plan.kept if isinstance(m, UserMessage))
    assert plan.kept == messages[len(messages) - len(plan.kept) :]
