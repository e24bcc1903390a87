"""Calls that used to wedge a session for good, over real pipes against a model server that rejects a
request with a dangling tool call (HTTP 400, as the real APIs do).

Measured before: a NUL byte in a tool path, arguments nested 100,000 levels and a non-string tool name each
made the prompt answer -32603 and left the tool call without a result, so every later request failed —
also after a reload. Now each is that call's error (or the reply's failure) and the next turn works, in
both dialects. And an editor that never answers `terminal/kill` cannot hang a cancelled turn.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.session.editor import workspaces
from tests.support.harness import Ama, local_config, run_ama
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "k" * 12}
DEEP = 100_000


def configure(ama: Ama, llm: LLMServer, dialect: str) -> None:
    url = llm.openai_url if dialect == "openai" else llm.anthropic_url
    ama.config.write_text(local_config(url, dialect))


def call(name: Any, arguments: Any, cid: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "arguments": arguments}], "chunk_size": 1 << 22}


def final_texts(conn: Any, sid: str) -> dict[str, str]:
    out = {}
    for u in conn.updates_for(sid, "tool_call_update"):
        if u.get("status") in ("completed", "failed"):
            out[u["toolCallId"]] = u["content"][-1]["content"]["text"] if u.get("content") else ""
    return out


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_calls_that_used_to_wedge_the_session_fail_alone(tmp_path, dialect):
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("hello\n", encoding="utf-8")
    deep = '{"path": ' + "[" * DEEP + "]" * DEEP + "}"
    with LLMServer() as llm:
        configure(ama, llm, dialect)
        llm.enqueue(
            call("read_file", {"path": "a\u0000.txt"}, "nul"),
            call("read_file", deep, "deep"),
            {"text": "both failed, as they should"},
            call(12345, {"path": "a.txt"}, "num"),  # a non-string tool name: the reply itself is malformed
            {"text": "still here"},
        )
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(str(ama.workspace)))
            first = await conn.prompt(sid, "read it", timeout=30)
            assert first["stopReason"] == "end_turn"
            texts = final_texts(conn, sid)
            assert "NUL" in texts["nul"] or "null" in texts["nul"].lower(), texts["nul"]
            assert "nested too deeply" in texts["deep"] or "not a valid JSON object" in texts["deep"], texts["deep"]
            second = await conn.prompt(sid, "again", timeout=30)
            assert second["stopReason"] == "end_turn"  # the malformed reply ended that turn with a message
            third = await conn.prompt(sid, "once more", timeout=30)
            assert third["stopReason"] == "end_turn"
            said = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert "still here" in said
            assert "Internal error" not in said
        assert llm.rejections == [], "ama sent a tool call without its result"
        # Every request after the bad calls carried them with their results (the strict server checked).
        assert len(llm.requests) == 5
        assert all(r.body is not None for r in llm.requests)


async def test_an_editor_that_never_answers_terminal_kill_cannot_hang_a_cancelled_turn(tmp_path, monkeypatch):
    # The bound on each terminal/* request is the product's 5 s; the test's is 1 s (ama in-process reads the
    # module's value at each request), so the cancel is not waited out for 5 s. What is checked is the same:
    # the turn ends, cancelled, though the kill is never answered. (With AMA_TEST_PROCESSES=1: the 5 s.)
    monkeypatch.setattr(workspaces, "TERMINAL_TIMEOUT", 1.0)
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm, "openai")
        llm.enqueue(call("run_command", {"command": "sleep 30"}, "c1"), {"text": "next"})
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=True, terminal=True)) as conn:
            kills: list[dict[str, Any]] = []

            async def never(params: dict[str, Any]) -> dict[str, Any]:
                kills.append(params)
                await anyio.sleep_forever()
                raise AssertionError("unreachable")

            conn.set_handler("terminal/kill", never)
            await conn.initialize()
            sid = session_id(await conn.new_session(str(ama.workspace)))
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "full_access"})
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            # The command runs in the editor's terminal once ama waits for its exit.
            await conn.wait_for(lambda: any(m == "terminal/wait_for_exit" for m, _ in conn.requests_received))
            await conn.cancel(sid)
            with anyio.fail_after(15):  # the kill's own deadline is a few seconds, not forever
                result = as_object(await pending.wait(timeout=None))
            assert result["stopReason"] == "cancelled"
            assert kills, "ama asked the editor to kill the command"
            finals = [
                u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")
            ]
            assert [u["toolCallId"] for u in finals] == ["c1"]
            again = await conn.prompt(sid, "again", timeout=15)
            assert again["stopReason"] == "end_turn"
        assert llm.rejections == []
        assert json.dumps(llm.requests[-1].body).count('"tool_call_id": "c1"') == 1


async def test_a_file_name_that_is_not_utf8_is_shown_not_fatal(tmp_path):
    """os.listdir and git hand over undecodable bytes as lone surrogates, which no JSON encoder writes: the
    update, the session file and the next model request must all still be written."""
    ama = Ama(tmp_path)
    (ama.workspace / os.fsdecode(b"bad-\xff.txt")).write_bytes(b"alpha\n")
    with LLMServer() as llm:
        configure(ama, llm, "openai")
        llm.enqueue(
            {
                "tool_calls": [
                    {"id": "ls", "name": "list_dir", "arguments": {}},
                    {"id": "grep", "name": "search", "arguments": {"pattern": "alpha"}},
                    {"id": "find", "name": "find_files", "arguments": {"pattern": "*.txt"}},
                ]
            },
            {"text": "listed"},
            {"text": "next turn"},
        )
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(str(ama.workspace)))
            assert (await conn.prompt(sid, "look", timeout=30))["stopReason"] == "end_turn"
            texts = final_texts(conn, sid)
            assert set(texts) == {"ls", "grep", "find"}
            assert all("bad-\ufffd.txt" in texts[k] for k in texts), texts
            assert (await conn.prompt(sid, "again", timeout=30))["stopReason"] == "end_turn"
        assert llm.rejections == [] and len(llm.requests) == 3
        assert "cannot" not in ama.log_text().lower() or "session file" not in ama.log_text()
    async with run_ama(ama, env=KEY) as conn:  # the session file took every entry and loads
        await conn.initialize()
        await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        replayed = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "completed"]
        assert len(replayed) == 3
