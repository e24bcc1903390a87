"""session/fork (issue 27, docs/sessions.md "Forks") through real pipes: the fork starts with the original's
history, mode, model and meter, has its own file, leaves the original untouched, and goes its own way; with a
compaction, a model switch, MCP servers, a turn running in the original, a fresh process, malformed requests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.handlers import RpcError
from tests.support.harness import Ama, agent_text, kinds, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
ROOT = Path(__file__).resolve().parents[2]
HANDOFF = "## Goal and current state\nThe user wants notes summarised. HANDOFF-MARKER"


def configure(ama: Ama, url: str, *, tail: str = "", top: str = "") -> None:
    ama.config.write_text(f"""
model = "local/m"
{top}
[providers.local]
kind = "openai"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 0
[[models]]
id = "local/m"
context_window = 100000
price = {{ input = 1.0, output = 2.0, cache_read = 0.1, cache_write = 1.0 }}
[[models]]
id = "local/big"
context_window = 400000
price = {{ input = 1.0, output = 2.0 }}
[compaction]
keep_tokens = 0
{tail}
""")


async def open_session(conn: AgentProcess, ama: Ama) -> str:
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


async def fork(conn: AgentProcess, ama: Ama, sid: str, **extra: Any) -> dict[str, Any]:
    params = {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": [], **extra}
    result = as_object(await conn.request("session/fork", params))
    assert isinstance(result, dict)
    fid = result["sessionId"]
    conn.session_cwds[fid] = str(ama.workspace)
    await conn.wait_for(lambda: "usage_update" in kinds(conn, fid))
    return result


def session_file(ama: Ama, sid: str) -> Path:
    return ama.data / "sessions" / f"{sid}.jsonl"


def said(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


def figure(update: dict[str, Any]) -> tuple[Any, ...]:
    return (update["used"], update["size"], update.get("cost"))


async def test_fork_copies_the_thread_and_meter_then_both_go_their_own_way(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, top='mode = "read_only"')
        llm.enqueue(
            {"text": "ANSWER-ONE", "usage": {"input": 3000, "output": 100}},
            {"text": "ORIGINAL-TWO", "usage": {"input": 3300, "output": 10}},
            {"text": "FORK-TWO", "usage": {"input": 3400, "output": 20}},
        )
        async with run_ama(ama, env=ENV) as conn:
            init = as_object(await conn.initialize())
            assert init["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
            sid = await open_session(conn, ama)
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
            await conn.prompt(sid, "QUESTION-ONE about the parser", timeout=10)
            before = usage_updates(conn, sid)[-1]
            original_bytes = session_file(ama, sid).read_bytes()

            result = await fork(conn, ama, sid)
            fid = result["sessionId"]
            assert fid != sid
            assert result["modes"]["currentModeId"] == "accept_edits"  # the mode the person chose, not the config's
            model = next(o for o in result["configOptions"] if o["id"] == "model")
            assert model["currentValue"] == "local/m"
            # D2: the forced usage_update on open, and it is the original's measured figure, not an estimate.
            first = usage_updates(conn, fid)[0]
            assert figure(first) == figure(before)
            assert first["_meta"]["ama"]["source"] == before["_meta"]["ama"]["source"]
            titles = [u["title"] for u in conn.updates_for(fid, "session_info_update") if u.get("title")]
            assert titles == ["QUESTION-ONE about the parser (fork)"]
            assert session_file(ama, sid).read_bytes() == original_bytes  # the original untouched

            await conn.prompt(sid, "ORIGINAL-FOLLOW-UP", timeout=10)
            await conn.prompt(fid, "FORK-FOLLOW-UP", timeout=10)
            assert "ORIGINAL-TWO" in agent_text(conn, sid) and "FORK-TWO" not in agent_text(conn, sid)
            assert "FORK-TWO" in agent_text(conn, fid) and "ORIGINAL-TWO" not in agent_text(conn, fid)
            listed = as_object(await conn.request("session/list", {"cwd": str(ama.workspace)}))
            assert isinstance(listed, dict)
            rows = {s["sessionId"]: s for s in listed["sessions"]}
            assert rows[fid]["title"] == "QUESTION-ONE about the parser (fork)"
            assert rows[sid]["title"] == "QUESTION-ONE about the parser"
        # The model server saw two histories sharing their start.
        original, forked = said(llm.requests[1].body), said(llm.requests[2].body)
        for body in (original, forked):
            assert "QUESTION-ONE" in body and "ANSWER-ONE" in body
        assert "ORIGINAL-FOLLOW-UP" in original and "FORK-FOLLOW-UP" not in original
        assert "FORK-FOLLOW-UP" in forked and "ORIGINAL-FOLLOW-UP" not in forked
        assert llm.requests[2].body["messages"][0] == llm.requests[1].body["messages"][0]  # the same frozen prompt


async def test_fork_after_compaction_then_load_it_in_a_fresh_process_after_the_original_is_deleted(
    tmp_path: Path,
) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "OLD-ANSWER " + "x" * 4000, "usage": {"input": 3000, "output": 1000}},
            {"text": HANDOFF, "usage": {"input": 4100, "output": 60}},
            {"text": "FORK-AFTER", "usage": {"input": 900, "output": 5}},
        )
        opts = ClientOptions(compaction=True)
        async with run_ama(ama, env=ENV, options=opts) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "Summarise notes, please.", timeout=10)
            await conn.prompt(sid, "/compact", timeout=10)
            compacted = usage_updates(conn, sid)[-1]
            fid = (await fork(conn, ama, sid))["sessionId"]
            assert figure(usage_updates(conn, fid)[0]) == figure(compacted)
            await conn.prompt(fid, "and now?", timeout=10)
            fork_figure = usage_updates(conn, fid)[-1]
            await conn.request("session/delete", {"sessionId": sid})
        body = said(llm.requests[2].body)
        assert "HANDOFF-MARKER" in body and "x" * 4000 not in body  # the fork continues the compacted context
        assert (ama.data / "sessions" / fid / "compaction-1" / "handoff.md").is_file()  # its own copy
        assert not session_file(ama, sid).exists()

        async with run_ama(ama, env=ENV, options=opts) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": fid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, fid))
            users = "".join(u["content"]["text"] for u in conn.updates_for(fid, "user_message_chunk"))
            assert "Summarise notes, please." in users and "/compact" in users and "and now?" in users
            assert "OLD-ANSWER" in agent_text(conn, fid) and "FORK-AFTER" in agent_text(conn, fid)
            assert figure(usage_updates(conn, fid)[-1]) == figure(fork_figure)


async def test_fork_after_a_model_switch_has_the_switched_model_and_its_window(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "hi", "usage": {"input": 2000, "output": 10}}, {"text": "big", "usage": {"input": 2100}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "hello", timeout=10)
            await conn.request(
                "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/big"}
            )
            switched = usage_updates(conn, sid)[-1]
            assert switched["size"] == 400_000
            result = await fork(conn, ama, sid)
            fid = result["sessionId"]
            model = next(o for o in result["configOptions"] if o["id"] == "model")
            assert model["currentValue"] == "local/big"
            assert figure(usage_updates(conn, fid)[0]) == figure(switched)
            await conn.prompt(fid, "on the big one", timeout=10)
        assert llm.requests[1].body["model"] == "big"


async def test_fork_while_a_turn_runs_takes_the_last_completed_turn_and_leaves_the_turn_alone(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "DONE-ONE", "usage": {"input": 2000, "output": 10}},
            {"text": "STREAMING-" + "y" * 400, "usage": {"input": 2500, "output": 200}, "chunk_size": 4, "delay": 0.01},
            {"text": "FORK-REPLY", "usage": {"input": 2100, "output": 5}},
        )
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "FIRST-PROMPT", timeout=10)
            completed = usage_updates(conn, sid)[-1]
            running = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "RUNNING-PROMPT"}]}
            )
            await conn.wait_for(lambda: "STREAMING-" in agent_text(conn, sid))
            fid = (await fork(conn, ama, sid))["sessionId"]
            assert not running.done  # the fork answered while the turn still runs
            assert figure(usage_updates(conn, fid)[0]) == figure(completed)  # the meter of the completed turn
            answer = as_object(await running.wait(10))
            assert isinstance(answer, dict) and answer["stopReason"] == "end_turn"  # not disturbed
            assert ("STREAMING-" + "y" * 400) in agent_text(conn, sid)
            await conn.prompt(fid, "FORK-PROMPT", timeout=10)
        forked = said(llm.requests[2].body)
        assert "FIRST-PROMPT" in forked and "DONE-ONE" in forked and "FORK-PROMPT" in forked
        assert "RUNNING-PROMPT" not in forked and "STREAMING-" not in forked


async def test_fork_of_a_session_not_open_in_this_process(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "EARLIER", "usage": {"input": 2000, "output": 10}}, {"text": "LATER", "usage": {}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "EARLIER-PROMPT", timeout=10)
            last = usage_updates(conn, sid)[-1]
        original_bytes = session_file(ama, sid).read_bytes()
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            fid = (await fork(conn, ama, sid))["sessionId"]
            assert figure(usage_updates(conn, fid)[0]) == figure(last)
            assert not conn.updates_for(sid)  # the original was neither loaded nor replayed
            await conn.prompt(fid, "LATER-PROMPT", timeout=10)
        assert "EARLIER-PROMPT" in said(llm.requests[1].body)
        assert session_file(ama, sid).read_bytes() == original_bytes


async def test_fork_with_mcp_servers_declares_their_tools(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    server = {
        "name": "notes",
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_servers.stdio_server"],
        "env": [
            {"name": "PYTHONPATH", "value": str(ROOT)},
            {"name": "MCP_TEST_DIR", "value": str(notes)},
            {"name": "MCP_TEST_PID_FILE", "value": str(tmp_path / "pid")},
        ],
    }
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "one", "usage": {"input": 2000, "output": 10}}, {"text": "two", "usage": {}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "no servers here", timeout=10)
            fid = (await fork(conn, ama, sid, mcpServers=[server]))["sessionId"]
            await conn.prompt(fid, "with the notes server", timeout=20)
        names = [t["function"]["name"] for t in llm.requests[1].body.get("tools", [])]
        assert any(n.startswith("mcp__notes__") for n in names)
        assert not any(t["function"]["name"].startswith("mcp__") for t in llm.requests[0].body.get("tools", []))


async def test_malformed_forks_answer_specific_errors(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama)
            cases: list[tuple[dict[str, Any], int, str]] = [
                ({"sessionId": "ses_nope", "cwd": str(ama.workspace)}, -32002, "ses_nope"),
                ({"sessionId": "../../etc/passwd", "cwd": str(ama.workspace)}, -32002, "passwd"),
                ({"sessionId": sid}, -32602, "cwd"),
                ({"sessionId": sid, "cwd": "relative/dir"}, -32602, "absolute"),
                ({"sessionId": sid, "cwd": str(other)}, -32602, "belongs to"),
                ({"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": "x"}, -32602, "mcpServers"),
            ]
            for params, code, word in cases:
                with pytest.raises(RpcError) as err:
                    await conn.request("session/fork", params)
                assert err.value.code == code, params
                assert word in err.value.message, (params, err.value.message)
            sessions = sorted(p.name for p in (ama.data / "sessions").glob("*.jsonl"))
            assert sessions == [f"{sid}.jsonl"]  # no half-made fork left behind
