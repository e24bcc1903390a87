"""What a reloaded session shows of a cancelled turn, and what a second ama process is told.

- A tool call cancelled while its permission was being asked is part of the history: after a restart,
  session/load replays it with its final (failed) status, like the live turn showed it.
- A session open in a process that does not hand it over is named as such when an ama process tries to load it
  (an idle ama hands it over: tests/integration/test_held_elsewhere_e2e.py).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from tests.integration.test_cancel_e2e import KEY, command_call, configure, prompt, start
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


async def test_a_call_cancelled_while_asked_is_replayed_with_its_final_status(tmp_path):
    ama = Ama(tmp_path)
    asked = anyio.Event()

    async def hold(params: dict[str, Any]) -> None:
        asked.set()
        await anyio.sleep_forever()  # the person never clicks; the cancel answers `cancelled`

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("rm -rf build"))
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=hold)) as conn:
            sid = await start(conn, ama)
            pending = await prompt(conn, sid)
            with anyio.fail_after(10):
                await asked.wait()
            await conn.cancel(sid)
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            live = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
            assert len(live) == 1
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            calls = conn.updates_for(sid, "tool_call")
            assert [c["toolCallId"] for c in calls] == [live[0]["toolCallId"]]
            assert "rm -rf build" in calls[0]["title"] or calls[0]["rawInput"] == {"command": "rm -rf build"}
            replayed = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
            assert [u["toolCallId"] for u in replayed] == [live[0]["toolCallId"]]


# A process that holds a session file and has no handover socket (an older ama, or ama -p mid-turn).
_HOLDER = """
import sys
from ama_acp.redact import Redactor
from ama_acp.session.store.entries import Header
from ama_acp.session.store.session_store import SessionStore, new_session_id
store = SessionStore(sys.argv[1], redactor=Redactor(), fsync="never")
sid = new_session_id()
writer = store.create(Header(session_id=sid, cwd=sys.argv[2]))
print(sid, flush=True)
sys.stdin.read()
"""


async def test_a_session_open_in_another_process_is_named_as_such(tmp_path):
    """A holder that does not hand the session over (docs/sessions.md "Sessions open elsewhere") is named by its pid."""
    ama = Ama(tmp_path)
    holder = await anyio.open_process([sys.executable, "-c", _HOLDER, str(ama.data), str(ama.workspace)])
    try:
        assert holder.stdout is not None and holder.stdin is not None
        sid = b""
        with anyio.fail_after(30):
            while not sid.endswith(b"\n"):
                sid += await holder.stdout.receive()
        async with run_ama(ama, "--model", "scripted/demo", validate=False, process=True) as second:
            await second.initialize()
            with pytest.raises(Exception) as err:
                await second.request(
                    "session/load", {"sessionId": sid.decode().strip(), "cwd": str(ama.workspace), "mcpServers": []}
                )
            assert f"open in another ama process (pid {holder.pid}); close it there first" in str(err.value)
            assert "running a prompt" not in str(err.value)
    finally:
        assert holder.stdin is not None
        await holder.stdin.aclose()
        with anyio.fail_after(30):
            await holder.wait()
