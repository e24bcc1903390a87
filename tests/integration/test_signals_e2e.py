"""Real signals to a real ama process (issue 23, "Signals"; docs/errors.md "Signals and exit codes").

SIGHUP, SIGTERM and SIGINT end `ama --mode acp` as stdin EOF does: the running turn cancelled, a command's
process tree killed, MCP servers stopped, the session file closed, exit status 0, within a second, even while a
permission request waits unanswered. A second signal during that clean-up is logged and changes nothing.
`ama -p` does the same and exits 128 + the signal's number (130 for Ctrl-C) without a traceback, and exits 1
when the answer failed (the provider after its retries, refused credentials).

Each command the model runs carries a unique marker in its command line (`sleep 30.<n>`), so the test can
see it start and see it gone.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, clean_env, local_config, write_script
from tests.support.leaks import processes_mentioning, processes_with_cmdline
from tests.support.llm_server import LLMServer
from tests.support.raw import RawAma
from tests.support.waiting import poll_until

ROOT = Path(__file__).resolve().parents[2]

# The bound for the whole clean-up, from the signal to the process's exit.
EXIT_WITHIN = 1.0
# With an MCP server the stop has its own graces (ama_acp/mcp/stdio.py: up to 0.5 s for the server, 0.25 s for
# helpers left in its group), bounded below a second by that module and tested there after EOF; here, on two
# shared cores, a little room above them.
EXIT_WITHIN_MCP = 1.5
# Longer when a command ignores SIGTERM: the kill waits its grace (0.5 s) before SIGKILL.
EXIT_WITHIN_STUBBORN = 2.5

_numbers = itertools.count(101)


def marker() -> str:
    """A `sleep` argument no other process on the machine has: `30.<pid><n>` (still a number for sleep)."""
    return f"30.{os.getpid()}{next(_numbers)}"


def run_command(cid: str, command: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": "run_command", "arguments": {"command": command}}]}


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The ama processes of a test: killed at the end if an assertion stopped the test before their exit."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def exit_after(proc: subprocess.Popen[bytes], signum: int) -> tuple[int, float]:
    """Send `signum`; (the exit status, seconds from the signal to the exit), polled with a deadline."""
    start = time.monotonic()
    os.kill(proc.pid, signum)
    poll_until(lambda: proc.poll() is not None, 10, f"ama to exit after {signal.Signals(signum).name}")
    return proc.returncode, time.monotonic() - start


def running(mark: str) -> None:
    poll_until(lambda: processes_with_cmdline(f"sleep {mark}"), 15, f"`sleep {mark}` to start")


def gone(mark: str) -> bool:
    return not processes_with_cmdline(f"sleep {mark}")


def session_entries(ama: Ama, sid: str) -> list[dict[str, Any]]:
    files = list((ama.data / "sessions").rglob(f"{sid}.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines()]


def assert_saved_with_the_cancelled_call(ama: Ama, sid: str, cid: str) -> None:
    """The file ends with the turn's last entries (the call, failed, and its result; `-p`, whose turn ends by its
    own cancel, adds the turn's end) and loads in a new ama."""
    entries = session_entries(ama, sid)
    tool = [e for e in entries if e["t"] == "tool" and e["wire_id"] == cid]
    assert tool and tool[-1]["status"] == "failed", entries[-3:]
    if entries[-1]["t"] == "turn":
        assert entries.pop()["stop_reason"] == "cancelled"
    last = entries[-1]
    assert last["t"] == "msg" and last["message"]["type"] == "tool_result", last
    assert last["message"]["tool_call_id"] == cid
    again = RawAma(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(ama.tmp / "script.json")})
    try:
        again.request(1, "initialize", {"protocolVersion": 1})
        loaded = again.request(2, "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        assert "result" in loaded, loaded
    finally:
        assert again.close() == 0


# --- ama --mode acp ----------------------------------------------------------------------------------------


def start_acp(
    ama: Ama,
    replies: list[dict[str, Any]],
    procs: list[subprocess.Popen[bytes]],
    *,
    mode: str | None = None,
    mcp_servers: list[dict[str, Any]] | None = None,
) -> tuple[RawAma, str]:
    script = write_script(ama.tmp / "script.json", replies)
    raw = RawAma(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, process=True)
    procs.append(raw.proc)
    raw.request(1, "initialize", {"protocolVersion": 1})
    new = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": mcp_servers or []})
    sid = new["result"]["sessionId"]
    if mode:
        assert "result" in raw.request(3, "session/set_mode", {"sessionId": sid, "modeId": mode})
    return raw, sid


def send_prompt(raw: RawAma, sid: str) -> None:
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
        }
    )


