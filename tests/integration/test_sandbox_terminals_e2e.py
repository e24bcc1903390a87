"""The sandbox of the commands ama runs on someone's behalf but does not start itself (issue 38, point 1), through
real pipes: run_command in the editor's terminal, an external agent's terminal forwarded to the editor through
ama, and the terminals `ama acp-client --allow-terminals` and `ama conformance` serve to a hostile agent (a small
ACP agent this module writes). In each, a write outside every folder of the run is blocked, one inside is not,
and a TCP connect to a server on 127.0.0.1 is refused. Skipped where the kernel has no Landlock.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.terminal import cli, turn
from ama_acp.client.terminal.cli import run_acp_client
from ama_acp.sandbox import kernel_abi
from ama_acp.sandbox.landlock import NET_ABI
from tests.integration.test_external_terminals_e2e import creates, delegate
from tests.integration.test_sandbox_retry_e2e import client as retry_client
from tests.integration.test_sandbox_retry_e2e import command as retried
from tests.integration.test_sandbox_retry_e2e import configure, one_turn, write_outside
from tests.support.harness import Ama, clean_env, run_ama, write_script
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[2]
ABI, _ = kernel_abi()
needs_net_rules = pytest.mark.skipif(ABI < NET_ABI, reason=f"Landlock ABI {ABI} has no TCP rules (needs {NET_ABI})")


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts (the kernel's backlog does) and never answers: its port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


OPEN = "TCP-OPEN"


def connect(port: int) -> list[str]:
    """A command that prints OPEN once a TCP connect to the listener succeeded (a PermissionError when refused)."""
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('TCP' + '-OPEN')"
    return [sys.executable, "-c", code]


def sandboxed(made: dict[str, Any], tail: list[str]) -> Path:
    """The private temp folder of a terminal/create that runs the sandbox's launcher with `tail` at its end."""
    assert made["command"] == sys.executable and made["args"][:3] == ["-I", "-S", made["args"][2]]
    assert made["args"][2].endswith("landlock.py") and made["args"][3:] == tail  # the real command reads last
    env = {e["name"]: e["value"] for e in made["env"]}
    assert "AMA_SANDBOX" in env
    return Path(env["TMPDIR"])


# --- run_command in the editor's terminal --------------------------------------------------------------------------


@needs_net_rules
@pytest.mark.anyio
async def test_run_command_in_the_editors_terminal_is_sandboxed(tmp_path: Path, listener: int) -> None:
    """The tests' client serves terminals unconfined (no sandbox of its own): what confines is ama's launcher."""
    ama = Ama(tmp_path)
    outside = tmp_path / "outside.txt"
    command = f"touch {outside} || echo blocked-outside; touch inside.txt && echo wrote-inside; "
    command += shlex.join(connect(listener))
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "ran"},
    ]
    script = write_script(tmp_path / "script.json", replies)
    options = ClientOptions(fs=True, terminal=True)
    async with run_ama(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, options=options) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": "full_access"})
        assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
        [made] = [m["params"] for m in _written(conn) if m.get("method") == "terminal/create"]
        [final] = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
    tmp = sandboxed(made, ["/bin/sh", "-c", command])
    assert not tmp.exists()  # removed with the terminal
    text = str(final["content"][-1]["content"]["text"])
    assert "blocked-outside" in text and not outside.exists()
    assert "wrote-inside" in text and (ama.workspace / "inside.txt").exists()
    assert OPEN not in text and "PermissionError" in text
    assert (
        "Writes outside the workspace and network connections (TCP connect and bind) are blocked by ama's sandbox"
        in text
    )


@pytest.mark.anyio
async def test_a_client_that_confines_its_terminals_gets_the_bare_command_and_it_stays_confined(tmp_path: Path) -> None:
    """ama's own client with its sandbox says so (`_meta` "ama/confinedTerminals"): ama sends it the command without
    a launcher (one inside another cannot run: issue 39's acp-client run failed so), and the client confines it."""
    from ama_acp.config import SandboxConfig
    from ama_acp.sandbox import CONFINED_TERMINALS

    ama = Ama(tmp_path)
    outside = tmp_path / "outside.txt"
    command = f"touch {outside} || echo blocked-outside; touch inside.txt && echo wrote-inside"
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "ran"},
    ]
    script = write_script(tmp_path / "script.json", replies)
    options = ClientOptions(fs=True, terminal=True, sandbox=SandboxConfig())
    assert options.capabilities()["_meta"] == {CONFINED_TERMINALS: True}
    async with run_ama(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, options=options) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ama.workspace))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": "full_access"})
        assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
        [made] = [m["params"] for m in _written(conn) if m.get("method") == "terminal/create"]
        [final] = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert [made["command"], *made["args"]] == ["/bin/sh", "-c", command]
    assert "AMA_SANDBOX" not in {e["name"] for e in made.get("env") or []}
    text = str(final["content"][-1]["content"]["text"])
    assert "blocked-outside" in text and not outside.exists()
    assert "wrote-inside" in text and (ama.workspace / "inside.txt").exists()


