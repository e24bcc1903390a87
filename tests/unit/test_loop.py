"""The agent loop in-process (agent/loop.py), with a scripted provider and a recording host
(tests/support/fakes.py): what `run_turn` promises on the normal paths, for each kind of failing call, on
cancel, on provider failures and limits, and when the host itself breaks.

test_loop_hostile.py covers hostile model output; this file pins the ordinary contract.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.agent import events as ev
from ama_acp.agent.loop import CANCELLED_FOR_MODEL, CANCELLED_FOR_PERSON, Refusal, run_turn
from ama_acp.conversation.messages import (
    AssistantMessage,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.providers import base as pb
from ama_acp.tools.base import ToolError, ToolResult
from tests.support.conversation import paired_everywhere
from tests.support.fakes import FakeHost, Hang, Scripted, blocks, calls, raises, returns, text
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.anyio

PROMPT = UserMessage([TextPart("go")])


def kinds(host: FakeHost) -> list[str]:
    return [type(e).__name__ for e in host.events]


def assert_every_call_closed(host: FakeHost) -> None:
    assert paired_everywhere(host.messages), host.messages
    counts = host.final_status_counts()
    assert all(n == 1 for n in counts.values()), counts


# --- the normal paths -----------------------------------------------------------------------------------


async def test_a_text_reply_ends_the_turn_with_one_assistant_message_and_its_chunks_in_order():
    usage = Usage(input=10, output=2)
    reply: list[Scripted] = [
        pb.ThinkingDelta("hm"),
        pb.ThinkingDelta("", signature="sig"),
        pb.TextDelta("Hel"),
        pb.TextDelta("lo"),
        pb.Finished("end_turn", usage),
    ]
    host = FakeHost([reply])
    assert await run_turn(host, PROMPT) == "end_turn"
    assert host.messages[0] == PROMPT
    (answer,) = host.messages[1:]
    assert answer == AssistantMessage(
        content=[ThinkingPart("hm", "sig"), TextPart("Hello")], model="fake-model", stop="end_turn", usage=usage
    )
    assert [(type(e).__name__, getattr(e, "text", None)) for e in host.events] == [
        ("ThoughtChunk", "hm"),
        ("TextChunk", "Hel"),
        ("TextChunk", "lo"),
    ]
    assert len({e.message_id for e in host.of(ev.TextChunk) + host.of(ev.ThoughtChunk)}) == 1
    assert host.after_messages == [answer]
    assert len(host.p.requests) == 1 and host.before_requests == 1
    assert host.p.requests[0].messages == [PROMPT]


async def test_a_tool_call_is_approved_run_and_its_result_carried_by_the_next_request():
    host = FakeHost(
        [calls(("c1", "read", '{"path": "a.py"}')), text("done")],
        {"read": returns("contents of a.py")},
    )
    assert await run_turn(host, PROMPT) == "end_turn"
    assert kinds(host) == ["ToolCallRequested", "ToolCallStarted", "ToolCallFinished", "TextChunk"]
    requested = host.of(ev.ToolCallRequested)[0]
    assert (requested.wire_id, requested.name, requested.title, requested.raw_input) == (
        "w1-c1",
        "read",
        "Title of read",
        {"path": "a.py"},
    )
    assert [(c.wire_id, a) for c, a in host.approved] == [("w1-c1", {"path": "a.py"})]
    assert host.ran == [("read", {"path": "a.py"}, "w1-c1")]
    _, asked, result, _ = host.messages
    assert isinstance(asked, AssistantMessage) and asked.tool_calls == [ToolCallPart("c1", "read", '{"path": "a.py"}')]
    assert result == ToolResultMessage("c1", "read", [TextPart("contents of a.py")], is_error=False)
    assert host.p.requests[1].messages == [PROMPT, asked, result]
    assert host.of(ev.ToolCallFinished)[0].result == ToolResult("contents of a.py")


async def test_several_calls_in_one_message_get_their_results_in_the_order_of_the_calls():
    host = FakeHost(
        [calls(("x", "b", "{}"), ("y", "a", "{}"), ("z", "b", '{"n": 2}')), text("ok")],
        {"a": returns("A"), "b": returns("B")},
    )
    assert await run_turn(host, PROMPT) == "end_turn"
    assert [(r.tool_call_id, r.text) for r in host.results()] == [("x", "B"), ("y", "A"), ("z", "B")]
    assert [name for name, _, _ in host.ran] == ["b", "a", "b"]
    # each call is announced, started and finished before the next one is announced
    per_call = [(type(e).__name__, getattr(e, "wire_id", None)) for e in host.events]
    assert per_call == [
        (kind, wid)
        for wid in ("w1-x", "w2-y", "w3-z")
        for kind in ("ToolCallRequested", "ToolCallStarted", "ToolCallFinished")
    ] + [("TextChunk", None)]
    assert_every_call_closed(host)


async def test_a_refused_call_does_not_run_the_model_gets_for_model_and_the_person_for_person():
    async def refuse(call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
        return Refusal("Model: do not retry.", "You said no.") if call.name == "write" else None

    host = FakeHost(
        [calls(("c1", "write", "{}"), ("c2", "read", "{}")), text("ok")],
        {"write": returns("written"), "read": returns("read")},
        approve=refuse,
    )
    assert await run_turn(host, PROMPT) == "end_turn"
    assert [name for name, _, _ in host.ran] == ["read"]
    refused, allowed = host.results()
    assert refused.is_error and refused.text == "Model: do not retry."
    assert not allowed.is_error and allowed.text == "read"
    finished = {e.wire_id: e for e in host.of(ev.ToolCallFinished)}
    assert finished["w1-c1"].shown == "You said no." and finished["w1-c1"].result.text == "Model: do not retry."
    assert [e.wire_id for e in host.of(ev.ToolCallStarted)] == ["w2-c2"]  # a refused call never starts
    assert_every_call_closed(host)


@pytest.mark.parametrize(
    ("name", "arguments", "tool", "expected"),
    [
        ("nope", "{}", None, "There is no tool named 'nope'."),
        ("t", "{not json", returns("never"), "are not a valid JSON object"),
        ("t", "[1, 2]", returns("never"), "must be a JSON object"),
        ("t", "{}", raises(ToolError("no such file: x")), "no such file: x"),
        ("t", "{}", raises(RuntimeError("kaput")), "t failed unexpectedly: RuntimeError: kaput"),
    ],
    ids=["unknown-tool", "bad-json", "json-not-object", "tool-error", "tool-bug"],
)
@pytest.mark.allow_traceback  # the tool-bug case logs its traceback on purpose
async def test_a_failing_call_gets_one_error_result_and_one_final_status_and_the_turn_goes_on(
    name, arguments, tool, expected
):
    tools = {"t": tool} if tool is not None else {}
    host = FakeHost(
        [calls(("c1", name, arguments), ("c2", "ok", "{}")), text("after")], {**tools, "ok": returns("fine")}
    )
    assert await run_turn(host, PROMPT) == "end_turn"
    failed, fine = host.results()
    assert failed.is_error and expected in failed.text
    assert not fine.is_error and fine.text == "fine"
    assert_every_call_closed(host)
    (fin,) = [e for e in host.of(ev.ToolCallFinished) if e.wire_id == "w1-c1"]
    assert fin.result.is_error and expected in fin.result.text
    assert len(host.p.requests) == 2 and host.p.requests[1].messages[-2:] == [failed, fine]
    assert host.assistants()[-1].text == "after"
    if tool is None or arguments != "{}":
        assert [n for n, _, _ in host.ran] == ["ok"]  # the broken call never reached a tool
        assert [c.wire_id for c, _ in host.approved] == ["w2-c2"]  # …nor the approval


async def test_an_unknown_tool_is_still_shown_to_the_person_with_kind_other():
    host = FakeHost([calls(("c1", "nope", '{"a": 1}'))])
    await run_turn(host, PROMPT)
    (requested,) = host.of(ev.ToolCallRequested)
    assert (requested.name, requested.kind, requested.raw_input) == ("nope", "other", {"a": 1})


# --- cancel ---------------------------------------------------------------------------------------------


async def test_cancel_while_a_tool_runs_gives_every_open_call_a_cancelled_result_and_propagates():
    started = anyio.Event()
    host = FakeHost(
        [calls(("a", "ok", "{}"), ("b", "slow", "{}"), ("c", "ok", "{}"))],
        {"ok": returns("fine"), "slow": blocks(started)},
    )
    returned: list[str] = []

    async def turn() -> None:
        returned.append(await run_turn(host, PROMPT))

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn)
            with anyio.fail_after(5):
                await started.wait()
            scope.cancel()
    # run_turn does not swallow the cancel: its caller (the session) answers stopReason "cancelled"
    assert scope.cancelled_caught and returned == []
    assert [(r.tool_call_id, r.text) for r in host.results()] == [
        ("a", "fine"),
        ("b", CANCELLED_FOR_MODEL),
        ("c", CANCELLED_FOR_MODEL),
    ]
    assert_every_call_closed(host)
    finished = {e.wire_id: e for e in host.of(ev.ToolCallFinished)}
    assert finished["w2-b"].shown == CANCELLED_FOR_PERSON
    assert "w3-c" not in finished  # never announced, so no status for the person; the model has its result
    assert len(host.p.requests) == 1


async def cancel_at_hang(host: FakeHost) -> bool:
    """Run a turn until its provider hangs, cancel it there; whether the cancel was caught."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_turn, host, PROMPT)
            with anyio.fail_after(5):
                await host.p.streaming.wait()
            scope.cancel()
    return scope.cancelled_caught


