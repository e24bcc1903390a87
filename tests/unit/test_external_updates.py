"""session/tasks/external/updates.py: an external agent's session/update, hostile input, re-built from typed values."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.session.tasks.external.updates import decode_update
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
