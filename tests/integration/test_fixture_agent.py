"""The conformance suite's fixture agent (tests/support/acp_fixtures/fixture_agent.py), over real pipes.

First that it conforms: driven by ama's own client, every line it writes validates against the pinned stable
schema, and it does what each directive asks — replies, slow turns that cancel, reads, writes and commands
with and without the client's fs/terminal, permission answers, mode and config changes and close in the
middle of a turn, malformed input, a stdio MCP server, EOF. Then, one test a `--break`, that the break really
happens (the misbehaviour itself, not the suite's verdict on it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentExited, AgentProcess, ClientOptions, PendingRequest
from ama_acp.client.handlers import RpcError
from ama_conformance.schema.validate import WireRecorder, load_validator, stable_schema_path
from tests.support.acp_fixtures import BREAKS, agent_command
from tests.support.harness import permission_asks
from tests.support.json_values import as_object, session_id
from tests.support.leaks import processes_with_cmdline
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

# The suite's own stdio MCP server (stdlib only, one tool: conformance_echo).
SUITE_MCP_SERVER = Path(__file__).resolve().parents[2] / "conformance" / "servers" / "mcp_stdio.py"

DIRECTIVE = "acp-conformance:"
EXPECTED_CAPABILITIES = {
    "loadSession": False,
    "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
    "mcpCapabilities": {"http": False, "sse": False},
    "sessionCapabilities": {"close": {}},
}
EXPECTED_MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}


def mode_option(value: str) -> list[dict[str, Any]]:
    return [
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": value,
            "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}],
        }
    ]


# --------------------------------------------------------------------------------------------------
# Driving the fixture
# --------------------------------------------------------------------------------------------------


def check_wire(conn: AgentProcess, allowed: tuple[str, ...] = ()) -> None:
    """Every line the fixture wrote is a schema-valid message of its method (pinned stable schema), and ama's
    client saw no violation but the `allowed` kinds."""
    recorder = WireRecorder(load_validator(stable_schema_path()))
    for entry in conn.transcript:
        if entry.direction == "out":
            try:
                sent = json.loads(entry.raw)
            except ValueError:
                continue  # a malformed line a test wrote on purpose
            # Only well-formed requests name an id the fixture may answer; the malformed ones are answered
            # with id null, which the recorder must not take for an answer to a request "sent" with id null.
            if isinstance(sent, dict) and sent.get("jsonrpc") == "2.0" and isinstance(sent.get("method"), str):
                if isinstance(sent.get("id"), str | int) and not isinstance(sent.get("id"), bool):
                    recorder.sent(sent)
        else:
            recorder.received(entry.raw)
    recorder.assert_clean()
    bad = [v for v in conn.violations if v.kind not in allowed]
    assert not bad, f"ama's client saw protocol violations: {bad}"


@asynccontextmanager
async def fixture(
    tmp_path: Path,
    *breaks: str,
    options: ClientOptions | None = None,
    validate: bool = True,
    allowed: tuple[str, ...] = (),
) -> AsyncIterator[AgentProcess]:
    conn = AgentProcess(
        agent_command(*breaks),
        options or ClientOptions(),
        cwd=str(tmp_path),
        stderr=str(tmp_path / "agent-stderr.log"),
    )
    async with conn:
        yield conn
    if validate:
        check_wire(conn, allowed)


async def open_session(conn: AgentProcess, cwd: Path, **extra: Any) -> str:
    await conn.initialize()
    new = await conn.new_session(cwd, **extra)
    sid = new["sessionId"]
    assert isinstance(sid, str)
    return sid


def directive(verb: str, *args: str) -> str:
    return " ".join(["Please do this.\n" + DIRECTIVE, verb, *args])


async def start_prompt(conn: AgentProcess, sid: str, text: str) -> PendingRequest:
    return await conn.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def received(conn: AgentProcess, direction: str = "in") -> list[tuple[int, dict[str, Any]]]:
    """(transcript index, message) of every JSON object the fixture wrote (or, "out", the client wrote)."""
    out = []
    for i, entry in enumerate(conn.transcript):
        if entry.direction != direction:
            continue
        try:
            msg = json.loads(entry.raw)
        except ValueError:
            continue
        if isinstance(msg, dict):
            out.append((i, msg))
    return out


def response_index(conn: AgentProcess, request_id: Any) -> int:
    found = [i for i, m in received(conn) if "method" not in m and m.get("id") == request_id]
    assert len(found) == 1, f"expected one response to {request_id!r}, got {len(found)}"
    return found[0]


def agent_requests(conn: AgentProcess, method: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, m) for i, m in received(conn) if m.get("method") == method and "id" in m]


def updates(conn: AgentProcess, sid: str, kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [
        (i, m["params"]["update"])
        for i, m in received(conn)
        if m.get("method") == "session/update"
        and m["params"].get("sessionId") == sid
        and m["params"]["update"].get("sessionUpdate") == kind
    ]


def said(conn: AgentProcess, sid: str) -> str:
    return "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))


def tool_updates(conn: AgentProcess, sid: str) -> list[dict[str, Any]]:
    return conn.updates_for(sid, "tool_call_update")


def final_tool_update(conn: AgentProcess, sid: str) -> dict[str, Any]:
    done = [u for u in tool_updates(conn, sid) if u.get("status") in ("completed", "failed")]
    assert len(done) == 1, f"expected one final tool_call_update, got {done}"
    return done[0]


async def expect_error(conn: AgentProcess, method: str, params: dict[str, Any], code: int) -> str:
    with pytest.raises(RpcError) as caught:
        await conn.request(method, params, timeout=10)
    assert caught.value.code == code, caught.value
    return caught.value.message


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------------------------------
# Conforming behaviour
# --------------------------------------------------------------------------------------------------


async def test_initialize_new_session_and_a_reply_turn(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        init = as_object(await conn.initialize())
        assert init["protocolVersion"] == 1
        assert init["agentCapabilities"] == EXPECTED_CAPABILITIES
        assert init["authMethods"] == []
        assert init["agentInfo"]["name"] == "acp-fixture-agent"

        new = await conn.new_session(tmp_path)
        sid = session_id(new)
        uuid.UUID(sid)
        assert new["modes"] == EXPECTED_MODES
        assert new["configOptions"] == mode_option("ask")
        await conn.wait_for(lambda: bool(updates(conn, sid, "available_commands_update")))
        [(update_at, commands)] = updates(conn, sid, "available_commands_update")
        assert commands["availableCommands"] == []
        [new_request] = [m["id"] for _, m in received(conn, "out") if m.get("method") == "session/new"]
        assert response_index(conn, new_request) < update_at, "the commands update must follow the response"

        assert (await conn.prompt(sid, "hello", timeout=10)) == {"stopReason": "end_turn"}
        assert said(conn, sid) == "Conformance reply."
        assert len(conn.updates_for(sid, "agent_message_chunk")) == 2

        result = await conn.prompt(sid, directive("reply", "Hello there"), timeout=10)
        assert result["stopReason"] == "end_turn"
        assert said(conn, sid).endswith("Hello there")

        # resource_link and embedded resource blocks are accepted beside the text.
        blocks = [
            {"type": "text", "text": directive("reply", "with context")},
            {"type": "resource_link", "uri": "file:///tmp/x.txt", "name": "x.txt"},
            {"type": "resource", "resource": {"uri": "file:///tmp/y.txt", "text": "why"}},
        ]
        assert await conn.request("session/prompt", {"sessionId": sid, "prompt": blocks}, timeout=10) == {
            "stopReason": "end_turn"
        }
        assert said(conn, sid).endswith("with context")


async def test_initialize_answers_version_1_and_refuses_a_missing_or_non_integer_version(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        assert (await conn.initialize(protocol_version=7))["protocolVersion"] == 1
        assert (await conn.initialize(protocol_version=0))["protocolVersion"] == 1
        for bad in ("1", 1.5, True, None):
            await expect_error(conn, "initialize", {"protocolVersion": bad}, -32602)
        await expect_error(conn, "initialize", {"clientCapabilities": {}}, -32602)


async def test_a_slow_turn_is_cancelled_then_the_session_goes_on(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path)
        await conn.notify("session/cancel", {"sessionId": sid})  # no turn: ignored
        await conn.notify("session/cancel", {"sessionId": "no-such-session"})
        pending = await start_prompt(conn, sid, directive("slow"))
        await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) >= 3)
        await conn.cancel(sid)
        assert await pending.wait(10) == {"stopReason": "cancelled"}
        answered_at = response_index(conn, pending.id)

        assert (await conn.prompt(sid, "next", timeout=10))["stopReason"] == "end_turn"
        next_prompt_at = max(i for i, e in enumerate(conn.transcript) if e.direction == "out")
        late = [i for i, _ in updates(conn, sid, "agent_message_chunk") if answered_at < i < next_prompt_at]
        assert late == [], "no update of the cancelled turn may follow its response"
    assert not [m for _, m in received(conn) if m.get("id", 0) is None], "the cancels were answered"


@pytest.mark.parametrize("fs", [True, False], ids=["client-fs", "own-fs"])
async def test_read(tmp_path: Path, fs: bool) -> None:
    target = tmp_path / "in.txt"
    target.write_text("line one\nline two\n", encoding="utf-8")
    async with fixture(tmp_path, options=ClientOptions(fs=fs)) as conn:
        sid = await open_session(conn, tmp_path)
        assert (await conn.prompt(sid, directive("read", str(target)), timeout=10))["stopReason"] == "end_turn"
        [call] = conn.updates_for(sid, "tool_call")
        assert call["kind"] == "read" and call["status"] == "pending"
        assert call["locations"] == [{"path": str(target)}]
        final = final_tool_update(conn, sid)
        assert final["toolCallId"] == call["toolCallId"] and final["status"] == "completed"
        assert final["content"] == [{"type": "content", "content": {"type": "text", "text": "line one\nline two\n"}}]
        asked = agent_requests(conn, "fs/read_text_file")
        if fs:
            assert [m["params"] for _, m in asked] == [{"sessionId": sid, "path": str(target)}]
        else:
            assert asked == []

        # A file that is not there: the tool call fails, the turn does not.
        missing = tmp_path / "missing.txt"
        assert (await conn.prompt(sid, directive("read", str(missing)), timeout=10))["stopReason"] == "end_turn"
        assert tool_updates(conn, sid)[-1]["status"] == "failed"


@pytest.mark.parametrize("fs", [True, False], ids=["client-fs", "own-fs"])
async def test_write_with_permission(tmp_path: Path, fs: bool) -> None:
    target = tmp_path / "sub" / "out.txt"
    async with fixture(tmp_path, options=ClientOptions(fs=fs)) as conn:
        sid = await open_session(conn, tmp_path)
        result = await conn.prompt(sid, directive("write", str(target), "written text"), timeout=10)
        assert result["stopReason"] == "end_turn"
        assert target.read_text(encoding="utf-8") == "written text"
        [call] = conn.updates_for(sid, "tool_call")
        assert call["kind"] == "edit" and call["status"] == "pending"
        [(asked, answer)] = permission_asks(conn)
        assert asked["toolCall"]["toolCallId"] == call["toolCallId"]
        assert asked["options"] == [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        assert answer == {"outcome": "selected", "optionId": "allow"}
        final = final_tool_update(conn, sid)
        assert final["status"] == "completed"
        assert final["content"] == [{"type": "diff", "path": str(target), "oldText": None, "newText": "written text"}]
        assert bool(agent_requests(conn, "fs/write_text_file")) == fs


@pytest.mark.parametrize("policy", ["reject_once", "cancel"])
async def test_write_not_permitted_is_not_written(tmp_path: Path, policy: str) -> None:
    target = tmp_path / "out.txt"
    async with fixture(tmp_path, options=ClientOptions(permission=policy)) as conn:
        sid = await open_session(conn, tmp_path)
        result = await conn.prompt(sid, directive("write", str(target), "nope"), timeout=10)
        assert result["stopReason"] == "end_turn"  # a cancelled answer outside a cancelled turn ends it normally
        assert not target.exists()
        assert final_tool_update(conn, sid)["status"] == "failed"
        assert agent_requests(conn, "fs/write_text_file") == []


async def test_a_cancel_while_permission_is_asked_ends_the_turn_cancelled(tmp_path: Path) -> None:
    async def never_answer(params: dict[str, Any]) -> None:
        await anyio.sleep_forever()

    target = tmp_path / "out.txt"
    async with fixture(tmp_path, options=ClientOptions(permission=never_answer)) as conn:
        sid = await open_session(conn, tmp_path)
        pending = await start_prompt(conn, sid, directive("write", str(target), "nope"))
        await conn.wait_for(lambda: bool(agent_requests(conn, "session/request_permission")))
        await conn.cancel(sid)  # the client answers the permission request `cancelled`
        assert await pending.wait(10) == {"stopReason": "cancelled"}
        assert conn.permission_log[0][1] == {"outcome": "cancelled"}
        assert not target.exists()
        assert final_tool_update(conn, sid)["status"] == "failed"


async def test_run_in_the_clients_terminal(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path)
        result = await conn.prompt(sid, directive("run", "echo conformance-out; pwd"), timeout=15)
        assert result["stopReason"] == "end_turn"
        [call] = conn.updates_for(sid, "tool_call")
        assert call["kind"] == "execute"
        [(_, create)] = agent_requests(conn, "terminal/create")
        assert create["params"]["command"] == "sh"
        assert create["params"]["args"] == ["-c", "echo conformance-out; pwd"]
        assert create["params"]["cwd"] == str(tmp_path)
        [terminal_id] = conn.terminals.created
        assert conn.terminals.unreleased() == []
        embedded = [{"type": "terminal", "terminalId": terminal_id}]
        shown = [i for i, u in updates(conn, sid, "tool_call_update") if u.get("content") == embedded]
        [(released_at, _)] = agent_requests(conn, "terminal/release")
        assert shown and shown[0] < released_at, "the terminal must be shown before it is released"
        assert [m for _, m in agent_requests(conn, "terminal/wait_for_exit")]
        assert final_tool_update(conn, sid)["status"] == "completed"
        assert conn.terminal_output(terminal_id) == f"conformance-out\n{tmp_path}\n"
        assert "conformance-out" in said(conn, sid)


async def test_run_without_a_terminal_runs_it_itself(tmp_path: Path) -> None:
    async with fixture(tmp_path, options=ClientOptions(terminal=False)) as conn:
        sid = await open_session(conn, tmp_path)
        result = await conn.prompt(sid, directive("run", "echo conformance-out; pwd; exit 3"), timeout=15)
        assert result["stopReason"] == "end_turn"
        assert not [m for _, m in received(conn) if str(m.get("method", "")).startswith("terminal/")]
        final = final_tool_update(conn, sid)
        assert final["status"] == "failed"  # exit code 3
        assert final["content"][0]["content"]["text"] == f"conformance-out\n{tmp_path}\n"


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "own-process"])
async def test_run_rejected_does_not_run(tmp_path: Path, terminal: bool) -> None:
    marker = tmp_path / "ran"
    async with fixture(tmp_path, options=ClientOptions(terminal=terminal, permission="reject_once")) as conn:
        sid = await open_session(conn, tmp_path)
        result = await conn.prompt(sid, directive("run", f"touch {marker}"), timeout=10)
        assert result["stopReason"] == "end_turn"
        assert final_tool_update(conn, sid)["status"] == "failed"
        assert agent_requests(conn, "terminal/create") == []
    assert not marker.exists()


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "own-process"])
async def test_a_cancel_stops_a_running_command(tmp_path: Path, terminal: bool) -> None:
    async with fixture(tmp_path, options=ClientOptions(terminal=terminal)) as conn:
        sid = await open_session(conn, tmp_path)
        started = time.monotonic()
        pending = await start_prompt(conn, sid, directive("run", "sleep 30"))
        await conn.wait_for(lambda: any(u.get("status") == "in_progress" for u in tool_updates(conn, sid)))
        await conn.cancel(sid)
        assert await pending.wait(10) == {"stopReason": "cancelled"}
        assert time.monotonic() - started < 15
        if terminal:
            assert agent_requests(conn, "terminal/kill")
            assert conn.terminals.unreleased() == []
        assert final_tool_update(conn, sid)["status"] == "failed"


async def test_mode_and_config_option_change_while_a_turn_runs(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path)
        pending = await start_prompt(conn, sid, directive("slow"))
        await conn.wait_for(lambda: bool(conn.updates_for(sid, "agent_message_chunk")))

        assert await conn.request("session/set_mode", {"sessionId": sid, "modeId": "code"}, timeout=5) == {}
        await conn.wait_for(lambda: bool(conn.updates_for(sid, "current_mode_update")))
        assert conn.updates_for(sid, "current_mode_update")[-1]["currentModeId"] == "code"
        # The mode option follows set_mode, and set_mode follows the option.
        params = {"sessionId": sid, "configId": "mode", "value": "code"}
        answer = await conn.request("session/set_config_option", params, timeout=5)
        assert answer == {"configOptions": mode_option("code")}
        answer = await conn.request("session/set_config_option", {**params, "value": "ask"}, timeout=5)
        assert answer == {"configOptions": mode_option("ask")}

        await expect_error(conn, "session/set_mode", {"sessionId": sid, "modeId": "plan"}, -32602)
        await expect_error(conn, "session/set_mode", {"sessionId": sid, "modeId": ["ask"]}, -32602)
        await expect_error(conn, "session/set_config_option", {**params, "configId": "model"}, -32602)
        await expect_error(conn, "session/set_config_option", {**params, "value": "plan"}, -32602)
        await expect_error(conn, "session/set_config_option", {**params, "type": "boolean", "value": True}, -32602)
        assert not pending.done, "the turn goes on meanwhile"
        ticks = len(conn.updates_for(sid, "agent_message_chunk"))
        await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) > ticks)
        await conn.cancel(sid)
        assert await pending.wait(10) == {"stopReason": "cancelled"}


async def test_close_in_the_middle_of_a_turn(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path)
        pending = await start_prompt(conn, sid, directive("slow"))
        await conn.wait_for(lambda: bool(conn.updates_for(sid, "agent_message_chunk")))
        close = await conn.start_request("session/close", {"sessionId": sid})
        assert await close.wait(10) == {}
        assert await pending.wait(1) == {"stopReason": "cancelled"}
        assert response_index(conn, pending.id) < response_index(conn, close.id)

        gone = {"sessionId": sid}
        await expect_error(conn, "session/prompt", {**gone, "prompt": [{"type": "text", "text": "hi"}]}, -32602)
        await expect_error(conn, "session/set_mode", {**gone, "modeId": "code"}, -32602)
        await expect_error(conn, "session/set_config_option", {**gone, "configId": "mode", "value": "ask"}, -32602)
        await expect_error(conn, "session/close", gone, -32602)
        # Other sessions are untouched.
        other = session_id(await conn.new_session(tmp_path))
        assert (await conn.prompt(other, "hi", timeout=10))["stopReason"] == "end_turn"


MALFORMED_LINES = [
    ("not json at all", -32700),
    ('{"jsonrpc":"2.0","id":"r1","method":"initialize",', -32700),
    ("[1, 2]", -32600),
    ('"a string"', -32600),
    ('{"jsonrpc":"2.0","id":"r2"}', -32600),
    ('{"jsonrpc":"2.0","id":"r3","method":7}', -32600),
    ('{"id":"r4","method":"session/new","params":{}}', -32600),
    ('{"jsonrpc":"1.0","id":"r5","method":"initialize","params":{"protocolVersion":1}}', -32600),
    ('{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":1}}', -32600),
    ('{"jsonrpc":"2.0","id":null,"method":"initialize","params":{"protocolVersion":1}}', -32600),
    ('{"jsonrpc":"2.0","id":"r6","result":{},"error":{"code":1,"message":"both"}}', -32600),
]


async def test_malformed_input_gets_specific_errors_and_the_agent_lives_on(tmp_path: Path) -> None:
    async with fixture(tmp_path, allowed=("unknown_response_id",)) as conn:
        sid = await open_session(conn, tmp_path)
        for line, _ in MALFORMED_LINES:
            await conn.send_raw(line)
        await conn.send_raw('{"jsonrpc":"2.0","id":"r7","method":"session/new","params":[1]}')
        await conn.send_raw('{"jsonrpc":"2.0","method":"_ext/note","params":{}}')  # notifications: never answered
        await conn.send_raw('{"jsonrpc":"2.0","method":"no/such/notification"}')
        await conn.send_raw('{"jsonrpc":"2.0","method":"session/cancel","params":[1]}')

        def null_id_errors() -> list[int]:
            return [m["error"]["code"] for _, m in received(conn) if m.get("id", 0) is None and "error" in m]

        await conn.wait_for(lambda: len(null_id_errors()) >= len(MALFORMED_LINES))
        assert null_id_errors() == [code for _, code in MALFORMED_LINES]
        await conn.wait_for(lambda: any(m.get("id") == "r7" for _, m in received(conn)))
        assert next(m for _, m in received(conn) if m.get("id") == "r7")["error"]["code"] == -32602

        for method in ("session/load", "authenticate", "session/list", "_ext/thing", "no/such/method"):
            await expect_error(conn, method, {}, -32601)

        cwd = str(tmp_path)
        await expect_error(conn, "session/new", {"cwd": "relative/dir", "mcpServers": []}, -32602)
        await expect_error(conn, "session/new", {"mcpServers": []}, -32602)
        await expect_error(conn, "session/new", {"cwd": cwd}, -32602)
        await expect_error(conn, "session/new", {"cwd": cwd, "mcpServers": {}}, -32602)
        await expect_error(conn, "session/new", {"cwd": cwd, "mcpServers": [{"name": "x", "command": 1}]}, -32602)
        for transport in ("http", "sse"):
            remote = {"name": "remote", "url": "http://127.0.0.1:9/mcp", "headers": []}
            server: dict[str, Any] = {"type": transport, **remote}
            message = await expect_error(conn, "session/new", {"cwd": cwd, "mcpServers": [server]}, -32602)
            assert transport in message

        def prompt(*blocks: Any) -> dict[str, Any]:
            return {"sessionId": sid, "prompt": list(blocks)}

        image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
        assert "image" in await expect_error(conn, "session/prompt", prompt(image), -32602)
        assert "audio" in await expect_error(conn, "session/prompt", prompt(audio), -32602)
        await expect_error(conn, "session/prompt", prompt({"type": "text"}), -32602)
        await expect_error(conn, "session/prompt", prompt({"type": "video"}), -32602)
        await expect_error(conn, "session/prompt", prompt("text"), -32602)
        await expect_error(conn, "session/prompt", {"sessionId": sid, "prompt": "hi"}, -32602)
        await expect_error(conn, "session/prompt", {"sessionId": "nope", "prompt": []}, -32602)
        await expect_error(conn, "session/prompt", {"sessionId": 7, "prompt": []}, -32602)

        slow = await start_prompt(conn, sid, directive("slow"))
        why = await expect_error(conn, "session/prompt", prompt({"type": "text", "text": "hi"}), -32602)
        assert "already running" in why
        await conn.cancel(sid)
        assert await slow.wait(10) == {"stopReason": "cancelled"}
        assert (await conn.prompt(sid, "still here", timeout=10))["stopReason"] == "end_turn"
        assert conn.returncode is None
    assert conn.returncode == 0


ECHO_SERVER = r"""
import json, os, sys
with open(os.environ["ECHO_PID_FILE"], "w") as f:
    f.write(str(os.getpid()))
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "echo", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        text = params["arguments"]["text"] + " " + os.environ.get("ECHO_MARK", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = None
    reply = {"jsonrpc": "2.0", "id": msg["id"]}
    reply.update({"result": result} if result is not None else {"error": {"code": -32601, "message": method}})
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""


def echo_server(tmp_path: Path, name: str = "echo") -> tuple[dict[str, Any], Path]:
    """A stdio MCP server entry for session/new (a stdlib echo server) and the file it writes its pid to."""
    script = tmp_path / "echo_server.py"
    script.write_text(ECHO_SERVER, encoding="utf-8")
    pid_file = tmp_path / f"{name}.pid"
    env = [{"name": "ECHO_PID_FILE", "value": str(pid_file)}, {"name": "ECHO_MARK", "value": "via-env"}]
    return {"name": name, "command": sys.executable, "args": [str(script)], "env": env}, pid_file


async def test_the_suites_mcp_server_is_connected_called_and_stopped_with_the_session(tmp_path: Path) -> None:
    messages = tmp_path / "mcp-messages.jsonl"
    server = {
        "name": "conformance",
        "command": sys.executable,
        "args": [str(SUITE_MCP_SERVER), "--log", str(messages)],
        "env": [],
    }
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path, mcp_servers=[server])
        assert processes_with_cmdline(str(messages)), "the server runs for the session"
        assert (await conn.prompt(sid, directive("mcp", "conformance_echo"), timeout=15))["stopReason"] == "end_turn"
        [call] = conn.updates_for(sid, "tool_call")
        final = final_tool_update(conn, sid)
        assert final["toolCallId"] == call["toolCallId"] and final["status"] == "completed"
        assert final["content"] == [{"type": "content", "content": {"type": "text", "text": "echo: conformance"}}]

        logged = [json.loads(line) for line in messages.read_text(encoding="utf-8").splitlines()]
        assert [m["method"] for m in logged] == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
        hello = logged[0]["params"]
        assert hello["protocolVersion"] == "2025-06-18" and hello["capabilities"] == {}
        assert hello["clientInfo"]["name"] == "acp-fixture-agent"
        assert logged[3]["params"] == {"name": "conformance_echo", "arguments": {"text": "conformance"}}

        assert await conn.request("session/close", {"sessionId": sid}, timeout=10) == {}
        await conn.wait_for(lambda: not processes_with_cmdline(str(messages)))


