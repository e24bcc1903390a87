"""Checkpoints and /rewind through real pipes (docs/sessions.md "Checkpoints and /rewind"): files put back as they
were before prompt N, a person's change kept and named, the conversation shortened in the live session and in a
load by a fresh process with the meter's figure of before that prompt, a rewind past a compaction, a cancelled
turn's changes, the timing guard, writes through the editor and locally, and a hostile workspace."""

from __future__ import annotations

import json
import os
import stat
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.client.handlers import RpcError
from tests.integration.test_fork_e2e import fork
from tests.support.harness import Ama, agent_text, kinds, local_config, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def configure(ama: Ama, url: str, tail: str = "") -> None:
    ama.config.write_text(local_config(url, top='mode = "full_access"', tail=tail))


def write(cid: str, path: str, content: str) -> dict[str, Any]:
    return {"id": cid, "name": "write_file", "arguments": {"path": path, "content": content}}


def edit(cid: str, path: str, old: str, new: str) -> dict[str, Any]:
    return {"id": cid, "name": "edit_file", "arguments": {"path": path, "edits": [{"old_text": old, "new_text": new}]}}


def calls(*tool_calls: dict[str, Any], usage: int = 1000) -> dict[str, Any]:
    return {"text": "Changing files.", "usage": {"input": usage, "output": 10}, "tool_calls": list(tool_calls)}


def answer(text: str, usage: int) -> dict[str, Any]:
    return {"text": text, "usage": {"input": usage, "output": 10}}


async def open_session(conn: Any, ama: Ama) -> str:
    await conn.initialize()
    sid: str = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


def said_since(conn: Any, sid: str, before: int) -> str:
    return agent_text(conn, sid)[before:]


def request_text(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


async def test_rewind_restores_prompt_one_state_keeps_the_persons_change_and_a_fresh_load_agrees(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    (ws / "a.txt").write_text("one\n")
    (ws / "c.txt").write_text("c0\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            calls(write("w1", "a.txt", "two\n")),
            answer("done one", 1200),
            calls(write("w2", "a.txt", "three\n"), write("w3", "b.txt", "new\n"), edit("e1", "c.txt", "c0", "c1")),
            answer("done two", 2400),
            answer("third answer", 1300),
        )
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            assert (await conn.prompt(sid, "first: change a", timeout=20))["stopReason"] == "end_turn"
            after_one = usage_updates(conn, sid)[-1]["used"]
            assert (await conn.prompt(sid, "second: more changes", timeout=20))["stopReason"] == "end_turn"
            assert (ws / "a.txt").read_text() == "three\n" and (ws / "b.txt").exists()
            # Written through the editor (fs/write_text_file): recorded like local writes.
            assert sum('"fs/write_text_file"' in e.raw for e in conn.transcript) == 4
            assert usage_updates(conn, sid)[-1]["used"] != after_one
            (ws / "c.txt").write_text("mine\n")  # the person's own change after ama's

            mark = len(agent_text(conn, sid))
            await conn.prompt(sid, "/rewind", timeout=20)
            listing = said_since(conn, sid, mark)
            assert "1. first: change a — a.txt (modified)" in listing
            assert "2. second: more changes — a.txt (modified), b.txt (created), c.txt (modified)" in listing

            mark = len(agent_text(conn, sid))
            assert (await conn.prompt(sid, "/rewind 2", timeout=20))["stopReason"] == "end_turn"
            told = said_since(conn, sid, mark)
            assert (ws / "a.txt").read_text() == "two\n"  # the state after prompt 1
            assert not (ws / "b.txt").exists()  # created since: removed
            assert (ws / "c.txt").read_text() == "mine\n"  # the person's change: kept, and said
            assert "Left as it is: c.txt — it changed since ama last wrote it." in told
            assert "Restored: a.txt" in told and "Removed (created since): b.txt" in told
            # The meter follows the shortened conversation: the figure of before prompt 2, as measured then.
            assert usage_updates(conn, sid)[-1]["used"] == after_one

            await conn.prompt(sid, "third prompt", timeout=20)
            sent = request_text(llm.requests[-1].body)
            assert "first: change a" in sent and "third prompt" in sent
            assert "second: more changes" not in sent and "done two" not in sent
            live_used = usage_updates(conn, sid)[-1]["used"]

        async with run_ama(ama, env=ENV) as conn:  # a fresh ama: the file alone says what happened
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            said = [u["content"]["text"] for u in conn.updates_for(sid, "user_message_chunk")]
            assert said == ["first: change a", "/rewind 2", "third prompt"]  # the replay: the shortened thread
            assert "done two" not in agent_text(conn, sid) and "done one" in agent_text(conn, sid)
            assert usage_updates(conn, sid)[-1]["used"] == live_used
            mark = len(agent_text(conn, sid))
            await conn.prompt(sid, "/rewind", timeout=20)
            listing = said_since(conn, sid, mark)
            assert "2. third prompt — no file changes" in listing and "second" not in listing


async def test_rewind_past_a_compaction_brings_the_summarised_conversation_back_and_says_so(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail="[compaction]\nkeep_tokens = 0\n")
        llm.enqueue(
            calls(write("w1", "n.txt", "1\n"), usage=12_000),
            answer("done one", 12_100),
            calls(write("w2", "n.txt", "2\n"), usage=24_200),
            answer("done two", 24_300),
            {"text": "## 1. Goal\nHANDOFF-MARKER", "usage": {"input": 24_400, "output": 30}},
            answer("after the rewind", 12_300),
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            bulk = " words" * 8000  # ~12,000 tokens a prompt: something for the compaction to free
            await conn.prompt(sid, "prompt one" + bulk, timeout=20)
            after_one = usage_updates(conn, sid)[-1]["used"]
            await conn.prompt(sid, "prompt two" + bulk, timeout=20)
            await conn.prompt(sid, "/compact", timeout=20)
            assert [c["status"] for c in conn.updates_for(sid, "compaction_update")][-1] == "completed"
            mark = len(agent_text(conn, sid))
            await conn.prompt(sid, "/rewind 2", timeout=20)
            told = said_since(conn, sid, mark)
            assert "This also undid 1 compaction" in told
            assert (ws / "n.txt").read_text() == "1\n"
            assert usage_updates(conn, sid)[-1]["used"] == after_one
            await conn.prompt(sid, "prompt three", timeout=20)
        sent = request_text(llm.requests[-1].body)
        assert "HANDOFF-MARKER" not in sent  # the compaction is undone: prompt one is back in the clear
        assert "prompt one" in sent and "done one" in sent and "prompt two" not in sent


async def test_a_cancelled_turns_changes_are_recorded_and_rewound(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    (ws / "k.txt").write_text("before\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(calls(write("w1", "k.txt", "during\n")), {"text": "never", "hang": 30})
        async with run_ama(ama, env=ENV, options=ClientOptions(fs=False)) as conn:  # local writes
            sid = await open_session(conn, ama)
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: (ws / "k.txt").read_text() == "during\n" and len(llm.requests) >= 2)
            await conn.cancel(sid)
            assert as_object(await turn.wait(10))["stopReason"] == "cancelled"
            mark = len(agent_text(conn, sid))
            await conn.prompt(sid, "/rewind", timeout=20)
            assert "1. go — k.txt (modified)" in said_since(conn, sid, mark)
            for wrong in ("5", "0", "x", "-1"):
                mark = len(agent_text(conn, sid))
                await conn.prompt(sid, f"/rewind {wrong}", timeout=20)
                assert "give a prompt number (this session's: 1)" in said_since(conn, sid, mark)
            assert (ws / "k.txt").read_text() == "during\n"  # nothing was touched
            await conn.prompt(sid, "/rewind 1", timeout=20)
            assert (ws / "k.txt").read_text() == "before\n"


async def test_rewind_while_a_turn_runs_is_refused_and_changes_nothing(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(calls(write("w1", "t.txt", "x\n")), answer("ok", 1000), {"text": "slow", "hang": 30})
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "make t", timeout=20)
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long one"}]}
            )
            await conn.wait_for(lambda: len(llm.requests) >= 3)
            with pytest.raises(RpcError) as refused:
                await conn.request(
                    "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/rewind 1"}]}
                )
            assert refused.value.code == -32010
            assert (ws / "t.txt").read_text() == "x\n"
            await conn.cancel(sid)
            await turn.wait(10)