async def test_cancel_while_the_provider_streams_keeps_the_text_shown_and_drops_unfinished_calls():
    host = FakeHost([[pb.TextDelta("partial "), pb.ToolCallEvent("c1", "ok", "{}"), pb.TextDelta("answer"), Hang()]])
    assert await cancel_at_hang(host)
    assert host.messages == [PROMPT, AssistantMessage([TextPart("partial "), TextPart("answer")], stop="cancelled")]
    assert paired_everywhere(host.messages) and host.of(ev.ToolCallRequested) == []


async def test_cancel_before_any_text_streams_appends_nothing_but_the_prompt():
    host = FakeHost([[Hang()]])
    assert await cancel_at_hang(host) and host.messages == [PROMPT]


# --- provider events and limits -------------------------------------------------------------------------


async def test_retrying_mid_stream_drops_the_partial_message_and_announces_the_retry():
    reply: list[Scripted] = [
        pb.TextDelta("doomed"),
        pb.ToolCallEvent("old", "ok", "{}"),
        pb.Retrying(1, 0.5, "503"),
        pb.TextDelta("fresh"),
        pb.Finished("end_turn"),
    ]
    host = FakeHost([reply], {"ok": returns("x")})
    assert await run_turn(host, PROMPT) == "end_turn"
    assert host.messages[1:] == [AssistantMessage([TextPart("fresh")], model="fake-model")]
    assert kinds(host) == ["TextChunk", "Retrying", "TextChunk"]
    assert host.of(ev.Retrying) == [ev.Retrying(1, 0.5, "503")]
    assert host.ran == []
    first, second = host.of(ev.TextChunk)
    assert first.message_id != second.message_id  # the client replaces the superseded message


