"""Where two features meet, through real pipes and the local model server (issue 22; docs/context.md "Tool
results sized to the window", "A switch while a reply streams", "Cancelled requests", "Compaction"):

- a big tool result on a small window is cut to fit, and a compaction keeps the result the model has not read;
- compaction never loops: a turn stops after MAX_AUTO_PER_TURN automatic compactions;
- a reply is priced and measured as the model that served it, even when the person switches while it streams;
- a request the provider accepted and that was cancelled is billed as interrupted: the cost becomes unknown;
- a compaction cancelled (or cut off by the end of stdin) while its handoff streams ends `failed`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.session.turn.compacting import MAX_AUTO_PER_TURN
from tests.support.harness import Ama, agent_text, kinds, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
HANDOFF = "## 1. Goal and current state\nReading big.txt. HANDOFF-MARKER"


def configure(ama: Ama, url: str, *models: tuple[str, int, str]) -> None:
    """`models`: (id, window, price table or "") — the first is the session's model."""
    tables = "".join(
        f'[[models]]\nid = "{mid}"\ncontext_window = {window}\n' + (f"price = {price}\n" if price else "")
        for mid, window, price in models
    )
    ama.config.write_text(
        f'model = "{models[0][0]}"\n'
        f'[providers.local]\nkind = "openai"\nbase_url = "{url}"\napi_key_env = "LOCAL_TEST_KEY"\nmax_retries = 0\n'
        + tables
        + "[compaction]\nkeep_tokens = 0\n"
    )


CHEAP = "{ input = 1.0, output = 2.0, cache_read = 0.1, cache_write = 1.0 }"
DEAR = "{ input = 10.0, output = 20.0, cache_read = 1.0, cache_write = 10.0 }"


async def open_session(conn: Any, ama: Ama) -> str:
    await conn.initialize()
    sid: str = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def big_file(ama: Ama) -> None:
    # ~60 KB: 1,000 numbered lines, about 15,000 tokens — half a 32K window on its own.
    (ama.workspace / "big.txt").write_text("".join(f"line {i:04d} " + "y" * 50 + "\n" for i in range(1, 1001)))


def read_call(cid: str, usage_input: int) -> dict[str, Any]:
    return {
        "text": "Reading.",
        "usage": {"input": usage_input, "output": 20},
        "tool_calls": [{"id": cid, "name": "read_file", "arguments": {"path": "big.txt"}}],
    }


# --- a big tool result × a small window × compaction ---------------------------------------------------------


async def test_a_big_read_on_a_32k_window_is_cut_to_fit_and_survives_the_compaction_it_triggers(tmp_path):
    ama = Ama(tmp_path)
    big_file(ama)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/small", 32_768, CHEAP))  # autoCompactAt 16,384
        llm.enqueue(
            read_call("r1", 13_000),  # a long conversation already: the result takes it past autoCompactAt
            {"text": HANDOFF, "usage": {"input": 9_000, "output": 60}},
            {"text": "The file has 1,000 lines.", "usage": {"input": 9_500, "output": 10}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "how many lines has big.txt?", timeout=20)
            assert result["stopReason"] == "end_turn"
            compactions = conn.updates_for(sid, "compaction_update")
            assert [c["status"] for c in compactions] == ["in_progress", "completed"]
            tool_call = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "completed"]
            shown = json.dumps(tool_call)
        assert len(llm.requests) == 3, "one compaction, then the model answered"
        # The request after the compaction carries the handoff AND the read the model had not seen yet.
        after = llm.requests[2].body
        assert "HANDOFF-MARKER" in json.dumps(after)
        [result_text] = tool_messages(after)
        assert "line 0001" in result_text
        assert "cut to fit the model's context window" in result_text and "offset=" in result_text
        assert len(result_text) <= 4_096 * 4 + 1_000  # a quarter of autoCompactAt (4,096 tokens), in characters
        assert "line 1000" not in result_text
        assert "line 0001" in shown  # the person sees the head of the same result (the editor gets its first 4 KB)


async def test_a_12kb_read_on_an_8k_window_reaches_the_model_and_the_turn_ends_without_a_loop(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "mid.txt").write_text("".join(f"row {i:04d} " + "z" * 50 + "\n" for i in range(200)))  # 12 KB
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/tiny", 8_192, CHEAP))  # autoCompactAt 4,096
        llm.enqueue(
            {
                "text": "Reading.",
                "usage": {"input": 3_500, "output": 20},  # with the read: past autoCompactAt
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "mid.txt"}}],
            },
            {"text": "It has 200 rows.", "usage": {"input": 4_200, "output": 10}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "how many rows has mid.txt?", timeout=20)
            assert result["stopReason"] == "end_turn"
            # The unread result leaves no room for a handoff: the compaction is refused (no request), automatic
            # compaction is held, and the model reads the result — it still fits the window.
            [refused] = conn.updates_for(sid, "compaction_update")
            assert refused["status"] == "failed" and "not read yet" in refused["error"]
            assert "It has 200 rows." in agent_text(conn, sid)
        assert len(llm.requests) == 2
        answered = [r.body for r in llm.requests if tool_messages(r.body)]
        [result_text] = tool_messages(answered[-1])  # the model read the (cut) file: it was not compacted away
        assert "row 0000" in result_text and "offset=" in result_text


