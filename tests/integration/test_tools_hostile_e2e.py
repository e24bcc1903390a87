"""Hostile tool inputs through the real `ama --mode acp` subprocess and a scripted model.

The failures these guard against wedged the whole process: a glob or regex that backtracks for hours while
holding the GIL, a read blocked in open() on a FIFO. Here every call answers, the turn ends, and the
process still exits within about a second of stdin EOF or SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, write_script
from tests.support.leaks import processes_with_cmdline
from tests.support.raw import RawAma
from tests.support.waiting import holds_within

HAS_GIT = shutil.which("git") is not None


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "arguments": arguments}]}


@pytest.fixture
def started(request):
    """RawAma processes of the test, killed at the end if an assertion stopped the test before its exit."""
    procs: list[RawAma] = []
    yield procs
    for raw in procs:
        if raw.proc.poll() is None:
            raw.proc.kill()
            raw.proc.wait(5)


def start(ama: Ama, replies: list[dict[str, Any]], procs: list[RawAma], mode: str | None = None) -> tuple[RawAma, str]:
    script = write_script(ama.tmp / "script.json", replies)
    # A real process: each test ends by timing the process's exit (stdin EOF or SIGTERM).
    raw = RawAma(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, process=True)
    procs.append(raw)
    raw.request(1, "initialize", {"protocolVersion": 1})
    sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    if mode:
        assert "result" in raw.request(3, "session/set_mode", {"sessionId": sid, "modeId": mode})
    return raw, sid


def prompt(
    raw: RawAma, sid: str, req_id: int = 10, timeout: float = 30.0
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Send a prompt and collect the final status of every tool call up to its response."""
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": req_id,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
        }
    )
    finals: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while True:
        msg = raw.recv(max(0.1, deadline - time.monotonic()))
        if msg.get("method") == "session/request_permission":
            raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                }
            )
            continue
        update = msg.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") in ("completed", "failed"):
            finals[update["toolCallId"]] = update
        if "method" not in msg and msg.get("id") == req_id:
            return msg, finals


def text_of(update: dict[str, Any]) -> str:
    return "".join(
        c.get("content", {}).get("text", "") for c in update.get("content") or [] if c.get("type") == "content"
    )


def exits_within(raw: RawAma, seconds: float, how: str = "eof") -> float:
    start = time.monotonic()
    if how == "eof":
        assert raw.proc.stdin is not None
        raw.proc.stdin.close()
    else:
        raw.proc.send_signal(signal.SIGTERM)
    raw.proc.wait(seconds + 5)
    return time.monotonic() - start


def hostile_workspace(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    # Not a git repository: these lines go through ama's own .gitignore matcher (they ignore nothing here).
    (ws / ".gitignore").write_text("**/" * 30 + "*q\n" + "*a" * 60 + "\n")
    deep = ws.joinpath(*(["d"] * 25))
    deep.mkdir(parents=True)
    (deep / "yx").write_text("")
    (ws / "long.txt").write_text("a" * 300_000 + "!\n")
    (ws / "zero").symlink_to("/dev/zero")


HOSTILE_CALLS = [
    call("r1", "read_file", path="pipe"),
    call("r2", "read_file", path="zero"),
    call("f1", "find_files", pattern="**/" * 30 + "*x"),
    call("s1", "search", pattern="(a+)+$"),
    call("s2", "search", pattern="(a)\\1"),
    call("l1", "list_dir"),
    call("w1", "write_file", path="pipe", content="x"),
]


def test_hostile_calls_all_answer_and_the_process_still_exits_on_eof(tmp_path, started):
    ama = Ama(tmp_path)
    hostile_workspace(ama.workspace)
    raw, sid = start(ama, [*HOSTILE_CALLS, {"text": "done"}], started, mode="full_access")
    begun = time.monotonic()
    response, finals = prompt(raw, sid)
    assert response["result"]["stopReason"] == "end_turn"
    assert time.monotonic() - begun < 20
    assert set(finals) == {"r1", "r2", "f1", "s1", "s2", "l1", "w1"}
    assert finals["r1"]["status"] == "failed" and "FIFO" in text_of(finals["r1"])
    assert finals["r2"]["status"] == "failed" and "/dev" in text_of(finals["r2"])
    assert finals["f1"]["status"] == "completed" and text_of(finals["f1"]).endswith("yx")
    assert finals["s1"]["status"] == "completed" and "long.txt" not in text_of(finals["s1"])
    assert finals["s2"]["status"] == "failed" and "backreferences" in text_of(finals["s2"])
    assert "not readable" in text_of(finals["l1"])
    assert finals["w1"]["status"] == "failed" and "FIFO" in text_of(finals["w1"])
    assert exits_within(raw, 1.0) < 1.0


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_exit_during_a_running_command_kills_its_setsid_child(tmp_path, how, started):
    ama = Ama(tmp_path)
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    # The command never ends by itself, and it leaves a child in a session of its own.
    replies = [call("c1", "run_command", command=f"setsid sleep 3{tag} & sleep 4{tag}"), {"text": "done"}]
    raw, sid = start(ama, replies, started, mode="full_access")
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
        }
    )
    assert holds_within(
        lambda: processes_with_cmdline(f"sleep 3{tag}") and processes_with_cmdline(f"sleep 4{tag}"), 10.0
    )
    assert exits_within(raw, 1.0, how) < 1.5
    assert holds_within(
        lambda: not processes_with_cmdline(f"sleep 3{tag}") and not processes_with_cmdline(f"sleep 4{tag}"), 5.0
    )


def _evil_repo(root: Path) -> Path:
    marker = root.parent / "pwned"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    hook = root.parent / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with open(root / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = {hook}\n")
    (root / "a.py").write_text("needle\n")
    return marker


@pytest.mark.skipif(not HAS_GIT, reason="git not installed")
@pytest.mark.parametrize("mode", ["manual", "accept_edits", "read_only", "full_access"])
def test_a_repository_fsmonitor_never_runs_in_any_mode(tmp_path, mode, started):
    ama = Ama(tmp_path)
    marker = _evil_repo(ama.workspace)
    hook = tmp_path / "hook.sh"
    replies = [
        call("f1", "find_files", pattern="**/*.py"),
        call("s1", "search", pattern="needle"),
        # The model tries to plant the trap itself: a write into .git is never a plain edit.
        call("w1", "write_file", path=".git/config", content=f"[core]\n\tfsmonitor = {hook}\n"),
        call("s2", "search", pattern="needle"),
        {"text": "done"},
    ]
    raw, sid = start(ama, replies, started, mode=mode)
    response, finals = prompt(raw, sid)
    assert response["result"]["stopReason"] == "end_turn"
    assert finals["f1"]["status"] == "completed" and text_of(finals["f1"]) == "a.py"
    assert "a.py:1:needle" in text_of(finals["s1"]) and "a.py:1:needle" in text_of(finals["s2"])
    assert finals["w1"]["status"] == "failed"
    assert not marker.exists()
    assert exits_within(raw, 1.0) < 1.0
