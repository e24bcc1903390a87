"""The editor's answers to ama's fs/terminal requests are decoded where they arrive (session/editor/client.py), over
real pipes: an answer of the wrong shape fails that one tool call with a sentence naming what was wrong, the
terminal is still released, and the session goes on. An exit status of the wrong type is read as absent,
as the schema says, rather than breaking the command's result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, run_ama, write_script
from tests.support.json_values import as_str, session_id

pytestmark = pytest.mark.anyio

Handler = Callable[[dict[str, Any]], Awaitable[Any]]

READ = {"tool_calls": [{"id": "t1", "name": "read_file", "arguments": {"path": "a.txt"}}]}
RUN = {"tool_calls": [{"id": "t1", "name": "run_command", "arguments": {"command": "echo hi; exit 3"}}]}


def answering(value: Any) -> Callable[[AgentProcess], Handler]:
    async def handler(params: dict[str, Any]) -> Any:
        return value

    return lambda conn: handler


def output_with(**fields: Any) -> Callable[[AgentProcess], Handler]:
    """The client's real terminal/output answer with `fields` replaced."""

    def make(conn: AgentProcess) -> Handler:
        async def handler(params: dict[str, Any]) -> Any:
            return {**await conn.terminals.output(params), **fields}

        return handler

    return make


async def one_call(ama: Ama, call: dict[str, Any], method: str, answer: Callable[[AgentProcess], Handler]) -> Any:
    """One turn whose tool call meets `answer` to `method`, then a second turn; the call's final update."""
    (ama.workspace / "a.txt").write_text("hello\n")
    script = write_script(ama.tmp / "script.json", [call, {"text": "after"}, {"text": "again"}])
    env = {"AMA_SCRIPT": str(script)}
    # validate=False: the client's own answers break the schema on purpose
    async with run_ama(ama, "--model", "scripted/t", env=env, options=ClientOptions(), validate=False) as conn:
        conn.set_handler(method, answer(conn))
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": "full_access"})
        assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
        (final,) = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
        assert (await conn.prompt(sid, "again", timeout=30))["stopReason"] == "end_turn"  # the session goes on
        assert conn.terminals.unreleased() == []
        assert not conn.exited
        return final


def final_text(update: dict[str, Any]) -> str:
    return as_str(update["content"][-1]["content"]["text"])


@pytest.mark.parametrize(
    ("call", "method", "answer", "named"),
    [
        (RUN, "terminal/create", answering({"id": "term-1"}), "terminalId"),
        (READ, "fs/read_text_file", answering({"content": 7}), "$.content"),
    ],
    ids=["create-without-terminal-id", "read-content-not-text"],
)
async def test_a_malformed_answer_fails_the_call_and_the_session_goes_on(tmp_path, call, method, answer, named):
    final = await one_call(Ama(tmp_path), call, method, answer)
    text = final_text(final)
    assert final["status"] == "failed"
    assert f"The editor's answer to {method} was not understood" in text and named in text


async def test_an_exit_status_of_the_wrong_type_is_read_as_absent(tmp_path):
    final = await one_call(Ama(tmp_path), RUN, "terminal/output", output_with(exitStatus="done"))
    text = final_text(final)
    # terminal/wait_for_exit's status stands in: the command's own output and exit code, not an error of ama's
    assert final["status"] == "failed" and "hi" in text and "Exit code: 3" in text
    assert "unexpectedly" not in text