async def test_a_model_that_keeps_reading_stops_after_the_turns_compaction_budget(tmp_path):
    # Results under pruning's minimum and a provider that counts each request near autoCompactAt: every read
    # needs a compaction, and each compaction makes room that the next read fills again.
    ama = Ama(tmp_path)
    (ama.workspace / "small.txt").write_text("a small file\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/small", 32_768, CHEAP))
        for n in range(MAX_AUTO_PER_TURN + 1):
            llm.enqueue(
                {
                    "text": "Reading.",
                    "usage": {"input": 16_380, "output": 20},
                    "tool_calls": [{"id": f"r{n}", "name": "read_file", "arguments": {"path": "small.txt"}}],
                }
            )
            if n < MAX_AUTO_PER_TURN:
                llm.enqueue({"text": HANDOFF, "usage": {"input": 9_000, "output": 60}})
        llm.enqueue({"text": "SHOULD-NOT-BE-ASKED"})
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "read small.txt until you understand it", timeout=30)
            assert result["stopReason"] == "end_turn"
            statuses = [c["status"] for c in conn.updates_for(sid, "compaction_update")]
            assert statuses == ["in_progress", "completed"] * MAX_AUTO_PER_TURN
            text = agent_text(conn, sid)
            assert "Stopped this turn" in text and f"{MAX_AUTO_PER_TURN} times in this turn" in text
            # Every tool call ended; the conversation stays usable.
            calls = {u["toolCallId"] for u in conn.updates_for(sid, "tool_call")}
            ended = {u["toolCallId"] for u in conn.updates_for(sid, "tool_call_update") if u.get("status")}
            assert len(calls) == MAX_AUTO_PER_TURN + 1 and calls <= ended
        assert len(llm.requests) == 2 * MAX_AUTO_PER_TURN + 1  # never the next request after the last read
        assert all("SHOULD-NOT-BE-ASKED" not in json.dumps(r.body) for r in llm.requests)


# --- a model switch × a streaming reply ----------------------------------------------------------------------


async def test_a_switch_while_a_reply_streams_prices_it_as_the_model_that_served_it(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/a", 100_000, CHEAP), ("local/b", 50_000, DEAR))
        llm.enqueue(
            {"text": "x" * 60, "chunk_size": 2, "delay": 0.05, "usage": {"input": 1_000, "output": 10}},
            {"text": "b answers", "usage": {"input": 1_200, "output": 5}},
        )
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            )
            await conn.wait_for(lambda: "agent_message_chunk" in kinds(conn, sid))
            await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/b"})
            assert as_object(await turn.wait(20))["stopReason"] == "end_turn"
            after = usage_updates(conn, sid)[-1]
            # The reply was local/a's: its count is not local/b's figure, and its price is local/a's.
            assert after["size"] == 50_000 and after["_meta"]["ama"]["source"] == "estimate"
            assert after["cost"]["amount"] == pytest.approx((1_000 * 1.0 + 10 * 2.0) / 1e6)
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert stats["model"] == "local/b" and stats["cost"]["amount"] == pytest.approx(0.00102)
            # The new model's own reply measures, at its own price.
            await conn.prompt(sid, "and you?", timeout=10)
            last = usage_updates(conn, sid)[-1]
            assert last["_meta"]["ama"]["source"] == "usage" and last["used"] == 1_205
            assert last["cost"]["amount"] == pytest.approx(0.00102 + (1_200 * 10.0 + 5 * 20.0) / 1e6)


# --- cancel × billing ----------------------------------------------------------------------------------------


