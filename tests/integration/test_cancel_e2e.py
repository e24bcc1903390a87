"""session/cancel at every await point of a turn, over real pipes against a real HTTP model server.

Invariants each time: the prompt answers stopReason `cancelled` exactly once; every tool_call sent in the
turn has a final status; the process lives; the next prompt in the same session works, and its request
carries no tool call without its result (a real provider rejects those).
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, local_config, run_ama
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer
from tests.support.raw import RawAma

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "k" * 12}


def configure(ama: Ama, url: str, retries: int = 1) -> None:
    ama.config.write_text(local_config(url, retries=retries))


def dangling(body: dict[str, Any]) -> list[str]:
    """Tool call ids of an OpenAI request that no tool message answers."""
    asked: list[str] = []
    answered: set[str] = set()
    for m in body.get("messages", []):
        for c in m.get("tool_calls") or []:
            asked.append(c["id"])
        if m.get("role") == "tool":
            answered.add(m["tool_call_id"])
    return [i for i in asked if i not in answered]


def open_calls(conn: AgentProcess, sid: str) -> list[str]:
    """Tool calls the person was shown that never got a final status."""
    shown = [u["toolCallId"] for u in conn.updates_for(sid, "tool_call")]
    final = {
        u["toolCallId"] for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")
    }
    return [i for i in shown if i not in final]


def responses_to(conn: AgentProcess, request_id: int) -> list[dict[str, Any]]:
    out = []
    for entry in conn.transcript:
        if entry.direction != "in":
            continue
        msg = json.loads(entry.raw)
        if "method" not in msg and msg.get("id") == request_id:
            out.append(msg)
    return out


async def start(conn: AgentProcess, ama: Ama, mode: str | None = None) -> str:
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    if mode:
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": mode})
    return sid


async def prompt(conn: AgentProcess, sid: str, text: str = "go") -> Any:
    return await conn.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


async def finish_and_check(conn: AgentProcess, llm: LLMServer, sid: str, pending: Any) -> None:
    result = as_object(await pending.wait(timeout=10))
    assert result["stopReason"] == "cancelled"
    assert open_calls(conn, sid) == []
    llm.enqueue({"text": "next turn works"})
    again = await conn.prompt(sid, "again", timeout=15)
    assert again["stopReason"] == "end_turn"
    assert dangling(llm.requests[-1].body) == []
    assert len(responses_to(conn, pending.id)) == 1
    assert not conn.exited


def command_call(command: str, cid: str = "c1") -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": "run_command", "arguments": {"command": command}}]}


async def test_cancel_while_streaming(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "x" * 400, "chunk_size": 2, "delay": 0.05})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            pending = await prompt(conn, sid)
            await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) >= 3)
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)


async def test_cancel_while_a_permission_is_pending_client_answers_cancelled_after(tmp_path):
    """By the book: session/cancel, then the client answers the open permission request `cancelled`."""
    ama = Ama(tmp_path)
    asked = anyio.Event()

    async def hold(params: dict[str, Any]) -> None:
        asked.set()
        await anyio.sleep_forever()  # the person never clicks; conn.cancel() answers `cancelled`

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("echo hi"))
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=hold)) as conn:
            sid = await start(conn, ama)
            pending = await prompt(conn, sid)
            with anyio.fail_after(10):
                await asked.wait()
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)
            assert [o for _, o in conn.permission_log] == [{"outcome": "cancelled"}]
            final = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
            assert final[0]["content"][-1]["content"]["text"] == "Cancelled."


async def test_permission_answered_cancelled_without_session_cancel_ends_the_turn(tmp_path):
    """Measured: a bare `cancelled` outcome ended the process. It ends the turn, `cancelled`."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("echo hi"))
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="cancel")) as conn:
            sid = await start(conn, ama)
            pending = await prompt(conn, sid)
            await finish_and_check(conn, llm, sid, pending)  # the process lived to serve the next turn