async def test_mcp_env_entries_reach_the_server_and_one_that_cannot_start_is_skipped(tmp_path: Path) -> None:
    server, pid_file = echo_server(tmp_path)
    broken = {"name": "broken", "command": str(tmp_path / "no-such-program"), "args": [], "env": []}
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path, mcp_servers=[broken, server])  # the broken one is skipped
        pid = int(pid_file.read_text(encoding="utf-8"))
        assert alive(pid)

        assert (await conn.prompt(sid, directive("mcp", "echo"), timeout=15))["stopReason"] == "end_turn"
        [call] = conn.updates_for(sid, "tool_call")
        final = final_tool_update(conn, sid)
        assert final["toolCallId"] == call["toolCallId"] and final["status"] == "completed"
        # The arguments reached the tool and the session's env entries reached the server.
        assert final["content"][0]["content"]["text"] == "conformance via-env"

        assert (await conn.prompt(sid, directive("mcp", "no_such_tool"), timeout=10))["stopReason"] == "end_turn"
        assert "no_such_tool" in said(conn, sid)
        assert len(conn.updates_for(sid, "tool_call")) == 1

        assert await conn.request("session/close", {"sessionId": sid}, timeout=10) == {}
        await conn.wait_for(lambda: not alive(pid))


async def test_eof_cancels_the_turn_stops_the_mcp_servers_and_exits_0(tmp_path: Path) -> None:
    server, pid_file = echo_server(tmp_path)
    async with fixture(tmp_path) as conn:
        sid = await open_session(conn, tmp_path, mcp_servers=[server])
        pid = int(pid_file.read_text(encoding="utf-8"))
        pending = await start_prompt(conn, sid, directive("slow"))
        await conn.wait_for(lambda: bool(conn.updates_for(sid, "agent_message_chunk")))
        started = time.monotonic()
        assert await conn.close(timeout=5) == 0
        assert time.monotonic() - started < 4, "the exit must be prompt, not the client's terminate"
        assert await pending.wait(1) == {"stopReason": "cancelled"}
    poll_until(lambda: not alive(pid), 5, "the MCP server to be gone after the agent's exit")


