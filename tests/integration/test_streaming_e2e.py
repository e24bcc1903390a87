"""Streamed text through the real subprocess against the local HTTP providers: deltas faster than a frame reach
the editor merged (docs/protocol.md "Streaming"), with nothing reordered, dropped or added, and a load replays
exactly what was streamed."""

from __future__ import annotations

import pytest

from ama_acp.client.connection import AgentProcess
from tests.support.harness import Ama, kinds, local_config, run_ama
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "sk-local-streaming-test-key-000000"}
ANSWER = "".join(f"line {i:05d} of the answer\n" for i in range(2_000))  # 50,000 characters
THOUGHT = "".join(f"step {i:04d}; " for i in range(500))


@pytest.fixture
def llm():
    with LLMServer() as server:
        yield server


def chunks(conn: AgentProcess, sid: str, kind: str) -> list[str]:
    return [u["content"]["text"] for u in conn.updates_for(sid, kind)]


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_fast_deltas_arrive_merged_in_order_and_complete(tmp_path, llm, dialect):
    ama = Ama(tmp_path)
    url = llm.openai_url if dialect == "openai" else llm.anthropic_url
    ama.config.write_text(local_config(url, dialect, window=1_000_000), encoding="utf-8")
    llm.enqueue({"thinking": THOUGHT, "text": ANSWER, "chunk_size": 4, "usage": {"input": 100, "output": 20_000}})
    async with run_ama(ama, env=ENV) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ama.workspace))
        result = await conn.prompt(sid, "stream a long answer", timeout=120)
    assert result["stopReason"] == "end_turn"
    text, thought = chunks(conn, sid, "agent_message_chunk"), chunks(conn, sid, "agent_thought_chunk")
    assert "".join(text) == ANSWER and "".join(thought) == THOUGHT
    # 12,500 text deltas and 3,000 thought deltas: merged into far fewer chunks, the first of each at once.
    assert len(text) < 12_500 // 10 and len(thought) < 3_000 // 10
    assert text[0] == ANSWER[:4] and thought[0] == THOUGHT[:4]
    # The thought comes first, all of it, then the text: a kind never interleaves with the other when merged.
    order = [k for k in kinds(conn, sid) if k in ("agent_thought_chunk", "agent_message_chunk")]
    assert order == sorted(order, key=lambda k: k != "agent_thought_chunk")
    # Nothing of the turn after its usage_update and response (the turn's end flushed everything first).
    after_usage = kinds(conn, sid)[kinds(conn, sid).index("usage_update", len(order)) :]
    assert "agent_message_chunk" not in after_usage


async def test_a_load_replays_what_was_streamed(tmp_path, llm):
    ama = Ama(tmp_path)
    ama.config.write_text(local_config(llm.openai_url, window=1_000_000), encoding="utf-8")
    llm.enqueue({"text": ANSWER, "chunk_size": 3})
    async with run_ama(ama, env=ENV) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ama.workspace))
        await conn.prompt(sid, "stream it", timeout=120)
        streamed = "".join(chunks(conn, sid, "agent_message_chunk"))
    async with run_ama(ama, env=ENV) as conn:
        await conn.initialize()
        await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        replayed = "".join(chunks(conn, sid, "agent_message_chunk"))
    assert streamed == ANSWER == replayed


async def test_a_zero_window_sends_one_chunk_per_delta(tmp_path, llm):
    ama = Ama(tmp_path)
    tail = "[stream]\ncoalesce_window_ms = 0\n"
    ama.config.write_text(local_config(llm.openai_url, window=1_000_000, tail=tail), encoding="utf-8")
    llm.enqueue({"text": ANSWER[:4_000], "chunk_size": 4})
    async with run_ama(ama, env=ENV) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ama.workspace))
        await conn.prompt(sid, "stream it", timeout=120)
    text = chunks(conn, sid, "agent_message_chunk")
    assert "".join(text) == ANSWER[:4_000] and len(text) == 1_000