def test_cancel_and_cancelled_answer_in_one_write(tmp_path):
    """Measured 3/3: session/cancel and the `cancelled` answer in one write killed the process."""
    from tests.support.raw import RawAma

    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("echo hi"), {"text": "after"})
        raw = RawAma(ama, env=KEY)
        try:
            raw.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
            raw.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": _prompt(sid)})
            ask = _next_method(raw, "session/request_permission")
            cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
            answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}
            raw.send_line(json.dumps(cancel).encode() + b"\n" + json.dumps(answer).encode())
            seen = _until_response(raw, 3)
            assert seen["response"]["result"]["stopReason"] == "cancelled"
            assert seen["open"] == set()
            raw.send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": _prompt(sid)})
            assert _until_response(raw, 4)["response"]["result"]["stopReason"] == "end_turn"
            assert dangling(llm.requests[-1].body) == []
            assert raw.alive()
        finally:
            raw.close()


def _prompt(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}


def _next_method(raw: RawAma, method: str) -> dict[str, Any]:
    while True:
        msg = raw.recv()
        if msg.get("method") == method:
            return msg


def _until_response(raw: Any, req_id: int) -> dict[str, Any]:
    """Read to the response of `req_id`; also which tool calls were left without a final status."""
    shown: set[str] = set()
    final: set[str] = set()
    while True:
        msg = raw.recv()
        if msg.get("method") == "session/update":
            u = msg["params"]["update"]
            if u["sessionUpdate"] == "tool_call":
                shown.add(u["toolCallId"])
            elif u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed"):
                final.add(u["toolCallId"])
        elif "method" not in msg and msg.get("id") == req_id:
            return {"response": msg, "open": shown - final}


@pytest.mark.parametrize("editor", [True, False], ids=["editor-terminal", "local"])
async def test_cancel_while_a_tool_runs(tmp_path, editor):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("sleep 30"))
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=editor, terminal=editor)) as conn:
            sid = await start(conn, ama, "full_access")
            pending = await prompt(conn, sid)
            await conn.wait_for(
                lambda: any(u.get("status") == "in_progress" for u in conn.updates_for(sid, "tool_call_update"))
            )
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)
            assert conn.terminals.unreleased() == []


async def test_cancel_while_a_client_fs_read_is_in_flight(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("hello\n")
    reading = anyio.Event()

    async def never_answers(params: dict[str, Any]) -> dict[str, Any]:
        reading.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]})
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=True, terminal=False)) as conn:
            conn.set_handler("fs/read_text_file", never_answers)
            sid = await start(conn, ama)
            pending = await prompt(conn, sid)
            with anyio.fail_after(10):
                await reading.wait()
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)


async def test_cancel_while_terminal_create_is_in_flight_leaks_no_terminal(tmp_path):
    """The editor creates the terminal after ama was cancelled: ama still releases it."""
    ama = Ama(tmp_path)
    creating = anyio.Event()
    go = anyio.Event()

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command_call("sleep 30"))
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=True, terminal=True)) as conn:
            real_create = conn.terminals.create

            async def slow_create(params: dict[str, Any]) -> dict[str, Any]:
                creating.set()
                await go.wait()
                return await real_create(params)

            conn.set_handler("terminal/create", slow_create)
            sid = await start(conn, ama, "full_access")
            pending = await prompt(conn, sid)
            with anyio.fail_after(10):
                await creating.wait()
            await conn.cancel(sid)
            go.set()  # the editor answers after the cancel
            result = as_object(await pending.wait(timeout=10))
            assert result["stopReason"] == "cancelled"
            assert conn.terminals.created and conn.terminals.unreleased() == []
            assert open_calls(conn, sid) == []
            llm.enqueue({"text": "next"})
            assert (await conn.prompt(sid, "again", timeout=15))["stopReason"] == "end_turn"
            assert dangling(llm.requests[-1].body) == []


async def test_cancel_during_retry_backoff(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, retries=3)
        llm.enqueue({"status": 429, "retry_after": "30"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            pending = await prompt(conn, sid)
            await conn.wait_for(
                lambda: any("Retrying" in u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            )
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)


async def test_cancel_during_compaction(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "first answer", "usage": {"input": 7000, "output": 5}},
            {"text": "a slow summary " * 40, "chunk_size": 2, "delay": 0.05},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            # Long enough that a compaction frees 20 %: /compact on a smaller context is refused with no request.
            assert (await conn.prompt(sid, "hello " + "word " * 4000, timeout=15))["stopReason"] == "end_turn"
            pending = await prompt(conn, sid, "/compact")
            with anyio.fail_after(10):  # the summary request reaches the server; ama sends nothing meanwhile
                while len(llm.requests) < 2:  # noqa: ASYNC110 - a request on another thread, no event to wait on
                    await anyio.sleep(0.02)
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)