async def test_a_hostile_workspace_runs_nothing_follows_no_link_and_opens_no_fifo(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = tmp_path / "filter-ran"
    # A git filter the workspace names: a checkpoint made with git in this tree would run it.
    (ws / ".gitattributes").write_text("* filter=evil\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text(f'[filter "evil"]\n\tclean = touch {marker}\n\tsmudge = touch {marker}\n')
    (ws / "sub").mkdir()
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            calls(write("w1", "link.txt", "ama\n"), write("w2", "sub/x.txt", "ama\n"), write("w3", "pipe", "ama\n")),
            answer("ok", 1000),
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(fs=False)) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "create three files", timeout=20)
            # The person (or something) swaps what ama wrote for a link out, a folder link out, a FIFO — each
            # with ama's bytes behind it, so only the kind of the entry can tell.
            (outside / "victim.txt").write_text("ama\n")
            (ws / "link.txt").unlink()
            (ws / "link.txt").symlink_to(outside / "victim.txt")
            (outside / "x.txt").write_text("ama\n")
            (ws / "sub" / "x.txt").unlink()
            (ws / "sub").rmdir()
            (ws / "sub").symlink_to(outside)
            (ws / "pipe").unlink()
            os.mkfifo(ws / "pipe")
            mark = len(agent_text(conn, sid))
            await conn.prompt(sid, "/rewind 1", timeout=20)
            told = said_since(conn, sid, mark)
        assert (outside / "victim.txt").read_text() == "ama\n" and (outside / "x.txt").read_text() == "ama\n"
        assert (ws / "link.txt").is_symlink() and (ws / "sub").is_symlink()
        assert stat.S_ISFIFO(os.lstat(ws / "pipe").st_mode)  # still the FIFO, never opened
        assert "Left as it is: link.txt — it is a symbolic link now." in told
        assert "Left as it is: sub/x.txt — it is outside the session's folders." in told
        assert "Left as it is: pipe — it is a FIFO (named pipe) now." in told
        assert not marker.exists()


async def test_a_fork_can_rewind_a_prompt_it_inherited(tmp_path):
    """A fork carries the original's saved copies (session/fork × /rewind): rewinding, in the fork, a prompt made
    before the fork puts the file back as it was, and the original's copies stay where they were."""
    ama = Ama(tmp_path)
    ws = ama.workspace
    (ws / "a.txt").write_text("one\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(calls(write("w1", "a.txt", "two\n")), answer("done one", 1200))
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            assert (await conn.prompt(sid, "first: change a", timeout=20))["stopReason"] == "end_turn"
            forked = (await fork(conn, ama, sid))["sessionId"]
            mark = len(agent_text(conn, forked))
            assert (await conn.prompt(forked, "/rewind 1", timeout=20))["stopReason"] == "end_turn"
            assert "Restored: a.txt" in said_since(conn, forked, mark)
            assert (ws / "a.txt").read_text() == "one\n"
            original = ama.data / "checkpoints" / sid
            assert original.is_dir() and any(original.iterdir())
