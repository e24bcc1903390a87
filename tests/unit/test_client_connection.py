"""ama's ACP client (ama_acp.client) against a tiny stand-in agent run as a real subprocess.

The stand-in speaks just enough ACP to exercise the client: a 10 MiB line, requests to the client
(fs, terminal, permission, methods it did not advertise), a stray print on stdout, `$/cancel_request`,
dying mid-turn. It reports what the client answered in the prompt result's `_meta.checks`.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from ama_acp.client import AgentExited, AgentProcess, AgentStartError, ClientOptions, RpcError
from ama_acp.client.demo import PROMPT, run_demo
from ama_acp.client.handlers import (
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    Terminal,
    choose_option,
    decide_permission,
    read_text_file,
    write_text_file,
)
from ama_acp.client.terminal.cli import run_acp_client
from tests.support.json_values import as_object, session_id

BIG = 10 * 1024 * 1024
T = TypeVar("T")

FAKE_AGENT = r"""
import json, os, sys

CAPS = {}
BACKLOG = []
NEXT = [1000]
NO_USAGE = os.environ.get("FAKE_AGENT_NO_USAGE") == "1"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def read():
    if BACKLOG:
        return BACKLOG.pop(0)
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


def wait_response(rid):
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        msg = json.loads(line)
        if msg.get("id") == rid and "method" not in msg:
            return msg
        BACKLOG.append(msg)


def call(method, params):
    NEXT[0] += 1
    send({"jsonrpc": "2.0", "id": NEXT[0], "method": method, "params": params})
    return wait_response(NEXT[0])


def update(sid, upd):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": upd}})


def usage(sid, used):
    if not NO_USAGE:
        update(sid, {"sessionUpdate": "usage_update", "used": used, "size": 200000,
                     "cost": {"amount": 0.0451, "currency": "USD"}, "_meta": {"ama": {"source": "usage"}}})


def text(sid, s):
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": s}})


def big(sid, cwd):
    checks = {}
    update(sid, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x" * (10 * 1024 * 1024)}})
    print("a stray print on stdout")
    sys.stdout.flush()
    path = os.path.join(cwd, "notes.txt")
    checks["write"] = call("fs/write_text_file", {"sessionId": sid, "path": path, "content": "one\ntwo\nthree\n"})
    checks["read"] = call("fs/read_text_file", {"sessionId": sid, "path": path, "line": 2, "limit": 1})
    checks["read_missing"] = call("fs/read_text_file", {"sessionId": sid, "path": os.path.join(cwd, "nope.txt")})
    created = call("terminal/create", {"sessionId": sid, "command": sys.executable,
                                      "args": ["-c", "import sys; print('hi'); sys.exit(3)"]})
    tid = created["result"]["terminalId"]
    checks["wait"] = call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})
    checks["output"] = call("terminal/output", {"sessionId": sid, "terminalId": tid})
    checks["release"] = call("terminal/release", {"sessionId": sid, "terminalId": tid})
    checks["after_release"] = call("terminal/output", {"sessionId": sid, "terminalId": tid})
    limited = call("terminal/create", {"sessionId": sid, "command": "printf abcdefghij", "outputByteLimit": 5})
    lid = limited["result"]["terminalId"]
    call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": lid})
    checks["limited"] = call("terminal/output", {"sessionId": sid, "terminalId": lid})
    call("terminal/release", {"sessionId": sid, "terminalId": lid})
    checks["elicitation"] = call("elicitation/create", {"sessionId": sid, "mode": "form", "message": "?",
                                                        "requestedSchema": {"type": "object", "properties": {}}})
    return checks


def unadvertised(sid, cwd):
    return {
        "read": call("fs/read_text_file", {"sessionId": sid, "path": os.path.join(cwd, "x")}),
        "terminal": call("terminal/create", {"sessionId": sid, "command": "true"}),
    }


