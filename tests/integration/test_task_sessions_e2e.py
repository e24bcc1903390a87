"""A finished task loaded by its session id, `<parent id>.task-<n>` (session/tasks/stored.py, issue 28 point 6),
through real pipes: ama as the parent on the local model server, ama's client as the editor. The load replays
the task's own conversation and reports its meter; a prompt on it is refused (a task's session is restricted);
a bad id is an unknown session; the parent's delete takes the task along."""

from __future__ import annotations

from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess
from ama_acp.client.handlers import RpcError
from tests.integration.test_cancel_e2e import start
from tests.integration.test_subagents_e2e import SUBAGENTS
from tests.integration.test_tasks_e2e import KEY, configure, stats, task_call
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


def _open(sid: str, ama: Ama) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []}


async def _refused(conn: AgentProcess, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await conn.request(method, params)
    return caught.value


async def _parent_with_a_task(ama: Ama, llm: LLMServer) -> tuple[str, dict[str, Any]]:
    (ama.workspace / "notes.txt").write_text("heron\n")
    llm.enqueue(
        {"tool_calls": [task_call("t1", "Read notes.txt", "Read notes", "explore")]},
        {
            "text": "Reading it.",
            "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
            "usage": {"input": 400, "output": 30},
        },
        {"text": "It says heron.", "usage": {"input": 500, "output": 40}},
        {"text": "heron", "usage": {"input": 100, "output": 5}},
    )
    async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
        sid = await start(conn, ama)
        assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
        [figures] = (await stats(conn, sid))["tasks"]
    assert figures["sessionId"] == f"{sid}.task-1"
    return sid, figures


async def test_loading_a_task_replays_its_conversation_and_meter_and_refuses_a_prompt(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        sid, figures = await _parent_with_a_task(ama, llm)
        task_sid = f"{sid}.task-1"
        async with run_ama(ama, env=KEY) as conn:  # any editor, with or without `subagents`, may read a task
            await conn.initialize()
            await conn.request("session/load", _open(task_sid, ama))
            # The whole history came before the response: the task, its text, its call with its result, its answer.
            kinds = [u["sessionUpdate"] for u in conn.updates_for(task_sid)]
            assert kinds[:5] == [
                "user_message_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update",
                "agent_message_chunk",
            ]
            said = conn.updates_for(task_sid)
            assert said[0]["content"]["text"] == "Read notes.txt"
            assert said[1]["content"]["text"] == "Reading it." and said[4]["content"]["text"] == "It says heron."
            call, end = said[2], said[3]
            assert (
                call["kind"] == "read"
                and call.get("status", "pending") == "pending"
                and call["rawInput"] == {"path": "notes.txt"}
            )
            assert end["toolCallId"] == call["toolCallId"] and end["status"] == "completed"
            assert "heron" in end["content"][0]["content"]["text"]
            # After the response: its title and its own meter, from the figures stored with it.
            await conn.wait_for(lambda: bool(conn.updates_for(task_sid, "usage_update")), timeout=5)
            [usage] = conn.updates_for(task_sid, "usage_update")
            assert (usage["used"], usage["size"]) == (figures["contextTokens"], figures["contextWindow"])
            assert usage["cost"] == figures["cost"]
            assert [u["title"] for u in conn.updates_for(task_sid, "session_info_update")] == ["Read notes"]
            assert conn.updates_for(sid) == []  # the parent was not opened

            # Restricted: a prompt (or a mode change) on it is refused, naming the parent to continue in.
            refused = await _refused(
                conn, "session/prompt", {"sessionId": task_sid, "prompt": [{"type": "text", "text": "more"}]}
            )
            assert refused.code == -32602 and sid in refused.message
            assert refused.data == {"sessionId": task_sid, "parentSessionId": sid}
            mode = await _refused(conn, "session/set_mode", {"sessionId": task_sid, "modeId": "full_access"})
            assert mode.code == -32602
            await conn.request("session/close", {"sessionId": task_sid})  # nothing live: still an answer

            # Resume: no replay, only the meter again.
            before = len(conn.updates_for(task_sid))
            await conn.request("session/resume", _open(task_sid, ama))
            await conn.wait_for(lambda: len(conn.updates_for(task_sid, "usage_update")) == 2, timeout=5)
            assert {u["sessionUpdate"] for u in conn.updates_for(task_sid)[before:]} <= {
                "usage_update",
                "session_info_update",
            }

            listed = as_object(await conn.request("session/list", {}))
            assert [s["sessionId"] for s in listed["sessions"]] == [sid]  # tasks belong to their parent

            # The parent still loads as before, and its delete takes the task along.
            await conn.request("session/load", _open(sid, ama))
            await conn.request("session/delete", {"sessionId": sid})
            gone = await _refused(conn, "session/load", _open(task_sid, ama))
            assert gone.code == -32002


async def test_a_task_id_is_checked_strictly_and_only_its_parents_folder_opens_it(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        sid, _ = await _parent_with_a_task(ama, llm)
        (ama.data / "tasks" / "x.task-1.jsonl").write_text("")  # a file a crafted id would like to reach
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            for bad in (
                f"{sid}.task-0",
                f"{sid}.task-01",
                f"{sid}.task-2",  # well formed, never stored
                f"{sid}.task--1",
                f"{sid}.task-1.task-1",
                f"../{sid}.task-1",
                f"{sid}/../{sid}.task-1",
                "x.task-1.jsonl",
                f"{sid}.task-1 ",
                f"{sid}.task-99999999999",
            ):
                for method in ("session/load", "session/resume"):
                    refused = await _refused(conn, method, _open(bad, ama))
                    assert refused.code == -32002, (bad, method, refused.message)
            assert conn.updates_for(f"{sid}.task-1") == []
            elsewhere = {"sessionId": f"{sid}.task-1", "cwd": str(tmp_path), "mcpServers": []}
            refused = await _refused(conn, "session/load", elsewhere)
            assert refused.code == -32602 and "cwd" in refused.message
