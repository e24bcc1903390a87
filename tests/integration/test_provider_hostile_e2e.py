"""A model server that misbehaves, seen from the editor over real pipes: every case ends the turn with a
clear agent message (never a -32603, never a schema-invalid update, never a hang), and the session goes on.

The test server checks tool-call pairing like the real APIs, so a conversation in which ama left a tool call
without its result would be rejected here with a 400.
"""

from __future__ import annotations

import time

import pytest

from ama_acp.client.connection import AgentProcess
from tests.support.harness import Ama, agent_text, local_config, run_ama
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "k" * 16}


def configure(ama: Ama, url: str, kind: str = "openai", *, retries: int = 0, timeout: float = 30.0) -> None:
    ama.config.write_text(local_config(url, kind, retries=retries, timeout=timeout))


def url_of(llm: LLMServer, kind: str) -> str:
    return llm.openai_url if kind == "openai" else llm.anthropic_url


async def start(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    return session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))


DEADLINE = 1.0  # seconds: the provider's `timeout` in the keepalive test


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_keepalive_forever_ends_the_turn_at_the_deadline(tmp_path, kind):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        # A test-sized deadline, still ten keepalives long (each would restart a per-read timeout), and room for the
        # second prompt's whole reply on a loaded machine.
        configure(ama, url_of(llm, kind), kind, timeout=DEADLINE)
        llm.enqueue({"keepalive": 0.1}, {"text": "back again"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            began = time.monotonic()
            result = await conn.prompt(sid, "hi", timeout=20)
            assert result["stopReason"] == "end_turn"
            # the deadline, not a per-read timeout that never fires
            assert DEADLINE - 0.1 <= time.monotonic() - began < 10
            assert "did not answer in time" in agent_text(conn, sid)
            again = await conn.prompt(sid, "again", timeout=10)
            assert again["stopReason"] == "end_turn" and agent_text(conn, sid).endswith("back again")


OPENAI_BAD = [
    {"choices": [{"index": 0, "delta": {"content": 12345}}]},
    {"choices": "not a list"},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": 7}}]}}]},
]
ANTHROPIC_BAD = [
    {"type": "content_block_start", "index": 0, "content_block": {"text": "no type"}},
    {"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "never started"}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": 5, "name": "ls"}},
]


@pytest.mark.parametrize(
    ("kind", "bad"),
    [("openai", b) for b in OPENAI_BAD] + [("anthropic", b) for b in ANTHROPIC_BAD],
)
async def test_a_chunk_of_the_wrong_shape_is_a_message_not_an_internal_error(tmp_path, kind, bad):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, url_of(llm, kind), kind)
        head = (
            {"choices": [{"index": 0, "delta": {"content": "Start. "}}]}
            if kind == "openai"
            else {"type": "message_start", "message": {"usage": {"input_tokens": 5}}}
        )
        llm.enqueue({"events": [head, bad]}, {"text": "fine now", "usage": {"input": 30, "output": 2}})
        async with run_ama(ama, env=KEY) as conn:  # run_ama checks every line against the ACP schema
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=15)
            assert result["stopReason"] == "end_turn"
            assert "cannot read" in agent_text(conn, sid)
            again = await conn.prompt(sid, "again", timeout=10)
            assert again["stopReason"] == "end_turn" and agent_text(conn, sid).endswith("fine now")
        assert llm.rejections == []


async def test_a_100_mb_error_body_is_cut_short(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"huge": 100 * 1024 * 1024, "status": 500})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            began = time.monotonic()
            result = await conn.prompt(sid, "hi", timeout=20)
            assert result["stopReason"] == "end_turn" and time.monotonic() - began < 10
            assert "server error" in agent_text(conn, sid)
        assert llm.requests[0].sent < 16 * 1024 * 1024  # ama hung up long before the 100 MB


async def test_one_8_mib_text_delta_reaches_the_editor_whole(tmp_path):
    ama = Ama(tmp_path)
    big = "z" * (8 * 1024 * 1024)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": big, "chunk_size": len(big), "usage": {"input": 10, "output": 2_000_000}})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=60)
            assert result["stopReason"] == "end_turn"
            assert agent_text(conn, sid) == big


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({"raw": "<html><title>Sign in</title></html>", "content_type": "text/html"}, "HTML page (Sign in)"),
        ({"raw": b""}, "without sending anything"),
        ({"raw": b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n'}, "not valid UTF-8"),
        ({"raw": '{"error": {"message": "model warming up"}}', "content_type": "application/json"}, "warming up"),
    ],
    ids=["html", "empty", "bad-utf8", "json-error-200"],
)
async def test_bodies_that_are_not_streams(tmp_path, reply, says):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(reply)
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=15)
            assert result["stopReason"] == "end_turn"
            assert says in agent_text(conn, sid)


