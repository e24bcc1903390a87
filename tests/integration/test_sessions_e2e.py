"""Sessions that survive (issue 5), through the real subprocess: load replays the conversation and the
meter equals the last one before the close; resume, list paging, delete, SIGKILL mid-reply, a newer format.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.handlers import RpcError
from tests.support.harness import Ama, kinds, run_ama, usage_updates, write_script
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

HISTORY = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan")


def with_window(ama: Ama) -> None:
    ama.config.write_text(
        '[[models]]\nid = "scripted/s"\ncontext_window = 100000\n'
        "price = { input = 1.0, output = 4.0, cache_read = 0.1, cache_write = 1.25 }\n"
    )


def script(tmp: Path) -> str:
    return str(
        write_script(
            tmp / "s.json",
            [
                {
                    "thinking": "think first",
                    "text": "Reading.",
                    "usage": {"input": 900, "output": 20, "cache_read": 100},
                    "tool_calls": [{"id": "a", "name": "read_file", "arguments": {"path": "f.txt"}}],
                },
                {
                    "text": "Planned.",
                    "usage": {"input": 1100, "output": 30},
                    "tool_calls": [
                        {
                            "id": "a",
                            "name": "todo_write",
                            "arguments": {"todos": [{"content": "step", "status": "in_progress", "priority": "high"}]},
                        }
                    ],
                },
                {"text": "All done.", "usage": {"input": 1200, "output": 40}},
                {"text": "Second turn.", "usage": {"input": 1500, "output": 10}},
            ],
        )
    )


async def first_process(ama: Ama, env: dict[str, str]) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    with_window(ama)
    (ama.workspace / "f.txt").write_text("file body\n" * 20)
    async with run_ama(ama, "--model", "scripted/s", env=env, options=ClientOptions(fs=False, terminal=False)) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        await conn.prompt(sid, "read f.txt please", timeout=20)
        history = [u for u in conn.updates_for(sid) if u["sessionUpdate"] in HISTORY]
        return sid, history, usage_updates(conn, sid)[-1]


def updates_before_response(conn: AgentProcess, request_id: object) -> int:
    """How many session/updates ama wrote before its response to `request_id` (from the raw order)."""
    n = 0
    for entry in conn.transcript:
        if entry.direction != "in":
            continue
        msg = json.loads(entry.raw)
        if msg.get("id") == request_id and "method" not in msg:
            return n
        if msg.get("method") == "session/update":
            n += 1
    raise AssertionError("no response")


def shape(updates: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a person sees of each update: kind, text, tool id and final status (not the transient states)."""
    out: list[tuple[Any, ...]] = []
    for u in updates:
        k = u["sessionUpdate"]
        if k in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk"):
            if out and out[-1][0] == k:
                out[-1] = (k, out[-1][1] + u["content"]["text"])
            else:
                out.append((k, u["content"]["text"]))
        elif k == "tool_call":
            out.append((k, u["toolCallId"], u["title"], u["kind"]))
        elif k == "tool_call_update" and u.get("status") in ("completed", "failed"):
            out.append((k, u["toolCallId"], u["status"]))
        elif k == "plan":
            out.append((k, json.dumps(u["entries"])))
    return out


async def test_load_in_a_new_process_replays_the_turn_and_the_meter_is_unchanged(tmp_path):
    """R66/R67/E4/D2: replay in order before the response; then the usage_update equals the last one."""
    ama = Ama(tmp_path)
    env = {"AMA_SCRIPT": script(tmp_path)}
    sid, history, last = await first_process(ama, env)
    async with run_ama(ama, "--model", "scripted/s", env=env) as conn:
        await conn.initialize()
        pending = await conn.start_request(
            "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []}
        )
        result = as_object(await pending.wait(timeout=10))
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        n_at_response = updates_before_response(conn, pending.id)
        replay = conn.updates_for(sid)[:n_at_response]
        # Issue 25: the replay ends with the session's title, so a client that opened it by id can name it.
        title = replay.pop()
        assert title["sessionUpdate"] == "session_info_update" and title["title"] == "read f.txt please", title
        assert all(u["sessionUpdate"] in HISTORY for u in replay)  # history only before the response
        assert replay[0] == {
            "sessionUpdate": "user_message_chunk",
            "messageId": "r1",
            "content": {"type": "text", "text": "read f.txt please"},
        }
        live = shape(history)
        assert shape(replay[1:]) == live  # the same turn, update by update
        after = kinds(conn, sid)[n_at_response:]
        assert after == ["available_commands_update", "config_option_update", "usage_update"]
        assert usage_updates(conn, sid)[-1] == last  # stored, not re-estimated
        assert result["modes"]["currentModeId"] == "manual"
        # The loaded session goes on: the next reply is the script's fourth; the wire ids keep counting.
        again = await conn.prompt(sid, "more", timeout=10)
        assert again["stopReason"] == "end_turn"
        assert usage_updates(conn, sid)[-1]["used"] == 1510


