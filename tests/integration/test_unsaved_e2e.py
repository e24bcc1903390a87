"""A session whose file stops growing (a file-size limit, like a full disk) runs on and says so at once.

The limit is real: ama runs under RLIMIT_FSIZE, so the write fails with EFBIG in the kernel (ama ignores
SIGXFSZ, which would otherwise kill it). The log stays far below the limit; the session file passes it on
the first big prompt.
"""

from __future__ import annotations

import sys

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.session.store import read_session
from tests.support.harness import Ama, check_transcript, clean_env

pytestmark = pytest.mark.anyio

LIMIT = 256 * 1024

_LIMITED = (
    "import resource, runpy, sys;"
    f"resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT}));"
    "sys.argv = ['ama', *sys.argv[1:]];"
    "runpy.run_module('ama_acp', run_name='__main__')"
)


def limited_command(ama: Ama) -> list[str]:
    command = ama.command("--model", "scripted/demo")
    assert command[:3] == [sys.executable, "-m", "ama_acp"]
    return [sys.executable, "-c", _LIMITED, *command[3:]]


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
        sid = (await conn.new_session(str(ama.workspace)))["sessionId"]
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