def _written(conn: AgentProcess) -> list[dict[str, Any]]:
    return [json.loads(e.raw) for e in conn.transcript if e.direction == "in"]


@needs_net_rules
@pytest.mark.anyio
async def test_the_one_run_outside_the_sandbox_the_person_allowed_reaches_the_editor_without_the_launcher(
    tmp_path: Path,
) -> None:
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(retried("c1", write_outside(target), True), {"text": "ok"})
        conn, _ = await one_turn(ama, retry_client("allow_once", terminal=True), "full_access")
    [made] = [m["params"] for m in _written(conn) if m.get("method") == "terminal/create"]
    assert made["command"] == "/bin/sh" and made["args"] == ["-c", write_outside(target)]
    assert {e["name"] for e in made["env"]} == {"TERM", "PAGER", "GIT_PAGER"}
    assert target.read_text() == "out\n"


# --- an external agent's terminal -----------------------------------------------------------------------------------


@needs_net_rules
@pytest.mark.anyio
async def test_an_external_agents_terminal_is_sandboxed(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    outside, inside = tmp_path / "outside.txt", ama.workspace / "inside.txt"
    result, (_, conn) = await delegate(ama, f"term - touch {outside} {inside}", "full_access")
    assert "Permission denied" in result and "exit 1" in result
    assert inside.exists() and not outside.exists()
    [made] = creates(conn)
    assert not sandboxed(made, [made["args"][3], str(outside), str(inside)]).exists()
    assert Path(made["args"][3]).name == "touch"  # found on PATH: the launcher execs a path


# --- a hostile agent under ama acp-client and ama conformance ------------------------------------------------------

# An ACP agent that, at each prompt, asks its client to run three commands in the session's folder: a touch of a
# file outside every folder of the run, a touch inside the session's folder and a TCP connect; it notes how each
# ended (its exit code and the last line it printed; whether the inside file is there) in LOG, a file of the test's.
HOSTILE = r"""
import json, os, sys

outside, log, connect = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ids = iter(range(1, 1_000_000))


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def note(text):
    with open(log, "a", encoding="utf-8") as f:
        f.write(text + "\n")


def request(method, params):
    mine = f"h{next(ids)}"
    send({"jsonrpc": "2.0", "id": mine, "method": method, "params": params})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == mine and "method" not in message:
            return message
        if "method" in message and "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "busy"}})
    raise SystemExit(0)


def run(sid, cwd, name, argv):
    made = request("terminal/create", {"sessionId": sid, "command": argv[0], "args": argv[1:], "cwd": cwd})
    if "error" in made:
        note(f"{name} refused")
        return
    ref = {"sessionId": sid, "terminalId": made["result"]["terminalId"]}
    status = request("terminal/wait_for_exit", ref).get("result") or {}
    output = (request("terminal/output", ref).get("result") or {}).get("output", "")
    request("terminal/release", ref)
    last = output.strip().splitlines()[-1:]  # an error's last line (a whole traceback would read as ours)
    note(f"{name} exit={status.get('exitCode')} {' '.join(last)}".rstrip())


cwds = {}
for line in sys.stdin:
    message = json.loads(line)
    method, mid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        send({"jsonrpc": "2.0", "id": mid, "result": result})
    elif method == "session/new":
        sid = f"s{len(cwds) + 1}"
        cwds[sid] = params["cwd"]
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": sid}})
    elif method == "session/prompt" and params.get("sessionId") in cwds:
        sid = params["sessionId"]
        cwd = cwds[sid]
        inside = os.path.join(cwd, "inside.txt")
        run(sid, cwd, "outside", ["touch", outside])
        run(sid, cwd, "inside", ["touch", inside])
        note(f"inside-file {os.path.exists(inside)}")
        run(sid, cwd, "tcp", connect)
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}})
"""


@pytest.fixture
def hostile(tmp_path: Path, listener: int) -> tuple[list[str], Path, Path]:
    """The hostile agent's command line, the file outside the run it tries to make, and its log."""
    script = tmp_path / "hostile_agent.py"
    script.write_text(HOSTILE, encoding="utf-8")
    outside, log = tmp_path / "outside" / "escaped.txt", tmp_path / "hostile.log"
    outside.parent.mkdir()
    return [sys.executable, str(script), str(outside), str(log), json.dumps(connect(listener))], outside, log


def check_log(log: Path) -> list[str]:
    """Every prompt's three commands: the outside touch refused by the sandbox, the inside one done, no connect."""
    lines = log.read_text(encoding="utf-8").splitlines()
    outside = [line for line in lines if line.startswith("outside ")]
    assert outside and all(line.startswith("outside exit=1") and "Permission denied" in line for line in outside)
    assert [line for line in lines if line.startswith("inside ")] == ["inside exit=0"] * len(outside)
    assert lines.count("inside-file True") == len(outside)
    tcp = [line for line in lines if line.startswith("tcp ")]
    assert len(tcp) == len(outside) and all(line.startswith("tcp exit=1") and "PermissionError" in line for line in tcp)
    assert not any(OPEN in line for line in tcp)
    return lines


@needs_net_rules
def test_acp_client_allow_terminals_runs_the_agents_commands_in_the_sandbox(
    tmp_path: Path, hostile: tuple[list[str], Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, outside, log = hostile
    monkeypatch.setattr(cli, "settle_session_open", partial(turn.settle_session_open, timeout=0.2))
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")  # the default [sandbox]: workspace-write, no network
    out, err = io.StringIO(), io.StringIO()
    argv = ["--prompt", "hi", "--cwd", str(work), "--config", str(config), "--allow-terminals", "--", *agent]
    assert run_acp_client(argv, out, err) == 0, err.getvalue()
    check_log(log)
    assert not outside.exists() and (work / "inside.txt").exists()
    assert "not sandboxed" not in err.getvalue()
    assert [p.name for p in Path(os.environ.get("TMPDIR", "/tmp")).glob(f"ama-run-{os.getpid()}-*")] == []


@needs_net_rules
def test_conformance_runs_no_command_of_a_hostile_agent_on_the_host(
    tmp_path: Path, hostile: tuple[list[str], Path, Path]
) -> None:
    agent, outside, log = hostile
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "-k", "prompt", "--report-json", str(report), "--", *agent],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(tmp_path),
        cwd=ROOT,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # its verdict is not the point: what ran is
    assert not outside.exists()
    assert len(check_log(log)) >= 7  # at least one prompt drove all three commands
    assert json.loads(report.read_text(encoding="utf-8"))["sandbox"] == {
        "mode": "workspace-write",
        "network": False,
        "unsandboxed": "",
    }
    assert "not sandboxed" not in done.stdout


def test_with_the_sandbox_off_the_client_and_conformance_say_the_commands_ran_unconfined(
    tmp_path: Path, hostile: tuple[list[str], Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, outside, log = hostile
    config = tmp_path / "config.toml"
    config.write_text('[sandbox]\nmode = "off"\n', encoding="utf-8")
    monkeypatch.setattr(cli, "settle_session_open", partial(turn.settle_session_open, timeout=0.2))
    err = io.StringIO()
    argv = ["--prompt", "hi", "--cwd", str(tmp_path), "--config", str(config), "--allow-terminals", "--", *agent]
    assert run_acp_client(argv, io.StringIO(), err) == 0, err.getvalue()
    assert outside.exists()  # what "off" means: the agent's touch ran on the host
    assert err.getvalue().count('the agent\'s commands are not sandboxed: [sandbox] mode = "off"') == 1
    outside.unlink()

    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "-k", "prompt", "--report-json", str(report), "--", *agent],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(tmp_path, {"AMA_CONFIG": str(config)}),
        cwd=ROOT,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    said = 'The commands the agent asked to run (terminal/create) were not sandboxed: [sandbox] mode = "off".'
    assert done.stdout.count(said) == 1
    assert json.loads(report.read_text(encoding="utf-8"))["sandbox"]["unsandboxed"] == '[sandbox] mode = "off"'
