"""Odd session files through the real agent (issue 23, point 3; docs/sessions.md "Odd files in the sessions
folder"): a FIFO, a link to /dev/zero, a symlink loop and a directory under session names answer load, list
and delete at once; a session open in one ama process cannot be deleted by another (the error names the
holder's pid); a session whose file another program deletes says so, once.

Where ama meets the odd entries it runs under RLIMIT_DATA (a real process), so a regression that reads /dev/zero
ends in MemoryError instead of taking the machine's memory, and each request has a short deadline, so one that
blocks on a FIFO fails the test. The deleted-file test runs ama in-process (`run_ama`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.handlers import RpcError
from ama_acp.rpc.errors import INVALID_PARAMS, SESSION_BUSY
from ama_acp.session.store.entries import CommandEntry, Header
from ama_acp.session.store.session_store import SessionStore
from tests.support.harness import Ama, check_transcript, clean_env, run_ama
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

DATA_LIMIT = 3 << 30  # far above what ama needs, far below what reading /dev/zero for the deadline takes
DEADLINE = 10.0  # every request here is answered in milliseconds


def bounded_command(ama: Ama) -> list[str]:
    code = (
        "import resource, runpy, sys;"
        f"resource.setrlimit(resource.RLIMIT_DATA, ({DATA_LIMIT}, {DATA_LIMIT}));"
        "sys.argv = ['ama', *sys.argv[1:]];"
        "runpy.run_module('ama_acp', run_name='__main__')"
    )
    command = ama.command("--model", "scripted/demo")
    assert command[:3] == [sys.executable, "-m", "ama_acp"]
    return [sys.executable, "-c", code, *command[3:]]


def bounded_ama(ama: Ama, notices: bool = False) -> AgentProcess:
    return AgentProcess(
        bounded_command(ama),
        ClientOptions(notices=notices),
        cwd=str(ama.workspace),
        env=clean_env(ama.tmp),
        stderr=str(ama.stderr),
    )


def ama_cli(ama: Ama, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ama_acp", *args, "--data-dir", str(ama.data)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ama.workspace,
        env=clean_env(ama.tmp, {"AMA_CONFIG": str(ama.config)}),
    )


ODD: dict[str, tuple[str, Callable[[Path], object]]] = {
    "ses_odd_fifo": ("FIFO", lambda p: os.mkfifo(p)),
    "ses_odd_zero": ("symbolic link", lambda p: p.symlink_to("/dev/zero")),
    "ses_odd_loop": ("symbolic link", lambda p: p.symlink_to(p.name)),
    "ses_odd_dir": ("directory", lambda p: p.mkdir()),
}


async def test_load_list_and_delete_answer_at_once_for_every_odd_entry(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    store = SessionStore(ama.data)
    real = "ses_0000000000000000000000aa"
    with store.create(Header(session_id=real, cwd=str(ama.workspace))) as writer:  # listed: someone spoke in it
        writer.append(CommandEntry(text="/context"))
    for sid, (_, make) in ODD.items():  # the FIFO first: on a regression it blocks, before /dev/zero is read
        make(store.path(sid))
    conn = bounded_ama(ama)
    async with conn:
        await conn.initialize()
        listed = as_object(await conn.request("session/list", {}, timeout=DEADLINE))
        assert [s["sessionId"] for s in listed["sessions"]] == [real]
        for sid, (words, _) in ODD.items():
            with pytest.raises(RpcError) as refused:
                params = {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []}
                await conn.request("session/load", params, timeout=DEADLINE)
            assert refused.value.code == INVALID_PARAMS and words in refused.value.message, refused.value.message
        for sid, (words, _) in ODD.items():
            if words == "directory":  # left alone: it is not ama's to remove
                with pytest.raises(RpcError) as kept:
                    await conn.request("session/delete", {"sessionId": sid}, timeout=DEADLINE)
                assert kept.value.code == INVALID_PARAMS and "directory" in kept.value.message
                assert store.path(sid).is_dir()
            else:
                assert await conn.request("session/delete", {"sessionId": sid}, timeout=DEADLINE) == {}
                assert not store.path(sid).is_symlink() and not store.path(sid).exists()
        again = as_object(await conn.request("session/list", {}, timeout=DEADLINE))
        assert [s["sessionId"] for s in again["sessions"]] == [real]
        assert conn.returncode is None
    check_transcript(conn)
    assert "Traceback" not in ama.log_text()


async def test_a_session_open_in_one_process_cannot_be_deleted_by_another(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    async with run_ama(ama, "--model", "scripted/demo", process=True) as holder:  # two processes, their pids
        await holder.initialize()
        sid = session_id(await holder.new_session(str(ama.workspace)))
        await holder.prompt(sid, "hello", timeout=DEADLINE)
        path = ama.data / "sessions" / f"{sid}.jsonl"
        async with run_ama(ama, "--model", "scripted/demo", process=True) as other:
            await other.initialize()
            with pytest.raises(RpcError) as busy:
                await other.request("session/delete", {"sessionId": sid}, timeout=DEADLINE)
            assert busy.value.code == SESSION_BUSY
            assert f"pid {holder.pid}" in busy.value.message and busy.value.data["pid"] == holder.pid
            assert path.is_file()
            cli = ama_cli(ama, "sessions", "delete", sid)
            assert cli.returncode == 1 and f"pid {holder.pid}" in cli.stderr, cli.stderr
            assert path.is_file()
            # The holder goes on saving: its next turn lands in the same file.
            size = path.stat().st_size
            await holder.prompt(sid, "still mine", timeout=DEADLINE)
            assert path.stat().st_size > size
            await holder.request("session/close", {"sessionId": sid}, timeout=DEADLINE)
            assert await other.request("session/delete", {"sessionId": sid}, timeout=DEADLINE) == {}
            assert not path.exists()


def unsaved_warnings(conn: AgentProcess, sid: str) -> list[str]:
    texts = [u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")]
    texts += [u.get("title", "") + " " + u.get("description", "") for u in conn.updates_for(sid, "notice")]
    return [t for t in texts if "can no longer be saved" in t]


@pytest.mark.parametrize("notices", [False, True], ids=["agent-message", "notice"])
async def test_a_session_whose_file_is_deleted_under_it_says_so_once(tmp_path: Path, notices: bool) -> None:
    ama = Ama(tmp_path)
    # In-process: the subject is the file deleted under ama, not its process or its memory limit.
    async with run_ama(ama, "--model", "scripted/demo", options=ClientOptions(notices=notices)) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(str(ama.workspace)))
        await conn.prompt(sid, "hello", timeout=DEADLINE)
        path = ama.data / "sessions" / f"{sid}.jsonl"
        path.unlink()  # another program (rm, a cleaner) removes it while ama has it open
        second = await conn.prompt(sid, "are you saving this?", timeout=DEADLINE)
        assert second["stopReason"] == "end_turn"
        await conn.wait_for(lambda: bool(unsaved_warnings(conn, sid)), timeout=DEADLINE)
        third = await conn.prompt(sid, "and this?", timeout=DEADLINE)
        assert third["stopReason"] == "end_turn"
        warnings = unsaved_warnings(conn, sid)
        assert len(warnings) == 1, warnings
        assert "deleted by another program" in warnings[0]
        assert not path.exists()  # nothing wrote a new file in its place
        assert conn.returncode is None
    check_transcript(conn)
    assert "deleted by another program" in ama.log_text()