async def test_a_reply_cancelled_mid_stream_is_billed_as_interrupted_and_the_cost_becomes_unknown(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/a", 100_000, CHEAP))
        llm.enqueue(
            {"text": "first", "usage": {"input": 500, "output": 5}},
            {"text": "z" * 400, "chunk_size": 2, "delay": 0.05, "usage": {"input": 700, "output": 200}},
        )
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "one", timeout=10)
            assert "cost" in usage_updates(conn, sid)[-1]
            chunks = len(conn.updates_for(sid, "agent_message_chunk"))
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}
            )
            await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) > chunks)
            await conn.cancel(sid)
            assert as_object(await turn.wait(10))["stopReason"] == "cancelled"
            assert usage_updates(conn, sid)[-1]["cost"] is None  # U17: the cancelled request was billed, unpriced
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            billed = stats["billed"]
            assert (billed["requests"], billed["unreported"], billed["interrupted"]) == (2, 1, 1)
            assert "cost" not in stats
            await conn.prompt(sid, "/context", timeout=10)
            assert "cancelled or cut off after the provider accepted it" in agent_text(conn, sid)
        async with run_ama(ama, env=ENV) as conn:  # and so it stays after a load
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            assert usage_updates(conn, sid)[-1]["cost"] is None


async def test_a_request_refused_before_it_streams_is_not_billed(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/a", 100_000, CHEAP))
        llm.enqueue({"text": "first", "usage": {"input": 500, "output": 5}}, {"status": 400, "message": "bad"})
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "one", timeout=10)
            await conn.prompt(sid, "two", timeout=10)
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert stats["billed"]["requests"] == 1 and "interrupted" not in stats["billed"]
            assert stats["cost"]["amount"] == pytest.approx((500 + 10) / 1e6)


# --- cancel × compaction -------------------------------------------------------------------------------------


async def _compact_then(tmp_path: Any, end: str, visible: bool = True) -> tuple[list[dict[str, Any]], str]:
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("notes\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/a", 100_000, CHEAP))
        llm.enqueue(
            {"text": "long answer " * 3_000, "usage": {"input": 2_000, "output": 9_000}},
            {"text": "more", "usage": {"input": 11_100, "output": 5}},
            {"text": HANDOFF * 20, "chunk_size": 3, "delay": 0.05, "usage": {"input": 1_400, "output": 300}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=visible)) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "one", timeout=10)
            await conn.prompt(sid, "two", timeout=10)
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/compact"}]}
            )
            if visible:
                await conn.wait_for(lambda: "compaction_update" in kinds(conn, sid))
            await conn.wait_for(lambda: len(llm.requests) == 3 and llm.requests[2].sent > 0)
            if end == "cancel":
                await conn.cancel(sid)
                assert as_object(await turn.wait(10))["stopReason"] == "cancelled"
                stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
                assert stats["billed"]["interrupted"] == 1 and "cost" not in stats
            else:
                await conn.close()
            return conn.updates_for(sid, "compaction_update"), agent_text(conn, sid)


async def test_a_compaction_cancelled_while_its_handoff_streams_ends_failed(tmp_path):
    updates, _ = await _compact_then(tmp_path, "cancel")
    assert [u["status"] for u in updates] == ["in_progress", "failed"]
    assert updates[0]["compactionId"] == updates[1]["compactionId"] and "cancelled" in updates[1]["error"]


async def test_a_compaction_cut_off_by_the_end_of_stdin_ends_failed(tmp_path):
    updates, _ = await _compact_then(tmp_path, "eof")
    assert [u["status"] for u in updates] == ["in_progress", "failed"]


async def test_a_client_without_compaction_updates_is_told_in_text_that_the_cancelled_compaction_changed_nothing(
    tmp_path,
):
    updates, text = await _compact_then(tmp_path, "cancel", visible=False)
    assert updates == [] and "Compaction cancelled; the conversation is unchanged." in text


# --- a switch away and back × reopen (found by the seam fuzzer) ----------------------------------------------


async def test_a_switch_away_and_back_then_load_gives_back_the_estimate_sent_before(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/a", 32_768, CHEAP), ("local/b", 200_000, DEAR))
        llm.enqueue({"text": "answer", "usage": {"input": 376, "output": 123}})
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "hi", timeout=10)
            assert usage_updates(conn, sid)[-1]["used"] == 499
            for model in ("local/b", "local/a"):
                await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": model})
            before = usage_updates(conn, sid)[-1]
            assert before["size"] == 32_768 and before["_meta"]["ama"]["source"] == "estimate"
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            assert usage_updates(conn, sid)[-1] == before  # not the anchor local/a measured before the switches


async def test_a_switch_to_a_model_without_a_window_and_back_sends_the_figure_again(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, ("local/a", 32_768, CHEAP), ("local/nowindow", 0, ""))
        text = ama.config.read_text().replace("context_window = 0\n", "")
        ama.config.write_text(text)
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            first = usage_updates(conn, sid)[-1]
            for model in ("local/nowindow", "local/a"):
                await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": model})
            # D3 sent nothing for local/nowindow (the editor's meter is void); back on local/a the figure is news.
            assert usage_updates(conn, sid)[1:] == [first]
