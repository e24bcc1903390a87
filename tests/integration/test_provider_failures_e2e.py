"""Provider failures seen from the editor: a clear agent message, a finished turn, a loadable session."""

from __future__ import annotations

import pytest

from ama_acp.client.connection import AgentProcess
from tests.support.harness import Ama, agent_text, local_config, run_ama
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


def configure(ama: Ama, url: str, kind: str = "openai", retries: int = 1) -> None:
    ama.config.write_text(local_config(url, kind, retries=retries))


async def start(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    return session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_401_tells_the_person_how_to_set_the_key(tmp_path, kind):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url if kind == "openai" else llm.anthropic_url, kind)
        llm.enqueue({"status": 401})
        async with run_ama(ama, env={"LOCAL_TEST_KEY": "sk-wrong-key-123456"}) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=10)
            assert result["stopReason"] == "end_turn"
            text = agent_text(conn, sid)
            assert "LOCAL_TEST_KEY" in text and "sk-wrong-key-123456" not in text
    assert "sk-wrong-key-123456" not in ama.log_text()
    for f in (ama.data / "sessions").glob("*.jsonl"):
        assert "sk-wrong-key-123456" not in f.read_text()


async def test_429_with_retry_after_then_success(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, retries=2)
        llm.enqueue({"status": 429, "retry_after": "0"}, {"text": "recovered", "usage": {"input": 50, "output": 2}})
        async with run_ama(ama, env={"LOCAL_TEST_KEY": "k" * 12}) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=10)
            assert result["stopReason"] == "end_turn"
            text = agent_text(conn, sid)
            assert "Retrying" in text and text.endswith("recovered")
            assert len(llm.requests) == 2


async def test_5xx_exhausted_ends_the_turn_with_a_message_and_the_session_survives(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, retries=1)
        llm.enqueue({"status": 500}, {"status": 503}, {"text": "later", "usage": {"input": 60, "output": 2}})
        async with run_ama(ama, env={"LOCAL_TEST_KEY": "k" * 12}) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=20)
            assert result["stopReason"] == "end_turn"
            assert "⚠" in agent_text(conn, sid)
            again = await conn.prompt(sid, "try again", timeout=10)  # the session goes on
            assert again["stopReason"] == "end_turn" and agent_text(conn, sid).endswith("later")
        async with run_ama(ama, env={"LOCAL_TEST_KEY": "k" * 12}) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            users = [u["content"]["text"] for u in conn.updates_for(sid, "user_message_chunk")]
            assert users == ["hi", "try again"]


async def test_broken_stream_is_retried(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.anthropic_url, "anthropic", retries=2)
        llm.enqueue(
            {"text": "half an answer that breaks", "break_after": 3},
            {"text": "whole answer", "usage": {"input": 70, "output": 3}},
        )
        async with run_ama(ama, env={"LOCAL_TEST_KEY": "k" * 12}) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=20)
            assert result["stopReason"] == "end_turn"
            assert agent_text(conn, sid).endswith("whole answer")
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert stats["contextTokens"] == 73  # only the completed reply's usage counts