async def test_anthropic_error_event_mid_stream(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.anthropic_url, "anthropic")
        llm.enqueue(
            {
                "events": [
                    {"type": "message_start", "message": {}},
                    {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}},
                ]
            }
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=15)
            assert result["stopReason"] == "end_turn" and "prompt is too long" in agent_text(conn, sid)


async def test_usage_figures_that_are_not_counts_do_not_break_the_turn(tmp_path):
    ama = Ama(tmp_path)
    usage = {"prompt_tokens": 1.5, "completion_tokens": -4, "total_tokens": 2**64}
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {
                "events": [
                    {"choices": [{"index": 0, "delta": {"content": "counted?"}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": usage},
                    "[DONE]",
                ]
            }
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "hi", timeout=15)
            assert result["stopReason"] == "end_turn" and agent_text(conn, sid) == "counted?"
            # The figures the server got wrong are unknown: no update claims 2**64 or a negative count.
            for u in conn.updates_for(sid, "usage_update"):
                assert 0 <= u["used"] < 2**53


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_tool_loop_sends_paired_calls_and_results(tmp_path, kind):
    """Two rounds of tool calls (one to a tool that does not exist, one with arguments that are not JSON),
    then an answer: every request the strict server accepted, so no call was left without its result."""
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("alpha\n")
    with LLMServer() as llm:
        configure(ama, url_of(llm, kind), kind)
        llm.enqueue(
            {"tool_calls": [{"id": "call_1", "name": "no_such_tool", "arguments": {}}]},
            {
                "tool_calls": [
                    {"id": "call_2", "name": "read_file", "arguments": "{not json"},
                    {"id": "call_3", "name": "read_file", "arguments": {"path": "a.txt"}},
                ]
            },
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "go", timeout=30)
            assert result["stopReason"] == "end_turn" and agent_text(conn, sid).endswith("done")
        assert llm.rejections == [] and len(llm.requests) == 3


async def test_a_stream_that_breaks_after_a_complete_tool_call_leaves_no_dangling_call(tmp_path):
    """Anthropic sends a whole tool_use block, then the connection drops before message_stop. The reply
    failed; the next prompt's request must not carry that tool call without a result."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.anthropic_url, "anthropic")
        call = {"id": "toolu_1", "name": "read_file", "arguments": {"path": "a.txt"}}
        # message_start, ping, text block (start, 1 delta, stop), tool block (start, 1 delta, stop): 8 events
        llm.enqueue(
            {"text": "Let me", "tool_calls": [call], "chunk_size": 100, "break_after": 8},
            {"text": "recovered"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            first = await conn.prompt(sid, "go", timeout=15)
            assert first["stopReason"] == "end_turn" and "broke off" in agent_text(conn, sid)
            second = await conn.prompt(sid, "try again", timeout=15)
            assert second["stopReason"] == "end_turn"
            assert llm.rejections == [], llm.rejections[0][1]
            assert agent_text(conn, sid).endswith("recovered")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stop", ["refusal", "max_tokens"])
async def test_tool_calls_in_a_refused_or_cut_reply_leave_no_dangling_call(tmp_path, kind, stop):
    """A reply that carries a tool call but stops for refusal or max_tokens: whatever the loop does with the
    call, the next request must pair it with a result (or drop it), or the real API answers 400."""
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("alpha\n")
    with LLMServer() as llm:
        configure(ama, url_of(llm, kind), kind)
        call = {"id": "call_9", "name": "read_file", "arguments": {"path": "a.txt"}}
        llm.enqueue({"text": "hm", "tool_calls": [call], "stop": stop}, {"text": "second"}, {"text": "third"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "go", timeout=15)
            again = await conn.prompt(sid, "again", timeout=15)
            assert again["stopReason"] == "end_turn"
        assert llm.rejections == [], llm.rejections[0][1]
        assert len(llm.requests) >= 2
