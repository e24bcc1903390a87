"""What a reloaded session shows of a cancelled turn, and what a second ama process is told.

- A tool call cancelled while its permission was being asked is part of the history: after a restart,
  session/load replays it with its final (failed) status, like the live turn showed it.
- A session open in one ama process is named as such when another process tries to load it.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from tests.integration.test_cancel_e2e import KEY, command_call, configure, prompt, start
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object, session_id
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


async def test_a_session_open_in_another_process_is_named_as_such(tmp_path):
    ama = Ama(tmp_path)
    async with run_ama(ama, "--model", "scripted/demo", process=True) as first:  # two processes
        await first.initialize()
        sid = session_id(await first.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        async with run_ama(ama, "--model", "scripted/demo", validate=False, process=True) as second:
            await second.initialize()
            with pytest.raises(Exception) as err:
                await second.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            assert "another ama process" in str(err.value)
            assert "running a prompt" not in str(err.value)