def permission(sid):
    update(sid, {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run rm -rf build", "kind": "execute"})
    answer = call("session/request_permission", {"sessionId": sid, "toolCall": {"toolCallId": "t1"}, "options": [
        {"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
    cancelled = any(m.get("method") == "session/cancel" for m in BACKLOG)
    BACKLOG[:] = [m for m in BACKLOG if m.get("method") != "session/cancel"]
    return answer, cancelled


def cancel_request(sid):
    created = call("terminal/create", {"sessionId": sid, "command": sys.executable, "args": ["-c", "import time; time.sleep(30)"]})
    tid = created["result"]["terminalId"]
    NEXT[0] += 1
    rid = NEXT[0]
    send({"jsonrpc": "2.0", "id": rid, "method": "terminal/wait_for_exit", "params": {"sessionId": sid, "terminalId": tid}})
    send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}})
    answer = wait_response(rid)
    call("terminal/kill", {"sessionId": sid, "terminalId": tid})
    killed = call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})
    call("terminal/release", {"sessionId": sid, "terminalId": tid})
    return {"answer": answer, "killed": killed}


def demo(sid, cwd):
    calc = os.path.join(cwd, "calc.py")
    update(sid, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Read calc.py first."}})
    update(sid, {"sessionUpdate": "tool_call", "toolCallId": "r1", "title": "Read calc.py", "kind": "read",
                 "status": "pending", "locations": [{"path": calc}]})
    old = call("fs/read_text_file", {"sessionId": sid, "path": calc})["result"]["content"]
    update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "r1", "status": "completed"})
    usage(sid, 3000)
    new = old.replace("return a - b", "return a + b")
    update(sid, {"sessionUpdate": "tool_call", "toolCallId": "e1", "title": "Edit calc.py", "kind": "edit"})
    perm = call("session/request_permission", {"sessionId": sid, "toolCall": {"toolCallId": "e1"}, "options": [
        {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]})
    assert perm["result"]["outcome"] == {"outcome": "selected", "optionId": "allow"}, perm
    call("fs/write_text_file", {"sessionId": sid, "path": calc, "content": new})
    update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "completed",
                 "content": [{"type": "diff", "path": calc, "oldText": old, "newText": new}]})
    update(sid, {"sessionUpdate": "plan", "entries": [
        {"content": "Fix add() in calc.py", "priority": "high", "status": "completed"},
        {"content": "Run the tests", "priority": "medium", "status": "in_progress"}]})
    tid = call("terminal/create", {"sessionId": sid, "command": sys.executable,
                                  "args": ["-m", "unittest", "-q", "test_calc"]})["result"]["terminalId"]
    update(sid, {"sessionUpdate": "tool_call", "toolCallId": "x1", "title": "Run the unit tests", "kind": "execute",
                 "status": "in_progress", "content": [{"type": "terminal", "terminalId": tid}]})
    status = call("terminal/wait_for_exit", {"sessionId": sid, "terminalId": tid})["result"]
    call("terminal/release", {"sessionId": sid, "terminalId": tid})
    update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "x1",
                 "status": "completed" if status.get("exitCode") == 0 else "failed"})
    text(sid, "Fixed: `add` now returns `a + b`, and the tests pass.")
    usage(sid, 3500)


