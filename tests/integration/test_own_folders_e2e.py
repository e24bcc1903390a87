"""Links and FIFOs planted in ama's own folders (issue 39 points 5 and 11; ama_acp/ownfiles.py): each is
refused without blocking and without following the link, the person is told where it matters, and the
session goes on. ama runs as a real subprocess, each request with a deadline, so a regression that blocks on a
FIFO fails the test instead of hanging the run."""

from __future__ import annotations

import os

import pytest

from ama_acp.client.connection import ClientOptions
from tests.integration.test_cancel_e2e import start
from tests.integration.test_compaction_e2e import ENV, HANDOFF
from tests.integration.test_compaction_e2e import configure as configure_compaction
from tests.integration.test_subagents_e2e import SUBAGENTS
from tests.integration.test_tasks_e2e import KEY, configure, stats, task_call
from tests.support.harness import Ama, agent_text, local_config, run_ama
from tests.support.llm_server import LLMServer
from tests.support.raw import RawAma

pytestmark = pytest.mark.anyio


async def test_a_fifo_as_the_task_journal_neither_freezes_the_task_nor_the_session(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "Say hi.", "Greet")]}, {"text": "hi"}, {"text": "done"})
        async with run_ama(ama, env=KEY, options=SUBAGENTS, process=True) as conn:
            sid = await start(conn, ama)
            (ama.data / "tasks").mkdir(parents=True, exist_ok=True)
            os.mkfifo(ama.data / "tasks" / f"{sid}.jsonl")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            [task] = (await stats(conn, sid))["tasks"]  # the session answers after the task ended
            assert task["status"] == "completed"
            await conn.prompt(sid, "/tasks", timeout=10)
            assert "Greet: completed" in agent_text(conn, sid)
        log = ama.log_text()
        assert "not kept" in log and "FIFO" in log, log[-2000:]


async def _compact_with(ama: Ama, plant: str) -> tuple[str, str]:
    """/compact in a session whose `compaction-1/handoff.md` was planted first (`plant`: "link" to a file
    outside the data dir, "fifo", "folder-link": `compaction-1` itself a link out); the final status of the
    compaction and everything the person read."""
    outside = ama.tmp / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "handoff.md").write_text("not ama's")
    with LLMServer() as llm:
        configure_compaction(ama, llm.openai_url)
        llm.enqueue(
            {"text": "First answer " + "x" * 4000, "usage": {"input": 3000, "output": 1000}},
            {"text": HANDOFF, "usage": {"input": 4100, "output": 60}},
            {"text": "after", "usage": {"input": 900, "output": 5}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True), process=True) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "hello", timeout=10)
            folder = ama.data / "sessions" / sid / "compaction-1"
            folder.parent.mkdir(parents=True, exist_ok=True)
            if plant == "folder-link":
                folder.symlink_to(outside)
            else:
                folder.mkdir()
                if plant == "link":
                    (folder / "handoff.md").symlink_to(outside / "handoff.md")
                else:
                    os.mkfifo(folder / "handoff.md")
            assert (await conn.prompt(sid, "/compact", timeout=15))["stopReason"] == "end_turn"
            last = conn.updates_for(sid, "compaction_update")[-1]
            assert (await conn.prompt(sid, "and now?", timeout=10))["stopReason"] == "end_turn"
            return last["status"], str(last.get("error", ""))


@pytest.mark.parametrize("plant", ["link", "fifo"])
async def test_a_link_or_fifo_as_the_handoff_is_replaced_never_written_through(tmp_path, plant):
    ama = Ama(tmp_path)
    status, _ = await _compact_with(ama, plant)
    assert status == "completed"
    assert (ama.tmp / "outside" / "handoff.md").read_text() == "not ama's"
    [handoff] = (ama.data / "sessions").glob("*/compaction-1/handoff.md")
    assert not handoff.is_symlink() and "HANDOFF-MARKER" in handoff.read_text()


async def test_a_linked_compaction_folder_is_refused_and_the_person_told(tmp_path):
    ama = Ama(tmp_path)
    status, error = await _compact_with(ama, "folder-link")
    assert status == "failed"
    assert "compaction-1 is a symbolic link" in error, error
    assert sorted(p.name for p in (ama.tmp / "outside").iterdir()) == ["handoff.md"]
    assert (ama.tmp / "outside" / "handoff.md").read_text() == "not ama's"


@pytest.mark.parametrize("plant", ["fifo", "dev-zero"])
def test_a_fifo_or_a_device_as_the_credentials_file_is_refused_and_ama_answers(tmp_path, plant):
    ama = Ama(tmp_path)
    folder = tmp_path / "xdg-config" / "ama"
    folder.mkdir(parents=True)
    if plant == "fifo":
        os.mkfifo(folder / "credentials.toml")
    else:
        (folder / "credentials.toml").symlink_to("/dev/zero")
    ama.config.write_text(local_config("http://127.0.0.1:9/v1"))  # its key is looked up in the file
    raw = RawAma(ama, process=True)
    try:
        assert "result" in raw.request(1, "initialize", {"protocolVersion": 1})
        new = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
        assert new.get("error", {}).get("code") == -32000, new  # no usable key: sign in, said as always
        assert raw.alive()
    finally:
        raw.close()


async def test_a_linked_checkpoints_folder_never_receives_the_copies(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("the old words\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, top='mode = "full_access"'))
        write = {"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "new words\n"}}
        llm.enqueue({"tool_calls": [write]}, {"text": "written"})
        async with run_ama(ama, env=ENV, process=True) as conn:
            sid = await start(conn, ama)
            (ama.data / "checkpoints").mkdir(parents=True, exist_ok=True)
            (ama.data / "checkpoints" / sid).symlink_to(outside)
            assert (await conn.prompt(sid, "rewrite notes.txt", timeout=15))["stopReason"] == "end_turn"
            assert (ama.workspace / "notes.txt").read_text() == "new words\n"  # the write itself goes on
            await conn.prompt(sid, "/rewind 1", timeout=10)
            # The copy could not be kept: the rewind says so and leaves the file as it is.
            assert "notes.txt" in agent_text(conn, sid)
        assert list(outside.iterdir()) == []
        assert "symbolic link" in ama.log_text()


def test_a_fifo_as_the_log_file_leaves_ama_without_a_log_not_frozen(tmp_path):
    ama = Ama(tmp_path)
    (ama.data / "logs").mkdir(parents=True)
    os.mkfifo(ama.data / "logs" / "ama.log")
    raw = RawAma(ama, process=True)
    try:
        assert "result" in raw.request(1, "initialize", {"protocolVersion": 1})
        assert "result" in raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
    finally:
        raw.close()
    assert "no log file" in ama.stderr.read_text() and "FIFO" in ama.stderr.read_text()
