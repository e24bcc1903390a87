"""An external agent's terminals, forwarded to the editor through ama (session/tasks/external/terminals.py): offered
only when the editor offers them, judged as ama's own `run_command` under the parent's mode, the cwd inside the
workspace, and the terminal ids mapped so the agent cannot reach a terminal that is not its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.sandbox import kernel_abi
from tests.integration.test_external_tasks_e2e import external, run_task
from tests.integration.test_subagents_e2e import written
from tests.integration.test_tasks_e2e import KEY, task_call, tool_messages
from tests.support.harness import Ama, permission_asks, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ABI, _ = kernel_abi()


def creates(conn: AgentProcess) -> list[dict[str, Any]]:
    """The terminal/create requests the editor got."""
    return [m["params"] for m in written(conn) if m.get("method") == "terminal/create"]


async def delegate(ama: Ama, directives: str, mode: str, options: ClientOptions | None = None) -> tuple[str, Any]:
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Run", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=options or ClientOptions()) as conn:
            sid, _ = await run_task(conn, ama, directives, mode=mode)
            return tool_messages(llm.requests[1].body)[0][1], (sid, conn)


async def test_a_command_runs_in_the_editors_terminal_under_an_id_of_amas(tmp_path):
    ama = Ama(tmp_path)
    result, (sid, conn) = await delegate(ama, "caps\nterm - echo hello", "full_access")
    assert "terminal: True" in result
    assert "term term-1: hello exit 0" in result  # the agent saw ama's id, not the editor's
    [made] = creates(conn)
    assert made["sessionId"] == sid and made["args"][-1] == "hello" and Path(made["args"][-2]).name == "echo"
    if ABI >= 1:  # the editor runs the sandbox's launcher, the agent's command at its end
        assert made["command"] == sys.executable and made["args"][2].endswith("landlock.py")
    assert made["cwd"] == str(ama.workspace)  # none given: the session's folder
    # Output, wait and release reached the editor under the id the editor gave.
    answers = [json.loads(e.raw) for e in conn.transcript if e.direction == "out" and '"terminalId"' in e.raw]
    [given] = [a["result"]["terminalId"] for a in answers if "result" in a]
    for method in ("terminal/wait_for_exit", "terminal/output", "terminal/release"):
        assert [m["params"]["terminalId"] for m in written(conn) if m.get("method") == method] == [given]


async def test_read_only_refuses_and_manual_asks(tmp_path):
    ama = Ama(tmp_path / "ro")
    result, (_, conn) = await delegate(ama, "term - echo hello", "read_only")
    assert "term error: Refused: The session is in Read only mode" in result
    assert creates(conn) == [] and conn.permission_log == []

    ama = Ama(tmp_path / "manual")
    result, (sid, conn) = await delegate(ama, "term - echo hi", "manual", ClientOptions(permission="allow_once"))
    [(params, _)] = permission_asks(conn)
    assert params["sessionId"] == sid and params["toolCall"]["kind"] == "execute"
    assert "term term-1: hi exit 0" in result and len(creates(conn)) == 1


async def test_a_cwd_outside_the_workspace_and_a_foreign_terminal_id_are_refused(tmp_path):
    ama = Ama(tmp_path)
    directives = f"term {tmp_path} echo out\ntermout editor-term-1\ntermout term-1"
    result, (_, conn) = await delegate(ama, directives, "full_access")
    assert f"term error: Refused: {tmp_path} is outside this session's workspace" in result
    assert "termout error: No terminal 'editor-term-1' was created for this agent" in result
    assert "termout error: No terminal 'term-1'" in result  # none made: the name is not the editor's either
    assert creates(conn) == []


async def test_an_editor_without_terminals_offers_none_to_the_agent(tmp_path):
    ama = Ama(tmp_path)
    result, (_, conn) = await delegate(ama, "caps\nterm - echo hello", "full_access", ClientOptions(terminal=False))
    assert "terminal: False" in result or "terminal: None" in result
    assert "term error:" in result and creates(conn) == []


async def test_a_terminal_the_agent_leaves_open_is_killed_and_released_when_its_task_ends(tmp_path):
    ama = Ama(tmp_path)
    result, (_, conn) = await delegate(ama, "termopen sleep 30", "full_access")
    assert "termopen term-1" in result
    methods = [m.get("method") for m in written(conn) if str(m.get("method", "")).startswith("terminal/")]
    assert methods == ["terminal/create", "terminal/kill", "terminal/release"]