def main():
    sessions = {}
    while True:
        msg = read()
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None or rid is None:
            continue  # responses nobody waits for, notifications
        result = None
        if method == "initialize":
            CAPS.update(params.get("clientCapabilities") or {})
            result = {"protocolVersion": 1, "agentCapabilities": {},
                      "agentInfo": {"name": "fake-agent", "version": "0.0.1"}}
            if os.environ.get("FAKE_AGENT_INIT_NOT_OBJECT") == "1":
                result = ["not", "an", "object"]
        elif method == "session/new":
            sid = "s%d" % (len(sessions) + 1)
            sessions[sid] = params["cwd"]
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid, "configOptions": [
                {"id": "model", "name": "Model", "category": "model", "type": "select",
                 "currentValue": "scripted/demo", "options": [{"value": "scripted/demo", "name": "Demo script"}]}]}})
            usage(sid, 2500)
            continue
        elif method == "session/prompt":
            sid = params["sessionId"]
            cwd = sessions[sid]
            prompt = params["prompt"][0]["text"]
            stop, meta = "end_turn", {}
            if prompt == "die":
                sys.exit(3)
            elif prompt == "big":
                meta["checks"] = big(sid, cwd)
            elif prompt == "unadvertised":
                meta["checks"] = unadvertised(sid, cwd)
            elif prompt == "permission":
                answer, cancelled = permission(sid)
                meta["checks"] = {"answer": answer, "saw_cancel": cancelled}
                if answer.get("result", {}).get("outcome", {}).get("outcome") == "cancelled":
                    stop = "cancelled"
            elif prompt == "cancel-request":
                meta["checks"] = cancel_request(sid)
            elif prompt.startswith("The tests"):
                demo(sid, cwd)
            else:
                text(sid, "Hello, ")
                text(sid, "world.")
                usage(sid, 68000)
            result = {"stopReason": stop, "_meta": meta}
        elif method == "_ama/session_stats":
            result = {"contextTokens": 3500, "contextWindow": 200000, "contextPercent": 1.8,
                      "cost": {"amount": 0.0451, "currency": "USD"}, "context": {"source": "usage"}}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})


