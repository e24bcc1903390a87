"""session/tasks/external/updates.py: an external agent's session/update, hostile input, re-built from typed values."""

from __future__ import annotations

import math
from typing import cast
from unittest.mock import patch

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.config import AgentConfig, Config
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.session.tasks.call_view import TEXT_SHOWN, CallView
from ama_acp.session.tasks.external import agent
from ama_acp.session.tasks.external.updates import ID_CHARS, MAX_TASK_COST_USD, decode_update
from ama_acp.session.tasks.external.view import MAX_QUEUED_BYTES, ExternalSubagentView
from ama_acp.session.tasks.record import ExternalTaskRecord
from ama_acp.session.tasks.subagent_view import SubagentParent
from ama_acp.session.tasks.worker import TaskParent, TaskRuntime
from ama_acp.wire import types as w
from tests.support.hypothesis_profiles import examples

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
kinds = st.sampled_from(
    ["agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan", "usage_update", "other"]
)
fields = st.sampled_from(
    ["content", "toolCallId", "title", "kind", "status", "locations", "entries", "used", "size", "cost", "rawInput"]
)
updates = st.builds(
    lambda kind, body: {"sessionUpdate": kind, **body}, kinds, st.dictionaries(fields, json_values, max_size=6)
)


@settings(max_examples=examples(300))
@given(st.one_of(updates, json_values))
def test_any_update_is_dropped_or_rebuilt_and_nothing_raises(update: object) -> None:
    got = decode_update(update)
    if got is None:
        return
    assert isinstance(
        got, w.ToolCall | w.ToolCallUpdate | w.AgentMessageChunk | w.AgentThoughtChunk | w.Plan | w.UsageUpdate
    )
    msgspec.json.encode(got)  # it can go out
    if isinstance(got, w.ToolCall | w.ToolCallUpdate) and got.title is not None:
        assert got.title.isprintable() and "\n" not in got.title
    if isinstance(got, w.UsageUpdate):
        assert got.used >= 0 and got.size >= 0


def test_only_what_ama_knows_is_carried_over() -> None:
    hostile = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "Run\nit\x1b[2J",
        "kind": "format_disk",
        "rawInput": {"secret": "x"},
        "_meta": {"evil": True},
        "content": [
            {"type": "content", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}},
            {"type": "terminal", "terminalId": "someone-elses"},
            {"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "b", "extra": 1},
        ],
    }
    assert msgspec.to_builtins(decode_update(hostile)) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "Run it\N{REPLACEMENT CHARACTER}[2J",
        "content": [{"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "b"}],
    }
    assert decode_update({"sessionUpdate": "current_mode_update", "currentModeId": "yolo"}) is None
    assert decode_update({"sessionUpdate": "usage_update", "used": 5, "size": 10, "cost": {"amount": -1}}) is None


# --- issue 39: what an agent's updates can make ama hold, and the cost it can make ama believe --------------------

amounts = st.one_of(
    st.floats(min_value=0, allow_nan=False),
    st.integers(0, 10**15),
    st.sampled_from([0.0, MAX_TASK_COST_USD, MAX_TASK_COST_USD + 0.01, 1e9, 1e300]),
)


@settings(max_examples=examples(200))
@given(amounts, st.sampled_from(["USD", "EUR"]))
def test_a_cost_past_the_cap_is_not_forwarded(amount: float, currency: str) -> None:
    got = decode_update(
        {"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": {"amount": amount, "currency": currency}}
    )
    assert isinstance(got, w.UsageUpdate)
    believed = math.isfinite(amount) and (currency != "USD" or amount <= MAX_TASK_COST_USD)
    assert isinstance(got.cost, w.Cost) == believed  # else left out (UNSET): the agent's silence stays silence
    if isinstance(got.cost, w.Cost):
        assert got.cost.amount == amount


class _Parent:
    """What the worker's record keeping touches of its parent: nothing (its requests are not made here)."""

    id = "parent-1"
    mode = "manual"


def worker() -> agent.ExternalWorker:
    record = ExternalTaskRecord(id="call_1", agent="ext", description="d", model="external: x")
    view = CallView(cast(TaskParent, _Parent()), record)
    parent = cast(agent.ExternalTaskParent, _Parent())
    made = agent.ExternalWorker(Config(), parent, record, AgentConfig(command="x"), "task", view)
    made._requests.session_id = "s"  # as after session/new
    return made


big_text = st.one_of(st.text(max_size=30), st.integers(0, 300_000).map(lambda n: "y" * n))
flood = st.lists(
    st.one_of(
        st.builds(lambda t: {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": t}}, big_text),
        st.builds(
            lambda i, t: {"sessionUpdate": "tool_call", "toolCallId": i, "title": t},
            st.one_of(st.text(max_size=8), st.integers(0, 600).map(lambda n: "i" * n)),
            big_text,
        ),
        st.builds(
            lambda a, c: {"sessionUpdate": "usage_update", "used": 1, "size": 10, "cost": {"amount": a, "currency": c}},
            amounts,
            st.sampled_from(["USD", "EUR"]),
        ),
        st.builds(lambda u: u, updates),
    ),
    max_size=40,
)


@settings(max_examples=examples(100), deadline=None)
@given(flood)
def test_whatever_an_agent_floods_what_its_task_keeps_stays_bounded(sent: list[JSONObject]) -> None:
    with patch.object(agent, "ANSWER_CHARS", 500_000), patch.object(agent, "MAX_LINES", 5):
        task = worker()
        for update in sent:
            task._on_update({"sessionId": "s", "update": update})
        r = task.record
        assert len(task.answer()) <= agent.ANSWER_CHARS
        assert len(r.calls) <= agent.MAX_LINES and all(len(i) <= ID_CHARS for i in r.calls)
        assert all(len(line) <= 122 for line in r.lines) and len(r.text) <= 2 * TEXT_SHOWN
        assert r.cost_usd is None or 0 <= r.cost_usd <= MAX_TASK_COST_USD
        # Each bound reached is told once, however often it is reached.
        assert len(task._to_tell) == len(set(task._to_tell)) <= 4


class _Approver:
    memory = None
    rules = None


class _Editor:
    client_request = None  # never called: nothing is sent here


class _SubagentParent(_Parent):
    approver = _Approver()
    rt = _Editor()


def test_what_waits_for_the_editor_is_bounded_in_bytes_and_past_it_updates_are_dropped() -> None:
    record = ExternalTaskRecord(id="call_1", agent="ext", description="d", model="external: x")
    parent = cast(SubagentParent, _SubagentParent())
    view = ExternalSubagentView(cast(TaskRuntime, None), parent, record, "task", "parent-1.task-1")
    chunk = w.AgentMessageChunk(content=w.TextContent(text="z" * 65536))
    taken = [view.take(chunk) for _ in range(2 * MAX_QUEUED_BYTES // 65536)]
    assert taken.count(True) < MAX_QUEUED_BYTES // 65536 + 1 and taken[-1] is False
    assert sum(len(msgspec.json.encode(u)) for u, _ in view._queue) <= MAX_QUEUED_BYTES
    small = w.UsageUpdate(used=1, size=2)
    assert view.take(small) is True  # a small update still fits where a big one did not
