"""Handoff fidelity over real pipes (docs/context.md "Compaction", docs/sessions.md "Handoff retention"): the
handoff request carries the slash commands the person ran, the workspace's git state and the instruction to
write in the conversation's language; handoff folders of other sessions are pruned at session start by
`[compaction] retention_days`, never the one being opened."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.session.store.entries import Header
from ama_acp.session.store.session_store import SessionStore, new_session_id
from tests.support.harness import Ama, kinds, run_ama
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
BRANCH = "feature/handoff-fidelity"


def configure(ama: Ama, url: str, extra: str = "") -> None:
    ama.config.write_text(f"""
model = "local/m"
[providers.local]
kind = "openai"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 0
[[models]]
id = "local/m"
context_window = 100000
[compaction]
keep_tokens = 0
{extra}
""")


def git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)


async def open_session(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
async def test_the_handoff_request_carries_slash_commands_git_state_and_the_language(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    git(ws, "init", "-q", "-b", BRANCH)
    (ws / "notes.txt").write_text("erste Zeile\nzweite Zeile\n")
    git(ws, "add", "notes.txt")
    git(ws, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "init")
    (ws / "notes.txt").write_text("erste Zeile\ngeänderte Zeile\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "Erste Antwort " + "x" * 4000, "usage": {"input": 3000, "output": 1000}},
            {"text": "## Ziel\nNotizen zusammenfassen.", "usage": {"input": 4100, "output": 60}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            assert (await conn.prompt(sid, "/context", timeout=10))["stopReason"] == "end_turn"
            await conn.prompt(sid, "Bitte fasse notes.txt zusammen.", timeout=10)
            result = await conn.prompt(sid, "/compact auf Deutsch bleiben", timeout=20)
            assert result["stopReason"] == "end_turn"
            statuses = [u["status"] for u in conn.updates_for(sid, "compaction_update")]
            assert statuses == ["in_progress", "completed"]
        assert len(llm.requests) == 2
    prompt = llm.requests[1].body["messages"][-1]["content"]
    prompt = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
    assert "## Slash commands the user ran (2)\n- `/context`\n- `/compact auf Deutsch bleiben`" in prompt
    assert f"- branch {BRANCH}" in prompt
    assert "     M notes.txt" in prompt  # git status --short
    assert "notes.txt | 2 +-" in prompt and "1 file changed, 1 insertion(+), 1 deletion(-)" in prompt
    assert "Write the handoff in the language of the conversation (the language the user writes in)" in prompt
    assert prompt.index("# Git state of the workspace") < prompt.index("# Inventory (mechanical)")
    saved = (ama.data / "sessions" / sid / "compaction-1" / "inventory.md").read_text(encoding="utf-8")
    assert "- `/context`" in saved


async def test_the_handoff_request_lists_the_subagents_launched_with_counted_headings(tmp_path):
    """Seed 003_'s inventory over the wire: a "Subagents launched" list from the task calls, headings with counts,
    and a command clipped at 400 characters."""
    ama = Ama(tmp_path)
    long_command = "echo " + "y" * 500
    task = {"prompt": "Read the notes.", "description": "Read notes", "agent": "explore"}
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [{"id": "t1", "name": "task", "arguments": task}], "usage": {"input": 900, "output": 20}},
            {"text": "The notes are empty.", "usage": {"input": 500, "output": 10}},  # the task's own request
            {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": long_command}}]},
            {"text": "Done " + "x" * 3000, "usage": {"input": 3000, "output": 800}},
            {"text": "## Goal\nhandoff", "usage": {"input": 4100, "output": 60}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "delegate, then run it", timeout=20)
            assert (await conn.prompt(sid, "/compact", timeout=20))["stopReason"] == "end_turn"
            assert [u["status"] for u in conn.updates_for(sid, "compaction_update")] == ["in_progress", "completed"]
    prompt = llm.requests[-1].body["messages"][-1]["content"]
    prompt = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
    assert "## Subagents launched (✗ failed) (1)\n- ✓ `explore`: Read notes" in prompt
    assert "## Tools used (2)\n" in prompt and "## The user's messages (1)\n- delegate, then run it" in prompt
    assert f"`{long_command[:400]} […105 characters left out]`" in prompt


def _aged(store: SessionStore, cwd: str, days: float) -> str:
    sid = new_session_id()
    store.create(Header(session_id=sid, cwd=cwd)).close()
    folder = store.handoff_dir(sid) / "compaction-1"
    folder.mkdir(parents=True)
    (folder / "handoff.md").write_text("h", encoding="utf-8")
    when = time.time() - days * 86400
    os.utime(store.handoff_dir(sid), (when, when))
    os.utime(store.path(sid), (when, when))
    return sid


async def test_handoff_folders_of_other_sessions_are_pruned_at_session_start(tmp_path):
    """Seed 003_: retention touches only folders named as sessions are, and `retention_days = 0` turns it off."""
    ama = Ama(tmp_path)
    store = SessionStore(ama.data)
    cwd = str(ama.workspace)
    old, fresh, recent = _aged(store, cwd, 3), _aged(store, cwd, 1), _aged(store, cwd, 0.5)
    orphan = new_session_id()  # a session's folder whose file is gone
    notes = store.sessions_dir / "notes"  # a valid id, but not a name ama gives: never pruned
    for folder in (store.handoff_dir(orphan), notes):
        folder.mkdir()
        os.utime(folder, (time.time() - 30 * 86400,) * 2)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)  # retention_days: the default, 2
        async with run_ama(ama, env=ENV) as conn:
            sid = await open_session(conn, ama)
            await conn.wait_for(lambda: "removed 2 handoff folder(s)" in ama.log_text(), timeout=10)
            assert not store.handoff_dir(old).exists() and not store.handoff_dir(orphan).exists()
            assert store.handoff_dir(fresh).exists() and store.handoff_dir(recent).exists() and notes.is_dir()
            assert store.path(old).exists()  # only the handoff folder goes, never a session
            assert sid  # the session itself opened normally

        configure(ama, llm.openai_url, "retention_days = 0")
        async with run_ama(ama, env=ENV) as conn:  # 0: pruning is off, the 0.5-day folder stays
            await conn.initialize()
            await conn.request("session/load", {"sessionId": fresh, "cwd": cwd, "mcpServers": []})
            await conn.wait_for(lambda: "handoff retention: off" in ama.log_text(), timeout=10)
            assert store.handoff_dir(recent).exists() and store.handoff_dir(fresh).exists()
