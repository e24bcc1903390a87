"""The `task` tool with the official ACP Python SDK (`agent-client-protocol`, pinned 0.12.1) as the editor
(issue 28, Done-when), through real pipes: the SDK's `spawn_agent_process` starts ama behind the tee of
test_official_sdk.py, and every line both sides wrote is checked against the pinned schema when it closes.

Without `subagents` (all the SDK's typed API can say) the task's progress shows as the task call's content.
With it, the SDK cannot take part: its `ClientCapabilities` has no `subagents` field and drops it from
`initialize`, and its `SessionNotification` has no `subagent_update` variant, so the notification fails its
validation and is dropped (logged) before the client's `session_update` sees it. The second test pins exactly
that (docs/editors.md "Known client differences"); when a later SDK can, it fails and says to update both.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from tests.integration.test_official_sdk import open_session, sdk_ama, step, write_config
from tests.integration.test_tasks_e2e import task_call
from tests.support.harness import Ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

SDK = importlib.metadata.version("agent-client-protocol")


def _script(llm: LLMServer) -> None:
    llm.enqueue(
        {"tool_calls": [task_call("t1", "Read notes.txt", "Read notes", "explore")]},
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "It says heron."},
        {"text": "heron"},
    )


def _text(update: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in update.get("content") or [] if c.get("type") == "content")


async def test_without_subagents_the_sdk_sees_the_task_as_the_task_calls_content(tmp_path):
    from acp import text_block

    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("heron\n")
    with LLMServer() as llm:
        write_config(ama, llm, "openai")
        _script(llm)
        async with sdk_ama(ama, "tasks") as (conn, client, wire, _):
            sid = await open_session(conn, client, ama)
            done = await step(conn.prompt(session_id=sid, prompt=[text_block("go")]), "session/prompt", 15)
            assert done.stop_reason == "end_turn"
            [call] = [u for u in client.of(sid, "tool_call") if u["title"].startswith("Task")]
            updates = [u for u in client.of(sid, "tool_call_update") if u["toolCallId"] == call["toolCallId"]]
            shown = "\n".join(_text(u) for u in updates)
            assert "notes.txt" in shown and "heron" in shown  # the task's call as a line, its answer
            assert updates[-1]["status"] == "completed"
            figures = [u["_meta"]["ama"]["task"] for u in updates if "_meta" in u]
            assert figures and figures[-1]["agent"] == "explore" and figures[-1]["tokens"] > 0  # its own figures
            assert all("sessionId" not in f for f in figures)
            assert {s for s, _ in client.updates} == {sid}  # no session of the task's own
            assert not [
                m
                for m in wire.received()
                if (m.get("params") or {}).get("update", {}).get("sessionUpdate") == "subagent_update"
            ]


async def test_the_sdk_cannot_advertise_subagents_nor_receive_a_subagent_update(tmp_path):
    """The limit of agent-client-protocol 0.12.1, shown step by step."""
    from acp import PROTOCOL_VERSION, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    if SDK != "0.12.1":
        pytest.fail(f"the SDK is {SDK}: check whether it handles `subagents` now, and update this test and docs")
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("heron\n")
    with LLMServer() as llm:
        write_config(ama, llm, "openai")
        _script(llm)
        async with sdk_ama(ama, "subagents") as (conn, client, wire, _):
            # 1. The typed API drops the field: `initialize` goes out without it.
            typed = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True), subagents={})  # type: ignore[call-arg]  # unknown to the SDK: the point
            await step(conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=typed), "initialize")
            [init] = [m for m in wire.sent if m.get("method") == "initialize"]
            assert "subagents" not in init["params"].get("clientCapabilities", {})

            # 2. Advertised anyway, by the SDK's own connection underneath (a private attribute: no public way).
            raw = {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": True}, "subagents": {}},
                "clientInfo": Implementation(name="acp-python-sdk-test", version="0").model_dump(by_alias=True),
            }
            await step(conn._conn.send_request("initialize", raw), "initialize with subagents")
            new = await step(conn.new_session(cwd=str(ama.workspace.resolve()), mcp_servers=[]), "session/new")
            sid = new.session_id
            done = await step(conn.prompt(session_id=sid, prompt=[text_block("go")]), "session/prompt", 15)
            assert done.stop_reason == "end_turn"
            task_sid = f"{sid}.task-1"

            # ama did its part: the task's session announced on the parent (the tee's copy of its stdout, schema-checked).
            announced = [
                m["params"]["update"]
                for m in wire.received()
                if m.get("method") == "session/update"
                and m["params"]["sessionId"] == sid
                and m["params"]["update"]["sessionUpdate"] == "subagent_update"
            ]
            assert [u["sessionId"] for u in announced] == [task_sid, task_sid]
            # 3. The SDK dropped both `subagent_update`s before its client; only the task's ordinary updates came.
            assert not [u for _, u in client.updates if u["sessionUpdate"] == "subagent_update"]
            assert client.of(task_sid, "user_message_chunk") and client.of(task_sid, "tool_call")