@pytest.mark.parametrize("shown", ["", "half an ans"])
async def test_a_failure_tells_the_person_keeps_the_text_shown_and_ends_the_turn(shown):
    failure = pb.Failure("rate_limit", "Too many requests.", 429)
    reply: list[Scripted] = [pb.TextDelta(shown)] if shown else []
    reply += [pb.ToolCallEvent("c", "ok", "{}"), failure]
    host = FakeHost([reply, text("never")], {"ok": returns("x")})
    assert await run_turn(host, PROMPT) == "end_turn"
    assert host.provider_failures == [failure]
    expected = [PROMPT] + ([AssistantMessage([TextPart(shown)], stop="error")] if shown else [])
    assert host.messages == expected
    assert len(host.p.requests) == 1 and host.ran == []


async def test_a_stream_that_ends_without_finished_is_a_stream_failure():
    host = FakeHost([[pb.TextDelta("and then")]])
    assert await run_turn(host, PROMPT) == "end_turn"
    (failure,) = host.provider_failures
    assert failure.kind == "stream" and "ended unexpectedly" in failure.message
    assert host.messages == [PROMPT, AssistantMessage([TextPart("and then")], stop="error")]


async def test_max_tokens_without_calls_ends_the_turn_max_tokens():
    host = FakeHost([text("cut o", stop="max_tokens")])
    assert await run_turn(host, PROMPT) == "max_tokens"
    assert len(host.p.requests) == 1 and host.assistants()[0].stop == "max_tokens"