def permission_asked(raw: RawAma) -> dict[str, Any]:
    """Read until ama asks for permission; the request is left unanswered."""
    deadline = time.monotonic() + 15
    while True:
        msg = raw.recv(max(0.1, deadline - time.monotonic()))
        if msg.get("method") == "session/request_permission":
            return msg


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_during_a_command_kills_it_saves_the_session_and_exits_within_a_second(tmp_path, procs, signum):
    ama = Ama(tmp_path)
    mark = marker()
    raw, sid = start_acp(ama, [run_command("c1", f"sleep {mark}"), {"text": "done"}], procs, mode="full_access")
    send_prompt(raw, sid)
    running(mark)
    status, took = exit_after(raw.proc, signum)
    assert status == 0, ama.stderr.read_text()
    assert took < EXIT_WITHIN
    assert gone(mark)
    assert_saved_with_the_cancelled_call(ama, sid, "c1")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_while_a_permission_request_waits_unanswered_ends_ama(tmp_path, procs, signum):
    ama = Ama(tmp_path)
    mark = marker()
    raw, sid = start_acp(ama, [run_command("c1", f"sleep {mark}"), {"text": "done"}], procs)  # the mode asks
    send_prompt(raw, sid)
    asked = permission_asked(raw)
    assert asked["params"]["toolCall"]["toolCallId"] == "c1"
    status, took = exit_after(raw.proc, signum)
    assert status == 0, ama.stderr.read_text()
    assert took < EXIT_WITHIN
    assert gone(mark)  # never started: nobody allowed it
    assert_saved_with_the_cancelled_call(ama, sid, "c1")


# An MCP server started through a wrapper: a helper process in its group that never reads stdin, as npx or a
# shell script leaves. Only ama stopping the server's whole process group ends it.
WITH_HELPER = """
import runpy, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sys.argv = ["stdio_server"]
runpy.run_module("tests.support.mcp_servers.stdio_server", run_name="__main__")
"""


def mcp_server(tmp_path: Path) -> dict[str, Any]:
    notes = tmp_path / "notes"
    notes.mkdir()
    env = {"PYTHONPATH": str(ROOT), "MCP_TEST_DIR": str(notes)}  # the tmp path in its environment: findable
    return {
        "name": "s",
        "command": sys.executable,
        "args": ["-c", WITH_HELPER],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }


def wait_mcp_ready(raw: RawAma, sid: str) -> None:
    ids = itertools.count(100)

    def ready() -> bool:
        stats = raw.request(next(ids), "_ama/session_stats", {"sessionId": sid})["result"]
        return any(s["name"] == "s" and s["tools"] > 0 for s in stats.get("mcpServers", []))

    poll_until(ready, 30, "the MCP server to be ready", interval=0.05)


def nothing_of_the_test_left(tmp_path: Path) -> list[tuple[int, str]]:
    """Processes still naming the test's directory (MCP servers, their helpers, commands) shortly after ama's
    exit: what ama stopped is gone already, a short poll only lets the kernel finish reaping."""
    left: list[tuple[int, str]] = []

    def clear() -> bool:
        left[:] = processes_mentioning(str(tmp_path))
        return not left

    try:
        poll_until(clear, 1.0, "the test's processes to be gone")
    except AssertionError:
        pass
    return left


@pytest.mark.parametrize("case", ["SIGHUP", "SIGTERM-while-asking"])
def test_a_stop_signal_stops_the_mcp_servers_and_their_helpers(tmp_path, procs, case):
    ama = Ama(tmp_path)
    mark = marker()
    mode = "full_access" if case == "SIGHUP" else None
    raw, sid = start_acp(
        ama,
        [run_command("c1", f"sleep {mark}"), {"text": "done"}],
        procs,
        mode=mode,
        mcp_servers=[mcp_server(tmp_path)],
    )
    wait_mcp_ready(raw, sid)
    started = processes_mentioning(str(tmp_path), exclude=[raw.proc.pid])
    assert len(started) >= 2, started  # the server and its helper
    send_prompt(raw, sid)
    if case == "SIGHUP":
        running(mark)
        status, took = exit_after(raw.proc, signal.SIGHUP)
    else:
        permission_asked(raw)
        status, took = exit_after(raw.proc, signal.SIGTERM)
    assert status == 0, ama.stderr.read_text()
    assert took < EXIT_WITHIN_MCP
    assert nothing_of_the_test_left(tmp_path) == []


def test_a_second_sigterm_during_the_clean_up_never_skips_killing_the_command(tmp_path, procs):
    """The command ignores SIGTERM, so its kill waits the grace period before SIGKILL: the second SIGTERM lands
    inside the clean-up. It is logged; the command is still killed and ama still exits 0.

    The window for the second signal is that grace, 0.5 s. A test process the machine holds back longer (more
    workers than cores, under load) finds the command already killed: that try never reached the case (its exit is
    still checked), and another is made, three in all."""
    for attempt in range(3):
        if _second_sigterm_in_the_clean_up(tmp_path / f"try{attempt}", procs):
            return
    pytest.fail("in three tries the command was already killed when the test looked: the case was never reached")


