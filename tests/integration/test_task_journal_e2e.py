"""Tasks kept beside their session (session/store/task_journal.py, issue 28 point 6): after a
load, `/tasks` and `_ama/session_stats` still list them with their figures; `session/delete` removes them."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_cancel_e2e import start
from tests.integration.test_subagents_e2e import SUBAGENTS, subagent_updates
from tests.integration.test_tasks_e2e import KEY, configure, stats, task_call
from tests.support.harness import Ama, agent_text, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


async def test_a_load_lists_the_tasks_of_earlier_connections_and_a_delete_removes_them(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("heron\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Read notes.txt", "Read notes", "explore")]},
            {
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
                "usage": {"input": 400, "output": 30},
            },
            {"text": "It says heron.", "usage": {"input": 500, "output": 40}},
            {"text": "heron", "usage": {"input": 100, "output": 5}},
        )
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            [before] = (await stats(conn, sid))["tasks"]
        kept = ama.data / "tasks" / f"{sid}.jsonl"
        [line] = kept.read_bytes().splitlines()
        stored = json.loads(line)
        # The task's whole conversation is kept: its prompt, its call, the file it read, its answer.
        assert [m["type"] for m in stored["messages"]] == ["user", "assistant", "tool_result", "assistant"]
        assert "heron" in json.dumps(stored["messages"][2])

        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            [after] = (await stats(conn, sid))["tasks"]
            assert after == before and after["status"] == "completed" and after["tokens"] == 970
            await conn.prompt(sid, "/tasks", timeout=10)
            assert "`explore` — Read notes: completed; 2 requests, 970 tokens billed" in agent_text(conn, sid)
            # A new task after the load is numbered after the kept one: its session id is new to the editor.
            llm.enqueue({"tool_calls": [task_call("t2", "Say hi.", "Greet")]}, {"text": "hi"}, {"text": "ok"})
            assert (await conn.prompt(sid, "again", timeout=20))["stopReason"] == "end_turn"
            assert subagent_updates(conn, sid)[0]["sessionId"] == f"{sid}.task-2"
            assert [t["description"] for t in (await stats(conn, sid))["tasks"]] == ["Read notes", "Greet"]
            await conn.request("session/delete", {"sessionId": sid})
        assert not kept.exists()