main()
"""


@pytest.fixture
def agent(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT, encoding="utf-8")
    return [sys.executable, str(script)]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def run(fn: Callable[..., Awaitable[T]], *args: object) -> T:
    return anyio.run(fn, *args)


# --- the conversation ----------------------------------------------------------------------------


def test_initialize_big_line_fs_terminal_and_violations(agent, workspace):
    lines: list[str] = []

    async def main():
        async with AgentProcess(agent, ClientOptions(), on_line=lines.append) as conn:
            init = await conn.initialize()
            assert as_object(init["agentInfo"])["name"] == "fake-agent"
            sid = session_id(await conn.new_session(workspace))
            result = await conn.prompt(sid, "big", timeout=60)
            rc = await conn.close()
            return conn, result, rc

    conn, result, rc = run(main)
    assert rc == 0
    checks = result["_meta"]["checks"]

    # The 10 MiB notification arrived as one message, intact.
    big = [u for u in conn.updates if u["update"].get("sessionUpdate") == "agent_message_chunk"]
    assert len(big[0]["update"]["content"]["text"]) == BIG

    # fs: written to disk, read back with 1-based line/limit, a missing file is -32002.
    assert checks["write"]["result"] == {}
    assert (workspace / "notes.txt").read_text() == "one\ntwo\nthree\n"
    assert checks["read"]["result"] == {"content": "two\n"}
    assert checks["read_missing"]["error"]["code"] == RESOURCE_NOT_FOUND

    # terminal: real process, exit status, output, release; byte limit cuts the front.
    assert checks["wait"]["result"] == {"exitCode": 3, "signal": None}
    assert checks["output"]["result"]["output"].replace("\r\n", "\n") == "hi\n"
    assert checks["output"]["result"]["exitStatus"]["exitCode"] == 3
    assert checks["release"]["result"] == {}
    assert checks["after_release"]["error"]["code"] == INVALID_PARAMS
    assert checks["limited"]["result"]["output"] == "fghij" and checks["limited"]["result"]["truncated"] is True
    assert conn.terminals.unreleased() == []
    assert conn.terminal_output("term-1").strip() == "hi"

    # A method the client never advertised gets -32601 and is recorded; so is the stray print.
    assert checks["elicitation"]["error"]["code"] == -32601
    kinds = [v.kind for v in conn.violations]
    assert "unknown_method" in kinds and "non_json_stdout" in kinds
    stray = conn.violations_of("non_json_stdout")[0]
    assert stray.raw == "a stray print on stdout"

    # Every line was seen by the hook and recorded in the transcript, in both directions.
    incoming = [e.raw for e in conn.transcript if e.direction == "in"]
    assert lines == incoming
    assert any(e.direction == "out" and '"initialize"' in e.raw for e in conn.transcript)
    assert conn.requests_received[0][0] == "fs/write_text_file"


def test_unadvertised_fs_and_terminal_are_refused_and_recorded(agent, workspace):
    async def main():
        async with AgentProcess(agent, ClientOptions(fs=False, terminal=False)) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(workspace))
            return conn, await conn.prompt(sid, "unadvertised", timeout=30)

    conn, result = run(main)
    checks = result["_meta"]["checks"]
    assert checks["read"]["error"]["code"] == -32601
    assert checks["terminal"]["error"]["code"] == -32601
    assert [v.kind for v in conn.violations] == ["unadvertised_method", "unadvertised_method"]
    assert "fs/read_text_file" in conn.violations[0].detail


def test_capabilities_follow_the_options():
    assert ClientOptions().capabilities() == {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    caps = ClientOptions(fs=False, terminal=False, notices=True, compaction=True).capabilities()
    assert caps == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "session": {"notices": {}, "compaction": {}},
    }


def test_updates_wait_for_and_usage(agent, workspace):
    async def main():
        async with AgentProcess(agent) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(workspace))
            # The usage_update after session/new arrives after the response.
            await conn.wait_for(lambda: bool(conn.updates_for(sid, "usage_update")), 5)
            await conn.prompt(sid, "hello", timeout=30)
            return conn, sid

    conn, sid = run(main)
    assert [u["used"] for u in conn.updates_for(sid, "usage_update")] == [2500, 68000]
    texts = [u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")]
    assert "".join(texts) == "Hello, world."


def test_wait_for_times_out(agent):
    async def main():
        async with AgentProcess(agent) as conn:
            await conn.initialize()
            with pytest.raises(TimeoutError):
                await conn.wait_for(lambda: False, 0.2)

    run(main)


def test_wait_for_sees_a_condition_outside_the_connection_while_the_agent_is_silent(agent, tmp_path):
    """A predicate on the world (a file, a model server's log) holds without the agent saying anything:
    wait_for re-checks it on a short period, not only when a message arrives."""
    flag = tmp_path / "flag"

    async def main():
        async with AgentProcess(agent) as conn:
            await conn.initialize()

            async def later() -> None:
                await anyio.sleep(0.2)  # the event the test waits for, not a wait itself
                flag.write_text("set")

            async with anyio.create_task_group() as tg:
                tg.start_soon(later)
                with anyio.fail_after(2):
                    await conn.wait_for(flag.exists, 5)

    run(main)


def test_error_response_raises_rpc_error(agent):
    async def main():
        async with AgentProcess(agent) as conn:
            await conn.initialize()
            with pytest.raises(RpcError) as info:
                await conn.request("no/such_method", {})
            return info.value

    err = run(main)
    assert err.code == -32601 and err.message == "Method not found"


def test_send_raw_reaches_the_agent(agent):
    async def main():
        async with AgentProcess(agent) as conn:
            await conn.send_raw('{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}}')
            await conn.initialize()
            return conn

    conn = run(main)
    assert conn.transcript[0].direction == "out" and "session/cancel" in conn.transcript[0].raw


# --- permission and cancellation ---------------------------------------------------------------------


def test_permission_policy_answers(agent, workspace):
    seen = []

    async def main(policy):
        opts = ClientOptions(permission=policy)
        async with AgentProcess(agent, opts, on_permission=lambda p, o: seen.append(o)) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(workspace))
            return await conn.prompt(sid, "permission", timeout=30)

    allowed = run(main, "allow_once")["_meta"]["checks"]["answer"]["result"]
    assert allowed == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    rejected = run(main, "reject_always")["_meta"]["checks"]["answer"]["result"]
    assert rejected == {"outcome": {"outcome": "selected", "optionId": "no"}}
    chosen = run(main, lambda params: params["options"][1]["optionId"])["_meta"]["checks"]["answer"]["result"]
    assert chosen == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert [o.get("optionId") for o in seen] == ["yes", "no", "no"]


def test_cancel_answers_pending_permission_with_cancelled(agent, workspace):
    async def never(params):
        await anyio.sleep_forever()

    async def main():
        async with AgentProcess(agent, ClientOptions(permission=never)) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(workspace))
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "permission"}]}
            )
            await conn.wait_for(lambda: bool(conn.requests_received), 5)
            await conn.cancel(sid)
            return conn, await pending.wait(10)

    conn, result = run(main)
    assert result["stopReason"] == "cancelled"
    checks = result["_meta"]["checks"]
    assert checks["answer"]["result"] == {"outcome": {"outcome": "cancelled"}}
    assert checks["saw_cancel"] is True  # session/cancel went out before the cancelled answer
    assert conn.permission_log[0][1] == {"outcome": "cancelled"}


def test_agent_cancel_request_gets_32800(agent, workspace):
    async def main():
        async with AgentProcess(agent) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(workspace))
            return await conn.prompt(sid, "cancel-request", timeout=30)

    checks = run(main)["_meta"]["checks"]
    assert checks["answer"]["error"]["code"] == -32800
    assert checks["killed"]["result"] == {"exitCode": None, "signal": "SIGKILL"}


# --- failures ----------------------------------------------------------------------------------------


def test_agent_dying_mid_turn_fails_the_request(agent, workspace):
    async def main():
        async with AgentProcess(agent) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(workspace))
            with pytest.raises(AgentExited) as info:
                await conn.prompt(sid, "die", timeout=30)
            with pytest.raises(AgentExited):
                await conn.request("initialize", {"protocolVersion": 1})
            return info.value, conn

    exc, conn = run(main)
    assert exc.returncode == 3 and conn.returncode == 3
    assert "session/prompt" in str(exc)


def test_missing_agent_command_raises_start_error(tmp_path):
    async def main():
        async with AgentProcess([str(tmp_path / "no-such-agent")]):
            pass

    with pytest.raises(AgentStartError):
        run(main)


# --- handlers on their own -----------------------------------------------------------------------


def test_choose_option_falls_back_to_the_nearest_kind():
    opts = [
        {"optionId": "always", "name": "Always", "kind": "allow_always"},
        {"optionId": "never", "name": "Never", "kind": "reject_always"},
    ]
    assert choose_option(opts, "allow_once") == "always"
    assert choose_option(opts, "reject_once") == "never"
    assert choose_option([], "allow_once") is None
    assert choose_option(opts, "reject") == "never"
    assert run(decide_permission, "allow_once", {"options": []}) == {"outcome": "cancelled"}
    assert run(decide_permission, "cancel", {"options": opts}) == {"outcome": "cancelled"}


def test_fs_handlers_validate_paths(tmp_path):
    async def main():
        with pytest.raises(RpcError) as rel:
            await read_text_file({"path": "relative.txt"})
        path = tmp_path / "sub" / "f.txt"
        await write_text_file({"path": str(path), "content": "a\r\nb\n"})
        whole = await read_text_file({"path": str(path)})
        tail = await read_text_file({"path": str(path), "line": 2})
        return rel.value, whole, tail, path.read_bytes()

    rel, whole, tail, raw = run(main)
    assert rel.code == INVALID_PARAMS
    assert raw == b"a\r\nb\n"  # line endings kept byte for byte
    assert whole == {"content": "a\r\nb\n"} and tail == {"content": "b\n"}


def test_terminal_truncation_keeps_character_boundaries():
    term = Terminal("t", ["x"], limit=4)
    term.append("aé€".encode())  # 1 + 2 + 3 bytes
    assert term.truncated and term.text() == "€"


# --- the command line and the demo -------------------------------------------------------------------


def test_acp_client_cli_renders_the_turn(agent, workspace):
    out, err = io.StringIO(), io.StringIO()
    code = run_acp_client(["--prompt", "hello", "--cwd", str(workspace), "--auto-approve", "--", *agent], out, err)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert "agent: fake-agent 0.0.1" in text
    assert "» hello" in text and "Hello, world." in text
    assert "ctx 1.3% (2,500 / 200,000)" in text and "ctx 34% (68,000 / 200,000) $0.0451 [source usage]" in text
    assert "[stop: end_turn]" in text


def test_acp_client_cli_shows_unknown_context(agent, workspace, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT_NO_USAGE", "1")
    out, err = io.StringIO(), io.StringIO()
    code = run_acp_client(["--prompt", "hello", "--cwd", str(workspace), "--", *agent], out, err)
    assert code == 0, err.getvalue()
    assert out.getvalue().splitlines()[-1] == "ctx ? $?"


def test_acp_client_cli_reports_violations(agent, workspace):
    out, err = io.StringIO(), io.StringIO()
    code = run_acp_client(["--prompt", "big", "--cwd", str(workspace), "--allow-terminals", "--", *agent], out, err)
    assert code == 4
    assert "non_json_stdout" in err.getvalue()


def test_acp_client_cli_failures(agent, workspace, tmp_path):
    err = io.StringIO()
    assert run_acp_client(["--prompt", "x", "--", str(tmp_path / "missing")], io.StringIO(), err) == 3
    assert "cannot start the agent" in err.getvalue()
    err = io.StringIO()
    assert run_acp_client(["--prompt", "die", "--cwd", str(workspace), "--", *agent], io.StringIO(), err) == 3
    assert "exited with code 3 during session/prompt" in err.getvalue()
    err = io.StringIO()
    assert run_acp_client(["--prompt", "x"], io.StringIO(), err) == 2


@pytest.mark.skipif(os.name != "posix", reason="the stand-in agent's demo uses POSIX paths")
def test_demo_drives_an_agent_through_the_whole_flow(agent):
    out, err = io.StringIO(), io.StringIO()
    code = run_demo(["--no-color"], out, err, command=agent)
    text = out.getvalue()
    assert code == 0, err.getvalue() + text
    lines = text.splitlines()
    model_at = next(i for i, line in enumerate(lines) if line.startswith("model: "))
    first_ctx = next(i for i, line in enumerate(lines) if line.startswith("ctx "))
    assert model_at < first_ctx  # the model is named before anything the session reports
    assert "bundled offline demo script" in lines[model_at]
    assert f"» {PROMPT}" in text
    assert "│ Read calc.py first." in text
    assert "? permission: Edit calc.py" in text and "  → Allow once (allow_once)" in text
    assert "    +    return a + b" in text
    assert "  [x] Fix add() in calc.py" in text
    assert "▸ Run the unit tests [execute] in_progress → completed" in text
    assert "contextTokens" in text and "$0.0451" in text
    assert "what changed in the workspace:" in text


def test_a_result_that_is_not_an_object_is_recorded_and_read_as_empty(agent, workspace, monkeypatch):
    """An agent answering initialize with a list: the client records the violation and its caller sees `{}`
    (no member it looks for), not a value of another type that would fail later."""
    monkeypatch.setenv("FAKE_AGENT_INIT_NOT_OBJECT", "1")

    async def main():
        async with AgentProcess(agent, ClientOptions()) as conn:
            init = await conn.initialize()
            await conn.close()
            return conn, init

    conn, init = run(main)
    assert init == {}
    [violation] = conn.violations_of("result_not_object")
    assert "initialize" in violation.detail and "list" in violation.detail


@pytest.mark.parametrize("env", [5, "PATH=/x", {"name": "A", "value": "b"}, [5], [{"name": "A"}]])
def test_terminal_create_with_an_env_that_is_not_a_list_of_pairs_is_invalid_params(env):
    from ama_acp.client.handlers import TerminalManager

    manager = TerminalManager(lambda fn: None)

    async def main():
        with pytest.raises(RpcError) as info:
            await manager.create({"sessionId": "s", "command": "true", "env": env})
        assert info.value.code == INVALID_PARAMS and "env" in info.value.message
        assert manager.created == []  # nothing was started

    anyio.run(main)
