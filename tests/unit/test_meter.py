"""The context meter: docs/rules.md U5, U7–U15, S3, and restoring a session's figures."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.context.estimate import HeuristicEstimator
from ama_acp.context.meter import ContextFigures, ContextMeter, MeterState, reported, usage_tokens
from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tests.support.hypothesis_profiles import examples

SYSTEM = "s" * 4000  # 1,000 tokens
TOOLS = "t" * 6000  # 1,500 tokens


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextPart(text)])


def assistant(text: str = "ok", usage: Usage | None = None) -> AssistantMessage:
    return AssistantMessage(content=[TextPart(text)], usage=usage)


def tool_result(text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id="c1", name="read", content=[TextPart(text)])


def meter(window: int | None = 200_000, **kw: Any) -> ContextMeter:
    m = ContextMeter(window=window, **kw)
    m.set_prefix(SYSTEM, TOOLS)
    return m


# -- sources -------------------------------------------------------------------------------------------


def test_u10_prefix_before_first_request_is_never_zero() -> None:
    f = meter().figures()
    # U8/S2: usageTokens 0 and trailingTokens the whole estimate for every source that is not `usage`.
    assert (f.used, f.source, f.usage_tokens, f.trailing_tokens) == (2500, "prefix", 0, 2500)


def test_u10_prefix_counts_messages_appended_before_first_request() -> None:
    m = meter()
    m.append(user("重构这个函数 please"))
    f = m.figures()
    assert (f.used, f.source) == (2508, "prefix")


def test_u8_usage_then_trailing_estimates() -> None:
    m = meter()
    m.append(user("hi"))
    m.append(assistant(usage=Usage(input=3000, output=100)))
    m.append(tool_result("x" * 400))
    m.append(user("abcdabcd"))
    f = m.figures()
    assert (f.source, f.usage_tokens, f.trailing_tokens, f.used) == ("usage", 3100, 102, 3202)


def test_u7_total_is_preferred_when_reported() -> None:
    assert usage_tokens(Usage(input=1000, output=50, cache_read=500, total=1700)) == 1700


def test_u7_sum_includes_cache_read_cache_write_and_output() -> None:
    assert usage_tokens(Usage(input=100, output=20, cache_read=3000, cache_write=400)) == 3520
    assert usage_tokens(Usage(input=100, output=20)) == 120


@pytest.mark.parametrize(
    "usage",
    [
        None,
        Usage(),  # nothing reported
        Usage(input=100),  # output missing, no total
        Usage(output=10),  # input missing, no total
        Usage(input=-5, output=10),  # negative
        Usage(input=100, output=10, cache_read=-1),
        Usage(input=5000, output=10, total=4000),  # total below the input alone
        Usage(input=0, output=0),  # a request that carried nothing: not a count
        Usage(input=900_000, output=10),  # above 4x a 200K window
    ],
    ids=["none", "empty", "no-output", "no-input", "negative", "negative-cache", "total<input", "zero", "absurd"],
)
def test_u11_untrustworthy_usage_is_rejected(usage: Usage | None) -> None:
    assert usage_tokens(usage, window=200_000) is None


def test_u11_untrustworthy_usage_without_anchor_is_an_unmeasured_estimate() -> None:
    m = meter()
    m.append(user("abcd"))
    m.append(assistant("efgh", usage=Usage(input=900_000, output=10)))  # > 4 x window
    f = m.figures()
    assert f.source == "estimate"
    assert f.used == 2500 + 1 + 1
    assert f.usage_tokens == 0 and f.trailing_tokens == f.used
    assert f.percent == 1.3
    assert f.tier == "unmeasured" and f.untrusted  # never the `healthy` an estimate of 1.3 % would give


def test_u8_untrustworthy_usage_keeps_the_anchor_and_joins_the_trailing_estimate() -> None:
    m = meter()
    m.append(assistant("x", usage=Usage(input=3000, output=20)))
    m.append(user("abcd"))
    m.append(assistant("efgh", usage=Usage(input=900_000, output=10)))  # > 4 x the 200,000 window
    f = m.figures()
    assert (f.source, f.usage_tokens, f.trailing_tokens, f.used, f.tier) == ("usage", 3020, 2, 3022, "unmeasured")
    m.append(user("more"))
    m.append(assistant("back", usage=Usage(input=3100, output=5)))  # a trustworthy reading ends it
    f = m.figures()
    assert (f.source, f.used, f.tier, f.untrusted) == ("usage", 3105, "healthy", False)


def test_u8_reply_without_usage_joins_the_trailing_estimate() -> None:
    m = meter()
    m.append(assistant("x", usage=Usage(input=3000, output=20)))
    m.append(user("please fix the bug"))  # 5
    m.append(assistant("Done!", usage=None))  # 2
    f = m.figures()
    assert (f.source, f.usage_tokens, f.trailing_tokens, f.used, f.tier) == ("usage", 3020, 7, 3027, "healthy")


def test_u11_a_reply_that_reports_nothing_is_no_reading() -> None:
    """All-zero figures (an Anthropic-style stream without usage) count nothing: not an anchor, and not an
    untrustworthy reading either — it neither sets nor clears `unmeasured`."""
    m = meter()
    m.append(assistant("x", usage=Usage(input=3000, output=20)))
    m.append(assistant("abcd", usage=Usage(input=0, output=0, cache_read=0, cache_write=0)))
    f = m.figures()
    assert (f.source, f.used, f.tier) == ("usage", 3021, "healthy")
    m.append(assistant("abcd", usage=Usage(input=-1, output=3)))
    assert m.figures().tier == "unmeasured"
    m.append(assistant("abcd", usage=None))
    assert m.figures().tier == "unmeasured"  # still the latest reading's verdict
    m.replace([user("summary")])
    assert m.figures().tier == "unmeasured"  # a compaction is no reading either


def test_u11_u12_reading_over_the_window_is_kept_as_a_lower_bound() -> None:
    m = meter(window=100_000)
    m.append(assistant("x", usage=Usage(input=250_000, output=0)))
    f = m.figures()
    assert (f.source, f.used, f.percent, f.over_window, f.tier) == ("usage", 250_000, 100.0, True, "danger")
    assert not meter(window=100_000).figures().over_window


def test_u11_untrusted_survives_state_and_restore() -> None:
    m = meter()
    msgs: list[Message] = [
        user("abcd"),
        assistant("x", usage=Usage(input=3000, output=20)),
        assistant("y", Usage(total=-5)),
    ]
    for msg in msgs:
        m.append(msg)
    state = msgspec.json.decode(msgspec.json.encode(m.state()), type=MeterState)
    loaded = meter()
    loaded.restore(msgs, state)
    assert loaded.figures() == m.figures() and loaded.figures().tier == "unmeasured"
    replayed = meter()
    replayed.restore(msgs, None)
    assert replayed.figures() == m.figures()


def test_reported_tells_a_reading_from_nothing() -> None:
    assert not reported(None) and not reported(Usage()) and not reported(Usage(input=0, output=0))
    assert reported(Usage(input=1, output=0)) and reported(Usage(total=-3))


def test_u11_4x_window_boundary_is_inclusive() -> None:
    assert usage_tokens(Usage(input=800_000, output=0), window=200_000) == 800_000
    assert usage_tokens(Usage(input=800_001, output=0), window=200_000) is None


def test_u9_assistant_without_usage_and_no_anchor_means_estimate() -> None:
    m = meter()
    m.append(user("abcd"))
    m.append(assistant("abcdabcd", usage=None))
    f = m.figures()
    assert (f.source, f.used, f.tier) == ("estimate", 2500 + 1 + 2, "healthy")  # no reading: a measured tier


def test_u9_replace_is_an_estimate_until_next_usage() -> None:
    m = meter()
    m.append(user("a" * 400))
    m.append(assistant(usage=Usage(input=50_000, output=500)))
    summary = user("summary " * 10)
    m.replace([summary])
    f = m.figures()
    assert (f.source, f.used) == ("estimate", 2500 + 20)
    m.append(assistant(usage=Usage(input=2520, output=30)))
    assert (m.figures().source, m.figures().used) == ("usage", 2550)


def test_u9_invalidate_after_a_request_goes_to_estimate() -> None:
    m = meter()
    m.append(user("abcd"))
    m.append(assistant("x", usage=Usage(input=9000, output=10)))
    assert m.figures().used == 9010
    m.invalidate()
    f = m.figures()
    assert (f.source, f.used) == ("estimate", 2500 + 1 + 1)


def test_u10_invalidate_before_first_request_stays_prefix() -> None:
    m = meter()
    m.invalidate()
    assert m.figures().source == "prefix"


def test_u9_prefix_change_after_request_is_an_edit() -> None:
    m = meter()
    m.append(assistant("x", usage=Usage(input=2600, output=10)))
    m.set_prefix(SYSTEM, TOOLS)  # unchanged: nothing happens
    assert m.figures().source == "usage"
    m.set_prefix(SYSTEM + "more", TOOLS)
    f = m.figures()
    assert (f.source, f.used) == ("estimate", 1001 + 1500 + 1)


def test_u9_a_prefix_that_comes_back_makes_the_anchor_exact_again() -> None:
    """A tool declared in one mode only (plan mode's exit_plan_mode) or an MCP server that went and came back: while
    the prefix differs the figure is an estimate; once the prefix the anchor was measured under is back, with only
    appends since, the next request carries exactly that plus what came after — the anchor holds again, the same
    figure a session loaded from its file gives (the seam fuzzer's long run found them apart)."""
    m = meter()
    m.append(assistant("x", usage=Usage(input=2600, output=10)))
    m.set_prefix(SYSTEM, TOOLS + "plan")
    assert m.figures().source == "estimate"
    m.append(user("more " * 40))
    m.append(assistant("unmeasured"))  # a reply without usage, while the anchor is set aside: counted after it
    m.set_prefix(SYSTEM, TOOLS)
    f = m.figures()
    trailing = m.estimator.text("more " * 40) + m.estimator.text("unmeasured")
    assert f.source == "usage" and f.usage_tokens == 2610 and f.trailing_tokens is not None
    assert abs(f.trailing_tokens - trailing) <= 8  # the estimator's per-message overhead


def test_u9_an_edit_while_the_prefix_differs_ends_the_anchor_for_good() -> None:
    m = meter()
    m.append(assistant("x", usage=Usage(input=2600, output=10)))
    m.set_prefix(SYSTEM, TOOLS + "plan")
    m.replace([user("compacted")])  # compaction or pruning: the context was edited
    m.set_prefix(SYSTEM, TOOLS)
    assert m.figures().source == "estimate"


# -- derived figures -----------------------------------------------------------------------------------


def test_u12_percent_one_decimal() -> None:
    m = meter()
    m.append(assistant(usage=Usage(input=2508, output=40)))
    assert m.figures().percent == 1.3  # 2548 / 200000 = 1.274 %


def test_u12_u11_percent_capped_at_100() -> None:
    m = meter(window=8000, reserve_tokens=1000)
    m.append(tool_result("x" * 40_000))  # estimate 10,000 + 2,500 over an 8,000 window
    f = m.figures()
    assert f.used == 12_500 and f.percent == 100.0


def test_u12_no_window_no_percent_unmeasured() -> None:
    f = meter(window=None).figures()
    assert f.percent is None and f.window is None and f.tier == "unmeasured"
    assert f.auto_compact_at is None and f.prune_at is None


def test_u13_u14_thresholds() -> None:
    f = meter().figures()
    assert f.auto_compact_at == 183_616
    assert f.prune_at == 128_531  # floor(0.7 x 183,616) = floor(128,531.2)


def test_u14_prune_at_is_an_exact_floor() -> None:
    # 0.7 * 40,970 in floats is 28678.999999999996: a float floor would be one short.
    assert int(0.7 * 40_970) == 28_678
    assert meter(window=16_384 + 40_970).figures().prune_at == 28_679


@pytest.mark.parametrize("how", ["disabled", "held"])
def test_u13_u14_absent_when_compaction_off_or_held(how: str) -> None:
    if how == "disabled":
        m = meter(compaction_enabled=False)
    elif how == "held":
        m = meter()
        m.set_compaction(held=True)
    f = m.figures()
    assert f.auto_compact_at is None and f.prune_at is None
    assert f.percent is not None  # the rest stays known


@pytest.mark.parametrize(
    ("window", "at"),
    [(8_192, 4_096), (16_384, 8_192), (32_768, 16_384), (128_000, 111_616), (1_000_000, 983_616)],
)
def test_u13_the_reserve_is_at_most_half_the_window(window: int, at: int) -> None:
    # Small windows still get a threshold (the default reserve would swallow them whole); from 32k on the
    # configured reserve stands.
    assert meter(window=window).figures().auto_compact_at == at


def test_u13_held_then_released() -> None:
    m = meter()
    m.set_compaction(held=True)
    assert m.figures().auto_compact_at is None
    m.set_compaction(held=False)
    assert m.figures().auto_compact_at == 183_616


def test_set_window_changes_size_and_keeps_usage() -> None:
    m = meter()
    m.append(assistant(usage=Usage(input=100_000, output=0)))
    m.set_window(1_000_000)
    f = m.figures()
    assert (f.source, f.used, f.window, f.percent, f.tier) == ("usage", 100_000, 1_000_000, 10.0, "healthy")


def test_u15_unknown_figures_are_absent_not_zero() -> None:
    enc = msgspec.json.decode(msgspec.json.encode(meter(window=None).figures()))
    assert enc == {"used": 2500, "source": "prefix", "tier": "unmeasured", "trailing_tokens": 2500}


def test_tier_follows_percent() -> None:
    m = meter(window=10_000, reserve_tokens=1000)
    m.append(assistant(usage=Usage(input=7_400, output=0)))
    assert m.figures().tier == "danger"
    m.replace([])
    assert m.figures().tier == "healthy"  # 2,500 / 10,000: it falls again after a compaction


@pytest.mark.parametrize(
    ("used", "percent", "tier"),
    [(4_999, 50.0, "healthy"), (5_000, 50.0, "mid"), (7_399, 74.0, "warning"), (7_400, 74.0, "danger")],
)
def test_tier_is_exact_not_from_the_rounded_percent(used: int, percent: float, tier: str) -> None:
    """The percent is rounded for display (U12); the tier is not: it changes at the very token of the cap."""
    m = meter(window=10_000, reserve_tokens=1000)
    m.append(assistant(usage=Usage(input=used, output=0)))
    f = m.figures()
    assert (f.used, f.percent, f.tier) == (used, percent, tier)


@settings(max_examples=examples(200), deadline=None)
@given(window=st.integers(min_value=1, max_value=10**9), data=st.data())
def test_property_the_meters_tier_is_the_exact_fill(window: int, data: st.DataObject) -> None:
    used = data.draw(st.integers(min_value=1, max_value=4 * window))  # a trustworthy reading (U11)
    m = meter(window=window)
    m.append(assistant(usage=Usage(input=used, output=0)))
    f = m.figures()
    caps = (50, 60, 70, 74)
    expected = ("healthy", "mid", "high", "warning", "danger")[sum(used * 100 >= c * window for c in caps)]
    assert f.tier == expected


# -- incremental cost (U5) -----------------------------------------------------------------------------


class CountingEstimator(HeuristicEstimator):
    def __init__(self) -> None:
        self.messages = 0
        self.texts = 0

    def message(self, m: Message) -> int:
        self.messages += 1
        return super().message(m)

    def text(self, s: str) -> int:
        self.texts += 1
        return super().text(s)


def test_u5_update_cost_does_not_grow_with_session_length() -> None:
    est = CountingEstimator()
    m = ContextMeter(est, window=10_000_000)
    m.set_prefix(SYSTEM, TOOLS)
    for i in range(10_000):
        m.append(user(f"message {i}") if i % 2 else assistant(usage=Usage(input=1000 + i, output=5)))
    est.messages = est.texts = 0
    m.append(tool_result("one more"))
    f = m.figures()
    m.figures()
    assert est.messages == 1  # the new message only
    assert est.texts == 1  # ... and its one text part; nothing else is re-estimated
    assert f.used == (1000 + 9998 + 5) + 3 + 2  # last usage + "message 9999" + "one more"


def test_u5_replace_reestimates_only_new_messages() -> None:
    est = CountingEstimator()
    m = ContextMeter(est, window=200_000)
    kept = [user(f"m{i}") for i in range(50)]
    for k in kept:
        m.append(k)
    est.messages = 0
    m.replace([user("summary"), *kept[-10:]])
    assert est.messages == 1


# -- breakdown (S3) ------------------------------------------------------------------------------------


def test_s3_breakdown_by_kind() -> None:
    m = meter()
    m.append(UserMessage(content=[TextPart("abcd" * 10), ImagePart(data="AA==", mime_type="image/png")]))
    m.append(
        AssistantMessage(content=[ToolCallPart(id="c", name="read", arguments="{}xx")], usage=Usage(input=1, output=1))
    )
    m.append(tool_result("z" * 100))
    b = m.breakdown()
    assert (b.system_prompt, b.tool_declarations) == (1000, 1500)
    assert (b.user_messages, b.images, b.assistant_messages, b.tool_results) == (10, 1600, 2, 25)
    assert b.total == 2500 + 10 + 1600 + 2 + 25 == m.estimate_total()
    assert b.messages == 3


# -- persistence ---------------------------------------------------------------------------------------


def _session() -> tuple[ContextMeter, list[Message]]:
    m = meter()
    msgs: list[Message] = [user("hello"), assistant(usage=Usage(input=4000, output=60)), tool_result("x" * 80)]
    for x in msgs:
        m.append(x)
    return m, msgs


def test_restore_takes_stored_figures_not_reestimates() -> None:
    m, msgs = _session()
    state = msgspec.json.decode(msgspec.json.encode(m.state()), type=MeterState)
    assert (state.source, state.usage_tokens, state.trailing_tokens, state.message_count) == ("usage", 4060, 20, 3)
    # A stored figure wins over what the messages would say (here: a different trailing estimate).
    stored = msgspec.structs.replace(state, trailing_tokens=33)
    loaded = meter()
    loaded.restore(msgs, stored)
    f = loaded.figures()
    assert (f.source, f.usage_tokens, f.trailing_tokens, f.used) == ("usage", 4060, 33, 4093)


def test_restore_roundtrip_equals_live_figures() -> None:
    m, msgs = _session()
    loaded = meter()
    loaded.restore(msgs, m.state())
    assert loaded.figures() == m.figures()
    assert loaded.breakdown() == m.breakdown()


def test_restore_appends_messages_stored_after_the_state() -> None:
    m, msgs = _session()
    state = m.state()
    later = user("abcdabcd")
    loaded = meter()
    loaded.restore([*msgs, later], state)
    f = loaded.figures()
    assert (f.source, f.trailing_tokens, f.used) == ("usage", 22, 4082)


def test_restore_without_state_replays_usage() -> None:
    m, msgs = _session()
    loaded = meter()
    loaded.restore(msgs, None)
    assert loaded.figures() == m.figures()


def test_restore_inconsistent_state_becomes_estimate() -> None:
    m, msgs = _session()
    loaded = meter()
    loaded.restore(msgs[:1] + msgs[1:2], m.state())  # the state counts 3 messages, only 2 are here
    assert loaded.figures().source == "estimate"


def test_restore_estimate_state_stays_estimate() -> None:
    m, msgs = _session()
    m.replace(msgs[-1:])
    loaded = meter()
    loaded.restore(msgs[-1:], m.state())
    assert loaded.figures() == m.figures()
    assert loaded.figures().source == "estimate"


def test_restore_with_changed_prefix_is_an_estimate() -> None:
    m, msgs = _session()
    loaded = ContextMeter(window=200_000)
    loaded.set_prefix(SYSTEM + " rebuilt differently", TOOLS)
    loaded.restore(msgs, m.state())
    assert loaded.figures().source == "estimate"
    # Same prefix set after the restore: usage holds.
    again = ContextMeter(window=200_000)
    again.restore(msgs, m.state())
    again.set_prefix(SYSTEM, TOOLS)
    assert again.figures().source == "usage"


def _measured_with(tools: str) -> tuple[ContextMeter, list[Message]]:
    """A session whose usage was measured with `tools` declared (an MCP server's among them)."""
    m = ContextMeter(window=200_000)
    m.set_prefix(SYSTEM, tools)
    msgs: list[Message] = [user("hello"), assistant(usage=Usage(input=4000, output=60))]
    for x in msgs:
        m.append(x)
    return m, msgs


def test_restore_unverified_keeps_the_anchor_while_the_prefix_is_partial_and_confirms_it_when_final() -> None:
    live, msgs = _measured_with(TOOLS + " mcp")
    loaded = ContextMeter(window=200_000)
    loaded.set_prefix(SYSTEM, TOOLS)  # the load's MCP server has not declared its tools yet
    loaded.restore(msgs, live.state(), verify_prefix=False)
    assert (loaded.anchor_unverified, loaded.figures()) == (True, live.figures())
    loaded.set_prefix(SYSTEM, TOOLS + " partial", final=False)  # still arriving: no comparison yet
    assert loaded.figures() == live.figures()
    loaded.set_prefix(SYSTEM, TOOLS + " mcp", final=True)  # the same tools after all: nothing moved
    assert loaded.figures() == live.figures() and not loaded.anchor_unverified
    loaded.set_prefix(SYSTEM, TOOLS, final=False)  # verified: any change now is a real one (U9)
    assert loaded.figures().source == "estimate"


def test_restore_unverified_becomes_an_estimate_when_the_final_prefix_differs() -> None:
    live, msgs = _measured_with(TOOLS + " mcp")
    loaded = ContextMeter(window=200_000)
    loaded.set_prefix(SYSTEM, TOOLS)
    loaded.restore(msgs, live.state(), verify_prefix=False)
    loaded.set_prefix(SYSTEM, TOOLS + " other tools", final=True)
    f = loaded.figures()
    assert (f.source, f.used) == ("estimate", loaded.estimate_total())
    assert not loaded.anchor_unverified


def test_an_anchor_measured_after_the_load_is_compared_with_every_prefix() -> None:
    live, msgs = _measured_with(TOOLS + " mcp")
    loaded = ContextMeter(window=200_000)
    loaded.set_prefix(SYSTEM, TOOLS)
    loaded.restore(msgs, live.state(), verify_prefix=False)
    loaded.append(user("more"))
    loaded.append(assistant(usage=Usage(input=5000, output=10)))  # measured here, with the partial prefix
    assert not loaded.anchor_unverified and loaded.figures().used == 5010
    loaded.set_prefix(SYSTEM, TOOLS + " mcp", final=False)  # a late server joined: the next request differs
    assert loaded.figures().source == "estimate"


def test_restore_unverified_of_a_state_without_a_prefix_key_or_not_usage_holds_nothing() -> None:
    live, msgs = _measured_with(TOOLS)
    keyless = msgspec.structs.replace(live.state(), prefix_key=None)
    loaded = meter()
    loaded.restore(msgs, keyless, verify_prefix=False)
    assert not loaded.anchor_unverified and loaded.figures().source == "usage"
    live.replace(msgs)
    loaded.restore(msgs, live.state(), verify_prefix=False)
    assert not loaded.anchor_unverified and loaded.figures().source == "estimate"


def test_figures_is_a_struct() -> None:
    assert isinstance(meter().figures(), ContextFigures)


# -- property: usage + trailing, or the whole estimate; unmeasured exactly after an untrustworthy reading -----

_WINDOW = 100_000
_ABSURD = [
    Usage(input=4 * _WINDOW + 1, output=0),  # above 4x the window
    Usage(input=-1, output=5),  # negative
    Usage(input=500, total=100),  # total below the input
    Usage(input=500),  # output missing and no total
]


@st.composite
def _message(draw: st.DrawFn) -> tuple[str, int, str, int]:
    """(role, characters, usage kind, usage tokens) of one appended message."""
    role = draw(st.sampled_from(["user", "tool", "assistant"]))
    chars = draw(st.integers(0, 4000))
    if role != "assistant":
        return role, chars, "none", 0
    kind = draw(st.sampled_from(["valid", "absent", "zeros", "absurd"]))
    tokens = draw(st.integers(1, 4 * _WINDOW)) if kind == "valid" else draw(st.integers(0, len(_ABSURD) - 1))
    return role, chars, kind, tokens


def _build(role: str, chars: int, kind: str, tokens: int) -> AssistantMessage | UserMessage | ToolResultMessage:
    text = "a" * chars
    if role == "user":
        return user(text)
    if role == "tool":
        return tool_result(text)
    if kind == "valid":
        return assistant(text, usage=Usage(input=tokens, output=0))
    if kind == "absurd":
        return assistant(text, usage=_ABSURD[tokens])
    return assistant(text, usage=None if kind == "absent" else Usage(input=0, output=0, cache_read=0))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_message(), max_size=40))