def _second_sigterm_in_the_clean_up(folder: Path, procs: list[subprocess.Popen[bytes]]) -> bool:
    """One try of the test above: False if the command was gone before the second SIGTERM could be sent."""
    folder.mkdir()
    ama = Ama(folder)
    mark = marker()
    command = f"trap '' TERM; sleep {mark}"  # the ignored SIGTERM is inherited by sleep
    raw, sid = start_acp(ama, [run_command("c1", command), {"text": "done"}], procs, mode="full_access")
    send_prompt(raw, sid)
    running(mark)
    start = time.monotonic()
    os.kill(raw.proc.pid, signal.SIGTERM)
    poll_until(lambda: "SIGTERM received" in ama.stderr.read_text(), 5, "ama to log the first SIGTERM")
    if raw.proc.poll() is not None or gone(mark):  # the grace had passed before this process looked
        poll_until(lambda: raw.proc.poll() is not None, 10, "ama to exit")
        assert raw.proc.returncode == 0, ama.stderr.read_text()
        assert gone(mark)
        return False
    # Still cleaning up: the command outlived its SIGTERM.
    os.kill(raw.proc.pid, signal.SIGTERM)
    poll_until(lambda: raw.proc.poll() is not None, 10, "ama to exit")
    assert time.monotonic() - start < EXIT_WITHIN_STUBBORN
    assert raw.proc.returncode == 0, ama.stderr.read_text()
    assert gone(mark)
    assert "SIGTERM received again" in ama.stderr.read_text()
    assert_saved_with_the_cancelled_call(ama, sid, "c1")
    return True


# --- ama -p ------------------------------------------------------------------------------------------------


def start_print(
    ama: Ama, procs: list[subprocess.Popen[bytes]], *flags: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ama_acp", "-p", "go", *flags, "--config", str(ama.config), "--data-dir", str(ama.data)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ama.workspace,
        env=clean_env(ama.tmp, env),
    )
    procs.append(proc)
    return proc


def scripted_print(ama: Ama, replies: list[dict[str, Any]]) -> dict[str, str]:
    ama.config.write_text('model = "scripted/t"\nmode = "full_access"\n', encoding="utf-8")
    return {"AMA_SCRIPT": str(write_script(ama.tmp / "script.json", replies))}


@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)],
    ids=["SIGTERM", "SIGHUP", "SIGINT"],
)
def test_print_mode_stopped_mid_command_kills_it_and_exits_128_plus_the_signal(tmp_path, procs, signum, status):
    ama = Ama(tmp_path)
    mark = marker()
    env = scripted_print(ama, [run_command("c1", f"sleep {mark}"), {"text": "done"}])
    proc = start_print(ama, procs, "--output-format", "json", env=env)
    running(mark)
    code, took = exit_after(proc, signum)
    out, err = proc.communicate(timeout=5)
    assert code == status, err
    assert took < EXIT_WITHIN
    assert gone(mark)
    assert b"Traceback" not in err
    assert f"interrupted ({signum.name})".encode() in err
    result = json.loads(out)
    assert result["stopReason"] == "cancelled" and result["error"]["kind"] == "interrupted"
    assert_saved_with_the_cancelled_call(ama, result["sessionId"], "c1")


@pytest.mark.parametrize(
    ("reply", "kind"),
    [({"status": 500, "message": "upstream exploded"}, "server"), ({"status": 401, "message": "bad key"}, "auth")],
    ids=["http-500", "http-401"],
)
def test_print_mode_exits_1_when_the_provider_failed(tmp_path, procs, reply, kind):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, retries=0), encoding="utf-8")
        llm.enqueue(reply, reply)
        env = {"LOCAL_TEST_KEY": "k" * 12}
        as_json = start_print(ama, procs, "--output-format", "json", env=env)
        out, err = as_json.communicate(timeout=30)
        assert as_json.returncode == 1, err
        result = json.loads(out)
        assert result["stopReason"] == "end_turn"  # the ACP answer of such a turn; the error says what failed
        assert result["error"]["kind"] == kind and reply["message"] in result["error"]["message"]
        as_text = start_print(ama, procs, env=env)
        _, err = as_text.communicate(timeout=30)
        assert as_text.returncode == 1, err
        assert len(llm.requests) == 2  # max_retries 0: one request each


def test_print_mode_answered_exits_0_with_a_null_error(tmp_path, procs):
    ama = Ama(tmp_path)
    proc = start_print(ama, procs, "--output-format", "json", env=scripted_print(ama, [{"text": "all good"}]))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["answer"] == "all good" and result["error"] is None and result["stopReason"] == "end_turn"