async def test_eof_right_after_start_exits_0(tmp_path: Path) -> None:
    async with fixture(tmp_path) as conn:
        assert await conn.close(timeout=5) == 0


# --------------------------------------------------------------------------------------------------
# Each break really breaks its rule
# --------------------------------------------------------------------------------------------------


def test_every_break_has_its_test() -> None:
    assert len(BREAKS) == 14
    for name, description in BREAKS.items():
        assert description and "\n" not in description
        assert f"test_break_{name.replace('-', '_')}" in globals(), f"no test shows the {name} break"


def test_break_with_an_unknown_name_is_a_usage_error() -> None:
    done = subprocess.run(agent_command("no-such-break"), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert done.returncode == 2
    assert done.stdout == b""
    assert b"usage:" in done.stderr and b"no-such-break" in done.stderr


# The command line is read the quick way (tests/support/acp_fixtures/quick_args.py) where it is plain, else by
# argparse: the two must read every plain line alike, and leave every other line to argparse.
PLAIN_LINES = [
    [],
    ["--break=fs-unoffered", "--break", "reused-id", "--escapes", "--escapes"],
    ["--models", "usage-first", "--models=options-first", "--hostile", "flood", "--hostile=nested", "--outside", "/o"],
    ["--title", "A title = with spaces", "--title=t=2", "--persist", "/p", "--load-usage", "before", "--auth=ok"],
    ["--close-answers-first", "--close-error", "--prompt-error", "--late-after-cancel", "0.25", "--huge-size", "1_000"],
    ["--late-after-cancel=1e-3", "--huge-size= 12 ", "--auth", "error", "--load-usage=after", "--title", "é"],
]
ARGPARSE_LINES = [
    ["--break", "no-such-break"],
    ["--brea", "fs-unoffered"],
    ["-h"],
    ["--help"],
    ["--", "--escapes"],
    ["positional"],
    ["--title"],
    ["--title", "-x"],
    ["--title", ""],
    ["--title="],
    ["--late-after-cancel", "-1"],
    ["--huge-size", "12.5"],
    ["--models", "sideways"],
    ["--hostile", "no-such"],
    ["--escapes=yes"],
    ["--esc"],
]


def test_the_quick_command_line_reads_as_argparse_and_leaves_the_rest_to_it() -> None:
    import argparse

    from tests.support.acp_fixtures import fixture_agent
    from tests.support.acp_fixtures.quick_args import FLAG, MANY, ONE, quick

    parser = fixture_agent.build_parser()
    actions = {a.option_strings[0]: a for a in parser._actions if a.option_strings and a.dest != "help"}
    assert set(actions) == set(fixture_agent.OPTIONS)
    kinds = {argparse._StoreTrueAction: FLAG, argparse._AppendAction: MANY, argparse._StoreAction: ONE}
    for option, (dest, kind, convert, choices) in fixture_agent.OPTIONS.items():
        action = actions[option]
        assert (dest, kind, convert) == (action.dest, kinds[type(action)], action.type), option
        assert fixture_agent.DEFAULTS[dest] == action.default, option
        assert choices is None or set(choices) == set(action.choices or fixture_agent.BREAKS), option
    assert set(fixture_agent.DEFAULTS) == {a.dest for a in actions.values()}
    for argv in PLAIN_LINES:
        values = quick(argv, fixture_agent.OPTIONS, fixture_agent.DEFAULTS)
        assert values == vars(fixture_agent.parse_args_fully(argv)), argv
    for argv in ARGPARSE_LINES:
        assert quick(argv, fixture_agent.OPTIONS, fixture_agent.DEFAULTS) is None, argv
    assert fixture_agent.DEFAULTS["breaks"] == [] and fixture_agent.DEFAULTS["hostile"] == []  # not appended to


def test_the_agents_uuids_are_the_uuid_modules() -> None:
    from tests.support.acp_fixtures.coverage_agent import uuid5_url
    from tests.support.acp_fixtures.fixture_ids import new_uuid4

    ids = {new_uuid4() for _ in range(200)}
    assert len(ids) == 200 and all(str(uuid.UUID(i)) == i and uuid.UUID(i).version == 4 for i in ids)
    for name in ["", "s1", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "é ü", "x" * 300]:
        assert uuid5_url(name) == str(uuid.uuid5(uuid.NAMESPACE_URL, name))


async def read_in_a_session(conn: AgentProcess, tmp_path: Path) -> tuple[str, Path]:
    target = tmp_path / "in.txt"
    target.write_text("content\n", encoding="utf-8")
    sid = await open_session(conn, tmp_path)
    assert (await conn.prompt(sid, directive("read", str(target)), timeout=10))["stopReason"] == "end_turn"
    return sid, target


async def test_break_fs_unoffered(tmp_path: Path) -> None:
    async with fixture(tmp_path, "fs-unoffered", options=ClientOptions(fs=False), validate=False) as conn:
        sid, _ = await read_in_a_session(conn, tmp_path)
        assert agent_requests(conn, "fs/read_text_file"), "it asked for fs it was not offered"
        assert conn.violations_of("unadvertised_method")
        assert final_tool_update(conn, sid)["content"][0]["content"]["text"] == "content\n"  # its own read


async def test_break_terminal_unoffered(tmp_path: Path) -> None:
    async with fixture(tmp_path, "terminal-unoffered", options=ClientOptions(terminal=False), validate=False) as conn:
        sid = await open_session(conn, tmp_path)
        assert (await conn.prompt(sid, directive("run", "echo hi"), timeout=10))["stopReason"] == "end_turn"
        assert agent_requests(conn, "terminal/create")
        assert conn.violations_of("unadvertised_method")
        assert final_tool_update(conn, sid)["status"] == "completed"  # it ran it itself


async def test_break_reused_id(tmp_path: Path) -> None:
    async with fixture(tmp_path, "reused-id", validate=False) as conn:
        sid, _ = await read_in_a_session(conn, tmp_path)
        asked = agent_requests(conn, "fs/read_text_file")
        assert len(asked) == 2 and asked[0][1]["id"] == asked[1][1]["id"]
        # Both were outstanding: the second went out before the first was answered.
        answers = [i for i, m in received(conn, "out") if "method" not in m and m.get("id") == asked[0][1]["id"]]
        assert answers and asked[1][0] < answers[0]
        assert final_tool_update(conn, sid)["status"] == "completed"


async def test_break_answers_cancel(tmp_path: Path) -> None:
    async with fixture(tmp_path, "answers-cancel", validate=False, allowed=("unknown_response_id",)) as conn:
        sid = await open_session(conn, tmp_path)
        pending = await start_prompt(conn, sid, directive("slow"))
        await conn.wait_for(lambda: bool(conn.updates_for(sid, "agent_message_chunk")))
        await conn.cancel(sid)
        assert await pending.wait(10) == {"stopReason": "cancelled"}  # it still cancels
        assert '{"jsonrpc":"2.0","id":null,"result":{}}' in [e.raw for e in conn.transcript if e.direction == "in"]


async def test_break_root_field(tmp_path: Path) -> None:
    async with fixture(tmp_path, "root-field", validate=False) as conn:
        init = await conn.initialize()
        assert "extra" not in init
        new = await conn.new_session(tmp_path)
        assert new["extra"] is True
        assert "extra" not in await conn.prompt(session_id(new), "hi", timeout=10)


async def test_break_boolean_option(tmp_path: Path) -> None:
    async with fixture(tmp_path, "boolean-option", validate=False) as conn:
        await conn.initialize()  # ama's client advertises no boolean config options by default
        new = as_object(await conn.new_session(tmp_path))
        assert [o["id"] for o in new["configOptions"] if o["type"] == "boolean"] == ["verbose"]


async def test_break_early_update(tmp_path: Path) -> None:
    async with fixture(tmp_path, "early-update", validate=False) as conn:
        await conn.initialize()
        pending = await conn.start_request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = as_object(await pending.wait(10))["sessionId"]
        [(update_at, _)] = updates(conn, sid, "available_commands_update")
        assert update_at < response_index(conn, pending.id)


async def test_break_late_chunk(tmp_path: Path) -> None:
    async with fixture(tmp_path, "late-chunk", validate=False) as conn:
        sid = await open_session(conn, tmp_path)
        pending = await start_prompt(conn, sid, "hi")
        assert await pending.wait(10) == {"stopReason": "end_turn"}
        answered_at = response_index(conn, pending.id)
        await conn.wait_for(lambda: any(i > answered_at for i, _ in updates(conn, sid, "agent_message_chunk")))


async def test_break_relative_path(tmp_path: Path) -> None:
    async with fixture(tmp_path, "relative-path", validate=False) as conn:
        sid, _ = await read_in_a_session(conn, tmp_path)
        [(_, asked)] = agent_requests(conn, "fs/read_text_file")
        assert asked["params"]["path"] == "in.txt"
        assert conn.updates_for(sid, "tool_call")[0]["locations"] == [{"path": "in.txt"}]


async def test_break_no_release(tmp_path: Path) -> None:
    async with fixture(tmp_path, "no-release", validate=False) as conn:
        sid = await open_session(conn, tmp_path)
        assert (await conn.prompt(sid, directive("run", "echo hi"), timeout=10))["stopReason"] == "end_turn"
        assert agent_requests(conn, "terminal/create")
        assert agent_requests(conn, "terminal/release") == []
        assert conn.terminals.unreleased() == conn.terminals.created != []


async def test_break_echo_version(tmp_path: Path) -> None:
    async with fixture(tmp_path, "echo-version", validate=False) as conn:
        assert (await conn.initialize(protocol_version=7))["protocolVersion"] == 7
        assert (await conn.initialize(protocol_version=1))["protocolVersion"] == 1


async def test_break_stdout_banner(tmp_path: Path) -> None:
    async with fixture(tmp_path, "stdout-banner", validate=False) as conn:
        await conn.initialize()
        first = next(e.raw for e in conn.transcript if e.direction == "in")
        assert first == "fixture agent ready"
        assert [v.raw for v in conn.violations_of("non_json_stdout")] == ["fixture agent ready"]


async def test_break_ignore_eof(tmp_path: Path) -> None:
    async with fixture(tmp_path, "ignore-eof", validate=False) as conn:
        await conn.initialize()
        # close(): stdin is closed, the agent does not leave, so after the grace the client terminates it.
        assert await conn.close(timeout=1.0) == -signal.SIGTERM


@pytest.mark.allow_traceback  # the fake traceback is the point
async def test_break_crash_on_prompt(tmp_path: Path) -> None:
    async with fixture(tmp_path, "crash-on-prompt", validate=False) as conn:
        sid = await open_session(conn, tmp_path)
        with pytest.raises(AgentExited):
            await conn.prompt(sid, "hi", timeout=10)
        assert conn.returncode == 3
    assert "Traceback (most recent call last)" in (tmp_path / "agent-stderr.log").read_text(encoding="utf-8")