def test_property_used_is_anchor_plus_trailing_or_the_whole_estimate(script: list[tuple[str, int, str, int]]) -> None:
    m = meter(window=_WINDOW)
    anchor: int | None = None
    trailing = whole = 0
    untrusted = asked = False
    messages = []
    for role, chars, kind, tokens in script:
        msg = _build(role, chars, kind, tokens)
        messages.append(msg)
        m.append(msg)
        n = -(-chars // 4)  # U2: ASCII, a quarter token a character
        whole += n
        if role == "assistant":
            asked = True
            if kind == "valid":
                anchor, trailing, untrusted = tokens, 0, False
                continue
            if kind == "absurd":
                untrusted = True
        trailing += n
        f = m.figures()
        if anchor is not None:
            assert (f.source, f.usage_tokens, f.trailing_tokens, f.used) == (
                "usage",
                anchor,
                trailing,
                anchor + trailing,
            )
        else:
            assert f.source == ("estimate" if asked else "prefix")
            assert (f.used, f.usage_tokens, f.trailing_tokens) == (2500 + whole, 0, 2500 + whole)
        assert (f.tier == "unmeasured") is untrusted and f.untrusted is untrusted
        assert min(f.used, f.usage_tokens, f.trailing_tokens) >= 0 and 0 <= (f.percent or 0) <= 100
        assert f.over_window is (f.used > _WINDOW)
    # A load shows what the live session showed, from the stored state or by replaying the messages.
    for state in (m.state(), None):
        loaded = meter(window=_WINDOW)
        loaded.restore(messages, state)
        assert loaded.figures() == m.figures()
