"""Compaction (docs/context.md; docs/rules.md E5/U9/U13): /compact and automatic, the handoff saved and
found again on load, failure that replaces nothing and holds automatic compaction."""

from __future__ import annotations

import json

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, agent_text, kinds, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
HANDOFF = "## Goal and current state\nThe user wants notes.txt summarised. HANDOFF-MARKER"


def configure(ama: Ama, url: str, window: int = 100_000, keep: int = 0, retries: int = 0) -> None:
    ama.config.write_text(f"""
model = "local/m"
[providers.local]
kind = "openai"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = {retries}
[[models]]
id = "local/m"
context_window = {window}
price = {{ input = 1.0, output = 2.0, cache_read = 0.1, cache_write = 1.0 }}
[compaction]
keep_tokens = {keep}
""")


async def open_session(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


async def test_manual_compact_replaces_the_context_and_reports_an_estimate(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "First answer " + "x" * 4000, "usage": {"input": 3000, "output": 1000}},
            {"text": HANDOFF, "usage": {"input": 4100, "output": 60}},
            {"text": "after", "usage": {"input": 900, "output": 5}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "Please summarise notes.txt, in French.", timeout=10)
            before = usage_updates(conn, sid)[-1]["used"]
            result = await conn.prompt(sid, "/compact keep the French", timeout=10)
            assert result["stopReason"] == "end_turn"
            updates = conn.updates_for(sid, "compaction_update")
            assert [u["status"] for u in updates] == ["in_progress", "completed"]
            assert updates[0]["compactionId"] == updates[1]["compactionId"]
            last = usage_updates(conn, sid)[-1]
            assert last["_meta"]["ama"]["source"] == "estimate"  # U9 after a compaction (E5)
            assert last["used"] < before
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert stats["billed"]["requests"] == 2 and stats["billed"]["sideRequests"] == 1  # U16
            await conn.prompt(sid, "and now?", timeout=10)
        # The handoff request asked for the checklist and carried the inventory and the focus.
        handoff_req = json.dumps(llm.requests[1].body, ensure_ascii=False)
        assert "Inventory" in handoff_req and "keep the French" in handoff_req
        # The next request carries the handoff, not the old answer.
        body = json.dumps(llm.requests[2].body)
        assert "HANDOFF-MARKER" in body and "x" * 4000 not in body
    folder = ama.data / "sessions" / sid / "compaction-1"
    assert "HANDOFF-MARKER" in (folder / "handoff.md").read_text()
    assert "Please summarise notes.txt, in French." in (folder / "inventory.md").read_text()


async def test_automatic_compaction_at_auto_compact_at_then_load_finds_the_handoff(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "f.txt").write_text("data\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url, window=8_192)  # autoCompactAt = 8,192 - 4,096 (the reserve, capped at half)
        llm.enqueue(
            {
                "text": "OLD-REPLY-MARKER",
                "usage": {"input": 4100, "output": 20},
                "tool_calls": [{"id": "t", "name": "read_file", "arguments": {"path": "f.txt"}}],
            },
            {"text": HANDOFF, "usage": {"input": 3800, "output": 60}},
            {"text": "done", "usage": {"input": 800, "output": 5}},
        )
        async with run_ama(ama, env=ENV) as conn:  # no session.compaction: an agent message instead
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "read f.txt", timeout=15)
            assert result["stopReason"] == "end_turn"
            sources = [(u["used"], u["_meta"]["ama"]["source"]) for u in usage_updates(conn, sid)[1:]]
            assert sources[0] == (4120, "usage")
            assert sources[1][1] == "estimate" and sources[1][0] < 4096, agent_text(conn, sid)
            assert sources[2] == (805, "usage")
            text = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert "Compacted the conversation (automatically)" in text
            last = usage_updates(conn, sid)[-1]
        assert "HANDOFF-MARKER" in json.dumps(llm.requests[2].body)
        llm.enqueue({"text": "resumed", "usage": {"input": 900, "output": 5}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            assert usage_updates(conn, sid)[-1] == last
            await conn.prompt(sid, "continue", timeout=10)
        body = llm.requests[3].body
        assert "HANDOFF-MARKER" in json.dumps(body)  # the rebuilt context, not the old one
        # The reply whose tool result the model had not read yet stayed, with that result (docs/context.md).
        roles = [m["role"] for m in body["messages"]]
        assert roles[:5] == ["system", "user", "assistant", "tool", "assistant"], roles
        assert "OLD-REPLY-MARKER" in json.dumps(body["messages"][2]) and "data" in json.dumps(body["messages"][3])


async def test_failed_compaction_keeps_everything_and_holds_auto_compaction(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, window=8_192)
        llm.enqueue(
            {
                "text": "ONE-MARKER",
                "usage": {"input": 4100, "output": 20},
                "tool_calls": [{"id": "t", "name": "list_dir", "arguments": {"path": "."}}],
            },
            {"status": 500},  # the handoff request fails (no retries configured)
            {"text": "two", "usage": {"input": 4200, "output": 5}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "go", timeout=15)
            assert result["stopReason"] == "end_turn"
            failed = conn.updates_for(sid, "compaction_update")
            assert [u["status"] for u in failed] == ["in_progress", "failed"] and failed[1]["error"]
            last = usage_updates(conn, sid)[-1]
            assert last["used"] == 4205 and "autoCompactAt" not in last["_meta"]["ama"]  # held (U13)
        assert "ONE-MARKER" in json.dumps(llm.requests[2].body)  # nothing was replaced
        assert len(llm.requests) == 3  # not retried on every message


async def test_pruning_at_prune_at_then_load_rebuilds_the_same_context(tmp_path):
    """Pruning (docs/context.md), E5, U9, U14: old tool results become a placeholder at pruneAt."""
    ama = Ama(tmp_path)
    (ama.workspace / "big.txt").write_text("BIG-OUTPUT-LINE\n" * 300)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, window=40_000, keep=0)  # autoCompactAt 23,616; pruneAt 16,531
        llm.enqueue(
            {
                "text": "reading",
                "usage": {"input": 3000, "output": 20},
                "tool_calls": [{"id": "t1", "name": "read_file", "arguments": {"path": "big.txt"}}],
            },
            {
                "text": "again",
                "usage": {"input": 17_000, "output": 20},
                "tool_calls": [{"id": "t2", "name": "list_dir", "arguments": {"path": "."}}],
            },
            {"text": "done", "usage": {"input": 2000, "output": 5}},
        )
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "read big.txt", timeout=15)
            assert result["stopReason"] == "end_turn"
            sources = [(u["used"], u["_meta"]["ama"]["source"]) for u in usage_updates(conn, sid)[1:]]
            assert sources[1] == (17_020, "usage")  # at/over pruneAt, under autoCompactAt
            assert sources[2][1] == "estimate" and sources[2][0] < 16_531  # pruned (E5, U9)
            assert conn.updates_for(sid, "compaction_update") == []
            last = usage_updates(conn, sid)[-1]
        body = json.dumps(llm.requests[2].body)
        assert "BIG-OUTPUT-LINE" not in body and "pruned to save context" in body
        assert "BIG-OUTPUT-LINE" in json.dumps(llm.requests[1].body)  # the model saw it once
        llm.enqueue({"text": "resumed", "usage": {"input": 900, "output": 5}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            assert usage_updates(conn, sid)[-1] == last
            await conn.prompt(sid, "continue", timeout=10)
        body = json.dumps(llm.requests[3].body)
        assert "BIG-OUTPUT-LINE" not in body and "pruned to save context" in body
    # The stored message itself is whole (only the context carries the placeholder).
    assert "BIG-OUTPUT-LINE" in (ama.data / "sessions" / f"{sid}.jsonl").read_text()


async def test_a_handoff_reply_without_usage_leaves_the_cost_unknown_also_after_a_load(tmp_path):
    # The summary request was billed by the provider though it reported nothing: the session's cost is unknown
    # (U17), and the stored billing state says so, so a load does not bring back the old, lower sum.
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "First answer " + "x" * 4000, "usage": {"input": 3000, "output": 1000}},
            {"text": HANDOFF, "usage": None},
        )
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "Please summarise notes.txt " + "in detail " * 2000, timeout=10)
            assert "cost" in usage_updates(conn, sid)[-1]
            await conn.prompt(sid, "/compact", timeout=10)
            assert len(llm.requests) == 2  # the handoff was asked for
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert "cost" not in stats and stats["billed"]["unreported"] == 1
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: bool(usage_updates(conn, sid)))
            assert usage_updates(conn, sid)[-1]["cost"] is None
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert "cost" not in stats and stats["billed"]["unreported"] == 1
