"""A session whose file stops growing (a file-size limit, like a full disk) runs on and says so at once.

The limit is real: ama runs under RLIMIT_FSIZE, so the write fails with EFBIG in the kernel (ama ignores
SIGXFSZ, which would otherwise kill it). The log stays far below the limit; the session file passes it on
the first big prompt.
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
from ama_acp.rpc.errors import RESOURCE_NOT_FOUND, UNEXPECTED
from ama_acp.session.store.session_store import read_session
from tests.support.harness import Ama, check_transcript, clean_env, run_ama
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

LIMIT = 256 * 1024
SMALL_LIMIT = 2048  # under a session file's header with a long cwd, or a session with one long prompt


def limited_command(ama: Ama, limit: int = LIMIT) -> list[str]:
    """ama under RLIMIT_FSIZE = `limit` bytes, set in the child before ama starts."""
    code = (
        "import resource, runpy, sys;"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}));"
        "sys.argv = ['ama', *sys.argv[1:]];"
        "runpy.run_module('ama_acp', run_name='__main__')"
    )
    command = ama.command("--model", "scripted/demo")
    assert command[:3] == [sys.executable, "-m", "ama_acp"]
    return [sys.executable, "-c", code, *command[3:]]


def unsaved_warnings(conn: AgentProcess, sid: str) -> list[str]:
    texts = [u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")]
    texts += [u.get("title", "") + " " + u.get("description", "") for u in conn.updates_for(sid, "notice")]
    return [t for t in texts if "can no longer be saved" in t]


@pytest.mark.parametrize("notices", [False, True], ids=["agent-message", "notice"])
async def test_a_file_size_limit_is_told_once_and_the_session_runs_on(tmp_path, notices):
    ama = Ama(tmp_path)
    conn = AgentProcess(
        limited_command(ama),
        ClientOptions(notices=notices),
        cwd=str(ama.workspace),
        env=clean_env(ama.tmp),
        stderr=str(ama.stderr),
    )
    async with conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(str(ama.workspace)))
        assert unsaved_warnings(conn, sid) == []
        first = await conn.prompt(sid, "hello " + "x" * (LIMIT + 1024))  # this entry cannot be written
        assert first["stopReason"] == "end_turn"
        await conn.wait_for(lambda: bool(unsaved_warnings(conn, sid)))
        second = await conn.prompt(sid, "hello again")
        assert second["stopReason"] == "end_turn"
        assert len(unsaved_warnings(conn, sid)) == 1, "told once, not on every write"
        assert conn.returncode is None
    check_transcript(conn)
    # What was written before the failure still loads; nothing half-written follows it.
    loaded = read_session(ama.data / "sessions" / f"{sid}.jsonl")
    assert loaded.header.session_id == sid
    assert "reached the size limit for files" in ama.log_text()


# --- a session file that cannot be created (issue 22, point 6) ---------------------------------------------------
#
# session/new answers before the Session is built (manager.finish_open). Whatever stops the file from being made,
# the id ama handed out must name a live, unsaved session: it converses, every per-session method works, and the
# person is told once.


def unsaved_count(conn: AgentProcess, sid: str) -> int:
    return len(unsaved_warnings(conn, sid))


async def converse_unsaved(conn: AgentProcess, ws: str) -> str:
    """session/new, then every method that takes the id; returns the id."""
    await conn.initialize()
    sid = session_id(await conn.new_session(ws))
    first = await conn.prompt(sid, "hello")
    assert first["stopReason"] == "end_turn"
    await conn.wait_for(lambda: unsaved_count(conn, sid) > 0)
    assert await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"}) == {}
    answer = as_object(
        await conn.request(
            "session/set_config_option", {"sessionId": sid, "configId": "thought_level", "value": "high"}
        )
    )
    current = {o["id"]: o["currentValue"] for o in answer["configOptions"]}
    assert current["thought_level"] == "high" and current["mode"] == "read_only"
    stats = await conn.request("_ama/session_stats", {"sessionId": sid})
    assert isinstance(stats, dict)
    await conn.cancel(sid)  # nothing running: ignored, and no error
    second = await conn.prompt(sid, "hello again")
    assert second["stopReason"] == "end_turn"
    assert unsaved_count(conn, sid) == 1, "told once, not on every write"
    return sid


@pytest.mark.parametrize("notices", [False, True], ids=["agent-message", "notice"])
async def test_a_sessions_path_that_is_a_regular_file_leaves_a_live_unsaved_session(tmp_path, notices):
    ama = Ama(tmp_path)
    ama.data.mkdir()
    (ama.data / "sessions").write_text("not a directory\n", encoding="utf-8")
    async with run_ama(ama, options=ClientOptions(notices=notices)) as conn:
        sid = await converse_unsaved(conn, str(ama.workspace))
        # session/list answers (nothing saved); load of an id whose file never existed is not found, and the
        # live session is left as it was.
        listed = as_object(await conn.request("session/list", {}))
        assert listed["sessions"] == []
        with pytest.raises(RpcError) as caught:
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        assert caught.value.code == RESOURCE_NOT_FOUND and "never saved" in caught.value.message
        third = await conn.prompt(sid, "still here?")
        assert third["stopReason"] == "end_turn"
        assert await conn.request("session/close", {"sessionId": sid}) == {}
        assert await conn.request("session/delete", {"sessionId": sid}) == {}
        assert conn.returncode is None
    log = ama.log_text()
    assert "is not a directory" in log
    assert UNEXPECTED not in log and "Traceback" not in log
    assert unsaved_count(conn, sid) == 1


async def test_a_session_file_that_cannot_take_its_header_leaves_a_live_unsaved_session(tmp_path):
    """The header itself fails (EFBIG, in the kernel): a working directory whose name is longer than the
    file-size limit makes the header line too big for it; the log is kept under the limit by logging errors
    only (and the error line names the file, not the cwd)."""
    ama = Ama(tmp_path)
    ws = ama.workspace
    while len(str(ws)) < SMALL_LIMIT + 512:
        ws = ws / ("d" * 200)
    ws.mkdir(parents=True)
    command = [*limited_command(ama, SMALL_LIMIT)]
    command[command.index("info")] = "error"
    conn = AgentProcess(
        command, ClientOptions(notices=True), cwd=str(ws), env=clean_env(ama.tmp), stderr=str(ama.stderr)
    )
    async with conn:
        sid = await converse_unsaved(conn, str(ws))
        assert await conn.request("session/close", {"sessionId": sid}) == {}
    check_transcript(conn)
    assert not (ama.data / "sessions" / f"{sid}.jsonl").exists(), "a file without its header is removed"
    log = ama.log_text()
    assert "reached the size limit for files" in log and UNEXPECTED not in log


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_session_that_can_be_read_but_not_appended_to_opens_converses_and_says_so_once(tmp_path, method):
    """A saved session, then ama again under a file-size limit below the file's size: the file reads, every
    append fails (EFBIG, as a read-only file or disk would refuse it), and the session goes on unsaved."""
    ama = Ama(tmp_path)
    async with run_ama(ama) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(str(ama.workspace)))
        await conn.prompt(sid, "hello " + "y" * 4096)
        await conn.request("session/close", {"sessionId": sid})
    path = ama.data / "sessions" / f"{sid}.jsonl"
    size = path.stat().st_size
    assert size > SMALL_LIMIT
    (ama.data / "logs" / "ama.log").unlink()  # the second ama's log starts under the limit
    command = limited_command(ama, SMALL_LIMIT)
    command[command.index("info")] = "error"
    conn = AgentProcess(
        command, ClientOptions(notices=True), cwd=str(ama.workspace), env=clean_env(ama.tmp), stderr=str(ama.stderr)
    )
    async with conn:
        await conn.initialize()
        params: dict[str, object] = {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []}
        await conn.request(method, params)
        answer = await conn.prompt(sid, "and now?")
        assert answer["stopReason"] == "end_turn"
        await conn.wait_for(lambda: unsaved_count(conn, sid) > 0)
        assert await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"}) == {}
        again = await conn.prompt(sid, "once more")
        assert again["stopReason"] == "end_turn"
        assert unsaved_count(conn, sid) == 1
        assert await conn.request("session/close", {"sessionId": sid}) == {}
    check_transcript(conn)
    assert path.stat().st_size == size, "nothing was appended"
    assert read_session(path).header.session_id == sid
    log = ama.log_text()
    assert "reached the size limit for files" in log and UNEXPECTED not in log


def read_only(path: Path) -> Callable[[], object]:
    """Make `path` refuse writes for real, and return the undo. chmod does nothing to root, so root sets the
    immutable attribute (EPERM on open for writing); skipped where neither works (tmpfs as root)."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return lambda: path.chmod(0o600)
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot make a file read-only as root here: {done.stderr.decode(errors='replace').strip()}")
    return lambda: subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_read_only_session_file_opens_converses_and_says_so_once(tmp_path, method):
    ama = Ama(tmp_path)
    async with run_ama(ama) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(str(ama.workspace)))
        await conn.prompt(sid, "hello")
    path = ama.data / "sessions" / f"{sid}.jsonl"
    before = path.read_bytes()
    undo = read_only(path)
    try:
        async with run_ama(ama, options=ClientOptions(notices=True)) as conn:
            await conn.initialize()
            await conn.request(method, {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: unsaved_count(conn, sid) > 0)  # told at open, before any prompt
            answer = await conn.prompt(sid, "and now?")
            assert answer["stopReason"] == "end_turn"
            assert await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"}) == {}
            assert await conn.request("session/close", {"sessionId": sid}) == {}
            assert unsaved_count(conn, sid) == 1
    finally:
        undo()
    assert path.read_bytes() == before
    log = ama.log_text()
    assert "permission denied" in log and UNEXPECTED not in log