async def test_max_tokens_with_complete_calls_runs_them_and_goes_on():
    host = FakeHost([calls(("c1", "ok", "{}"), stop="max_tokens"), text("done")], {"ok": returns("fine")})
    assert await run_turn(host, PROMPT) == "end_turn"
    assert [r.text for r in host.results()] == ["fine"] and len(host.p.requests) == 2


async def test_refusal_without_calls_ends_the_turn_refusal():
    host = FakeHost([text("I won't.", stop="refusal")])
    assert await run_turn(host, PROMPT) == "refusal"


async def test_max_turn_requests_ends_the_turn_with_every_call_answered():
    forever = [calls((f"c{i}", "ok", "{}")) for i in range(10)]
    host = FakeHost(forever, {"ok": returns("again")}, max_turn_requests=3)
    assert await run_turn(host, PROMPT) == "max_turn_requests"
    assert len(host.p.requests) == 3 and host.before_requests == 3
    assert [r.tool_call_id for r in host.results()] == ["c0", "c1", "c2"]
    assert_every_call_closed(host)


# --- a host that breaks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("at", [1, 2, 3], ids=["assistant-message", "first-result", "second-result"])
@pytest.mark.allow_traceback  # the injected host bug is logged with its traceback
async def test_a_host_append_that_raises_ends_the_turn_with_a_message_and_no_exception(at):
    host = FakeHost(
        [calls(("a", "ok", "{}"), ("b", "ok", "{}")), text("never")], {"ok": returns("fine")}, fail_append=at
    )
    assert await run_turn(host, PROMPT) == "end_turn"
    (told,) = host.turn_failures
    assert "internal error" in told and "HostBug" in told
    assert len(host.p.requests) == 1  # the turn stopped
    # every call the person saw has its final status, whatever append did
    assert all(n == 1 for n in host.final_status_counts().values())
    if at == 1:
        assert host.messages == [PROMPT]
    else:  # the call whose result append lost is the host's loss; the other call still has its own result
        assert [r.tool_call_id for r in host.results()] == (["b"] if at == 2 else ["a"])


@pytest.mark.allow_traceback
async def test_a_host_append_that_raises_on_the_prompt_is_a_failed_turn_not_an_exception():
    host = FakeHost([text("never")], fail_append=0)
    assert await run_turn(host, PROMPT) == "end_turn"
    assert host.turn_failures


@pytest.mark.allow_traceback  # the injected host bug is logged with its traceback
async def test_a_host_emit_that_raises_while_text_streams_ends_the_turn_with_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host = FakeHost([text("hello")])

    async def broken_emit(event: ev.AgentEvent) -> None:
        raise RuntimeError("client gone")

    monkeypatch.setattr(host, "emit", broken_emit)  # the one seam this test breaks
    assert await run_turn(host, PROMPT) == "end_turn"
    assert host.turn_failures and "RuntimeError: client gone" in host.turn_failures[0]


# --- property: whatever the model and the tools do ------------------------------------------------------

OUTCOMES = ["ok", "error_result", "tool_error", "crash", "refuse", "unknown"]
TOOLS = {
    "ok": returns("fine"),
    "error_result": returns("it failed", is_error=True),
    "tool_error": raises(ToolError("bad input")),
    "crash": raises(ZeroDivisionError("bug")),
    "refuse": returns("never runs"),
}


