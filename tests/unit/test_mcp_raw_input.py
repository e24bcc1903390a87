"""An MCP tool call's rawInput reaches the editor scrubbed (mcp/shown.py `shown_input`): live (session/editor/updates.py),
in a permission request (session/editor/approval.py) and in a load's replay (session/restore.py) alike; ama's own tools'
arguments go as the model wrote them."""

from __future__ import annotations

from ama_acp.agent import events as ev
from ama_acp.mcp.shown import shown_input
from ama_acp.session.editor.updates import to_update
from ama_acp.session.restore import _tool_call_updates
from ama_acp.session.store import entries as en
from ama_acp.wire import types as w

KEYISH = "sk-abcdefghijklmnop1234"
ARGS = {"name": "plan.md", "api_token": "short", "nested": [{"text": KEYISH}]}
SCRUBBED = {"name": "plan.md", "api_token": "[redacted]", "nested": [{"text": "[redacted]"}]}


def test_shown_input_scrubs_mcp_arguments_only() -> None:
    assert shown_input("mcp__notes__write", ARGS) == SCRUBBED
    assert shown_input("write_file", ARGS) == ARGS
    assert shown_input("mcp__notes__write", "not an object") == "not an object"


def test_live_and_replayed_tool_calls_carry_the_scrubbed_input() -> None:
    live = to_update(ev.ToolCallRequested("c1", "mcp__notes__write", "write", "other", [], ARGS))
    assert isinstance(live, w.ToolCall) and live.raw_input == SCRUBBED
    entry = en.ToolCallEntry(
        wire_id="c1", provider_id="c1", name="mcp__notes__write", title="write", kind="other", status="completed",
        raw_input=dict(ARGS),
    )  # fmt: skip
    replayed = _tool_call_updates(entry)[0]
    assert isinstance(replayed, w.ToolCall) and replayed.raw_input == SCRUBBED
