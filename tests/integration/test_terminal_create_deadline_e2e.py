"""terminal/create may wait for a person (issue 39 item 7): a client can ask them before it creates the terminal
(`ama acp-client` does), so ama waits for its answer far longer than for the other terminal calls' 5 s — and a
cancel still ends that wait at once. A real `ama --mode acp` over real pipes, a real HTTP model server."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.session.editor.workspaces import CREATE_GRACE, TERMINAL_TIMEOUT
from tests.integration.test_cancel_e2e import KEY, command_call, configure, open_calls, prompt, start
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

# The person's time to decide: longer than the deadline terminal/create had (the other terminal calls' still).
DECIDING = TERMINAL_TIMEOUT + 1.0


async def test_a_client_that_asks_its_person_before_creating_a_terminal_still_gets_the_command_run(tmp_path):
    ama = Ama(tmp_path)
    asked: list[float] = []
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("echo ran-after-asking"), {"text": "done"})
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=True, terminal=True), process=True) as conn:
            real_create = conn.terminals.create

            async def asks_first(params: dict[str, Any]) -> dict[str, Any]:
                asked.append(time.monotonic())
                await anyio.sleep(DECIDING)  # the person deciding is the test, not a wait for something
                return await real_create(params)

            conn.set_handler("terminal/create", asks_first)
            sid = await start(conn, ama, "full_access")
            result = as_object(await (await prompt(conn, sid)).wait(timeout=DECIDING + 30))
            assert result["stopReason"] == "end_turn"
            [call] = conn.updates_for(sid, "tool_call")
            [final] = [
                u
                for u in conn.updates_for(sid, "tool_call_update")
                if u["toolCallId"] == call["toolCallId"] and u.get("status") in ("completed", "failed")
            ]
            assert final["status"] == "completed", final
            assert conn.terminals.created and conn.terminals.unreleased() == []
            assert "ran-after-asking" in str(llm.requests[1].body["messages"][-1]["content"])
            assert len(asked) == 1


async def test_a_cancel_while_the_person_decides_ends_the_turn_at_once(tmp_path):
    """The editor never answers terminal/create: the cancel ends the turn within the create's grace (the wait
    for a late terminal to release), not after the long deadline."""
    ama = Ama(tmp_path)
    asked = anyio.Event()
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("echo never"))
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=True, terminal=True), process=True) as conn:

            async def never_decides(params: dict[str, Any]) -> dict[str, Any]:
                asked.set()
                await anyio.sleep_forever()
                raise AssertionError("unreachable")

            conn.set_handler("terminal/create", never_decides)
            sid = await start(conn, ama, "full_access")
            pending = await prompt(conn, sid)
            with anyio.fail_after(10):
                await asked.wait()
            cancelled = time.monotonic()
            await conn.cancel(sid)
            result = as_object(await pending.wait(timeout=CREATE_GRACE + 5))
            assert result["stopReason"] == "cancelled"
            assert time.monotonic() - cancelled < CREATE_GRACE + 5
            assert open_calls(conn, sid) == []
            assert conn.terminals.created == []