async def _refuse_by_name(call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
    return Refusal("no", "No.") if call.name == "refuse" else None


def _reply(draw_kind: str, outcomes: list[str], n: int, arg_text: str) -> list[Scripted]:
    specs = [(f"r{n}c{i}", outcome, arg_text) for i, outcome in enumerate(outcomes)]
    if draw_kind == "text":
        return text("words")
    if draw_kind == "calls":
        return calls(*specs)
    if draw_kind == "calls_then_failure":
        return [pb.TextDelta("so"), *calls(*specs)[:-1], pb.Failure("server", "boom")]
    if draw_kind == "retry_then_calls":
        return [pb.ToolCallEvent("stale", "ok", "{}"), pb.Retrying(1, 0.0, "x"), *calls(*specs)]
    if draw_kind == "max_tokens":
        return calls(*specs, stop="max_tokens") if specs else text("cut", stop="max_tokens")
    if draw_kind == "truncated":
        return [pb.TextDelta("and")]
    raise AssertionError(draw_kind)


REPLY = st.tuples(
    st.sampled_from(["text", "calls", "calls_then_failure", "retry_then_calls", "max_tokens", "truncated"]),
    st.lists(st.sampled_from(OUTCOMES), max_size=4),
    st.sampled_from(["{}", '{"path": "x"}', "{bad", "[]"]),
)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replies=st.lists(REPLY, min_size=1, max_size=5), limit=st.integers(1, 6))
@pytest.mark.allow_traceback  # crashing tools are logged with their tracebacks
def test_property_any_script_and_tool_outcomes_keep_the_conversation_paired_and_never_raise(replies, limit):
    script = [_reply(kind, outcomes, n, args) for n, (kind, outcomes, args) in enumerate(replies)]
    host = FakeHost(script, TOOLS, approve=_refuse_by_name, max_turn_requests=limit)
    stop = anyio.run(run_turn, host, PROMPT)
    assert stop in {"end_turn", "max_tokens", "max_turn_requests"}
    assert_every_call_closed(host)
    assert len(host.p.requests) <= limit
    for request in host.p.requests:  # every request the model got was valid: each call had its result
        assert paired_everywhere(request.messages)
    announced = {e.wire_id for e in host.of(ev.ToolCallRequested)}
    assert {wid for _, _, wid in host.ran} <= announced  # nothing runs unannounced
    assert all(name != "refuse" for name, _, _ in host.ran)


# --- requests the provider accepted (U17: billed even when their usage never comes) --------------------------


async def test_a_finished_request_is_billed_with_its_message_not_as_lost():
    host = FakeHost([[pb.Accepted(), pb.TextDelta("hi"), pb.Finished("end_turn", Usage(input=5, output=1))]])
    assert await run_turn(host, PROMPT) == "end_turn"
    assert host.lost_requests == 0 and len(host.after_messages) == 1


async def test_an_accepted_request_cancelled_mid_stream_is_lost_once():
    host = FakeHost([[pb.Accepted(), pb.TextDelta("partial"), Hang()]])
    assert await cancel_at_hang(host)
    assert host.lost_requests == 1 and host.after_messages == []


async def test_a_request_cancelled_before_the_provider_accepted_it_is_not_billed():
    host = FakeHost([[Hang()]])
    assert await cancel_at_hang(host)
    assert host.lost_requests == 0


@pytest.mark.parametrize(
    ("reply", "lost"),
    [
        # cut off, retried and then finished: the first attempt was billed without usage
        ([pb.Accepted(), pb.TextDelta("x"), pb.Retrying(1, 0.0, "reset"), pb.Accepted(), pb.Finished("end_turn")], 1),
        # a stream that breaks for good after it began
        ([pb.Accepted(), pb.TextDelta("x"), pb.Failure("stream", "lost")], 1),
        # refused before it streamed: not billed
        ([pb.Failure("bad_request", "no")], 0),
        # a stream that just ends (a provider bug) after it began
        ([pb.Accepted(), pb.TextDelta("x")], 1),
    ],
)
async def test_accepted_attempts_whose_usage_never_came_are_each_lost_once(reply, lost):
    host = FakeHost([reply])
    await run_turn(host, PROMPT)
    assert host.lost_requests == lost