async def test_resume_sends_no_history(tmp_path):
    """R74, E4 on resume."""
    ama = Ama(tmp_path)
    env = {"AMA_SCRIPT": script(tmp_path)}
    sid, _, last = await first_process(ama, env)
    async with run_ama(ama, "--model", "scripted/s", env=env) as conn:
        await conn.initialize()
        await conn.request("session/resume", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        # Issue 25: a titled session tells its title first (after the response: there is no replay).
        kinds_after = ["session_info_update", "available_commands_update", "config_option_update", "usage_update"]
        assert kinds(conn, sid) == kinds_after
        assert usage_updates(conn, sid)[-1] == last


async def test_list_paging_filter_and_delete(tmp_path):
    """R79–R83, R86: newest first, cwd filter, cursor paging, invalid cursor, delete (again, or unknown → {}, R87)."""
    ama = Ama(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    async with run_ama(ama, "--model", "scripted/demo") as conn:
        await conn.initialize()
        ids = []
        for i in range(55):
            cwd = str(ama.workspace if i % 5 else other)
            ids.append(session_id(await conn.request("session/new", {"cwd": cwd, "mcpServers": []})))
            await conn.prompt(ids[-1], "/context", timeout=30)  # listed once someone spoke in it (issue 25)
        page1 = as_object(await conn.request("session/list", {}))
        assert len(page1["sessions"]) == 50 and "nextCursor" in page1
        page2 = as_object(await conn.request("session/list", {"cursor": page1["nextCursor"]}))
        assert len(page2["sessions"]) == 5 and "nextCursor" not in page2
        listed = [s["sessionId"] for s in page1["sessions"] + page2["sessions"]]
        assert sorted(listed) == sorted(ids) and listed[0] == ids[-1]  # newest first
        only_other = as_object(await conn.request("session/list", {"cwd": str(other)}))
        assert {s["sessionId"] for s in only_other["sessions"]} == set(ids[::5])
        with pytest.raises(RpcError) as bad:
            await conn.request("session/list", {"cursor": "not-a-cursor"})
        assert bad.value.code == -32602
        assert await conn.request("session/delete", {"sessionId": ids[0]}) == {}
        assert not (ama.data / "sessions" / f"{ids[0]}.jsonl").exists()
        # R87: deleting it again (or any session that never existed) succeeds silently.
        assert await conn.request("session/delete", {"sessionId": ids[0]}) == {}
        assert await conn.request("session/delete", {"sessionId": "ses_never_existed"}) == {}
        with pytest.raises(RpcError) as unknown:
            await conn.request("session/load", {"sessionId": ids[0], "cwd": str(other), "mcpServers": []})
        assert unknown.value.code == -32002
        remaining = as_object(await conn.request("session/list", {"cwd": str(other)}))
        assert ids[0] not in {s["sessionId"] for s in remaining["sessions"]}


async def test_sigkill_mid_reply_then_load(tmp_path):
    """A process killed with SIGKILL in the middle of a streamed reply: the session loads."""
    ama = Ama(tmp_path)
    env = {
        "AMA_SCRIPT": str(
            write_script(
                tmp_path / "s.json",
                [
                    {"text": "ok", "usage": {"input": 100, "output": 2}},
                    {"text": "y" * 2000, "chunk": 5, "delay": 0.01},
                ],
            )
        )
    }
    with_window(ama)
    conn_cm = run_ama(ama, "--model", "scripted/s", env=env, validate=False, process=True)  # it gets a SIGKILL
    async with conn_cm as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.prompt(sid, "first", timeout=10)
        await conn.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "second"}]})
        await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) > 20)
        assert conn.pid is not None
        os.kill(conn.pid, signal.SIGKILL)
        # Wait for the kill itself (close() waits for the exit), not a fixed time: the second process must
        # not open the file while the first could still be writing it.
        assert await conn.close() == -signal.SIGKILL
    async with run_ama(ama, "--model", "scripted/s", env=env) as conn:
        await conn.initialize()
        await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        users = [u["content"]["text"] for u in conn.updates_for(sid, "user_message_chunk")]
        assert users == ["first", "second"]
        assert usage_updates(conn, sid)[-1]["used"] > 0


async def test_torn_tail_is_reported_and_the_session_loads(tmp_path):
    ama = Ama(tmp_path)
    async with run_ama(ama, "--model", "scripted/demo") as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    path = ama.data / "sessions" / f"{sid}.jsonl"
    with path.open("ab") as f:
        f.write(b'{"t":"msg","message":{"t":"user","content":[{"t":"te')  # a write cut short by a crash
    async with run_ama(ama, "--model", "scripted/demo") as conn:
        await conn.initialize()
        result = as_object(
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        )
        assert "modes" in result
        prompt = await conn.prompt(sid, "/context", timeout=10)  # appending works again
        assert prompt["stopReason"] == "end_turn"
    assert "torn" in ama.log_text()
    assert all(json.loads(line) for line in path.read_text().splitlines())


async def test_newer_format_is_refused_with_a_clear_error(tmp_path):
    ama = Ama(tmp_path)
    sessions = ama.data / "sessions"
    sessions.mkdir(parents=True)
    sid = "ses_0000000000000000000000ff"
    (sessions / f"{sid}.jsonl").write_text(
        json.dumps({"t": "header", "session_id": sid, "cwd": str(ama.workspace), "format": 99}) + "\n"
    )
    async with run_ama(ama, "--model", "scripted/demo") as conn:
        await conn.initialize()
        with pytest.raises(RpcError) as err:
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        assert err.value.code == -32602 and "newer" in err.value.message


async def test_close_stops_a_running_turn(tmp_path):
    """R88: close cancels the turn (it answers `cancelled`) no later than the close response."""
    ama = Ama(tmp_path)
    env = {"AMA_SCRIPT": str(write_script(tmp_path / "s.json", [{"text": "slow", "hang": 30}]))}
    async with run_ama(ama, "--model", "scripted/s", env=env) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        pending = await conn.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
        )
        await conn.wait_for(lambda: bool(conn.updates_for(sid, "agent_message_chunk")))
        assert await conn.request("session/close", {"sessionId": sid}, timeout=3) == {}
        assert pending.done
        assert as_object(await pending.wait(timeout=1))["stopReason"] == "cancelled"
        with pytest.raises(RpcError) as err:
            await conn.prompt(sid, "again", timeout=3)
        assert err.value.code == -32002
