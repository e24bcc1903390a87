"""A session open in another ama process (issue 41 point 5): session/list marks it, loading an idle one takes
it over (the holder's editor is told, its session closed), a busy one stays where its turn runs, and a
hostile client on the holder's socket changes nothing. Two real `ama --mode acp` processes, one data dir."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ama_acp.sandbox import kernel_abi, landlock
from ama_acp.session.store.handover import address
from tests.support.harness import Ama, write_script
from tests.support.raw import RawAma


def _start(ama: Ama, script: Path) -> RawAma:
    raw = RawAma(ama, "--model", "scripted/held", env={"AMA_SCRIPT": str(script)}, process=True)
    assert raw.request(1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    return raw


def _new_spoken(raw: RawAma, ama: Ama) -> str:
    """A session with a prompt in it (session/list shows only those)."""
    sid: str = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    answer = raw.request(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    assert answer["result"]["stopReason"] == "end_turn"
    return sid


def _listed(raw: RawAma, ama: Ama, req_id: int) -> dict[str, dict[str, Any]]:
    sessions = raw.request(req_id, "session/list", {"cwd": str(ama.workspace)})["result"]["sessions"]
    return {s["sessionId"]: s for s in sessions}


def _held_by(info: dict[str, Any]) -> dict[str, Any] | None:
    held: dict[str, Any] | None = info.get("_meta", {}).get("ama", {}).get("heldBy")
    return held


@contextlib.contextmanager
def _two(tmp_path: Path, replies: list[dict[str, Any]]) -> Iterator[tuple[Ama, RawAma, RawAma]]:
    """Two ama processes on one data dir, their model scripted with `replies` (the scripted model answers a
    conversation's n-th request with the n-th reply, a loaded one's too)."""
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "held.json", replies)
    first = _start(ama, script)
    second = _start(ama, script)
    try:
        yield ama, first, second
    finally:
        for raw in (first, second):
            if raw.alive():
                raw.close(timeout=30)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Ama, RawAma, RawAma]]:
    with _two(tmp_path, [{"text": "one"}, {"text": "two"}]) as two:
        yield two


@pytest.fixture
def busy_pair(tmp_path: Path) -> Iterator[tuple[Ama, RawAma, RawAma]]:
    with _two(tmp_path, [{"text": "one"}, {"text": "slow", "hang": 4}]) as two:  # the second request hangs
        yield two


def test_an_idle_session_is_marked_then_handed_over(pair: tuple[Ama, RawAma, RawAma]) -> None:
    ama, first, second = pair
    sid = _new_spoken(first, ama)
    assert _held_by(_listed(second, ama, 10)[sid]) == {"pid": first.proc.pid, "idle": True}
    assert _held_by(_listed(first, ama, 11)[sid]) is None  # its own: the editor has it open already

    loaded = second.request(12, "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
    assert "result" in loaded, loaded
    # The first process's editor is told once, and the session is closed there.
    told: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while not told:
        msg = first.recv(max(0.1, deadline - time.monotonic()))
        update = msg.get("params", {}).get("update", {})
        text = str(update.get("content", {}).get("text", "")) + str(update.get("description", ""))
        if msg.get("method") == "session/update" and "opened in another window" in text:
            told.append(msg)
    assert f"pid {second.proc.pid}" in str(told[0]) and "closed here" in str(told[0])
    refused = first.request(13, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
    assert "opened in another window" in refused["error"]["message"]
    # The second process has it now: it prompts in it, and the first sees it held there.
    answer = second.request(14, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go on"}]})
    assert answer["result"]["stopReason"] == "end_turn"
    assert _held_by(_listed(first, ama, 15)[sid]) == {"pid": second.proc.pid, "idle": True}


def test_a_busy_session_stays_where_its_turn_runs(busy_pair: tuple[Ama, RawAma, RawAma]) -> None:
    ama, first, second = busy_pair
    sid = _new_spoken(first, ama)
    first.send(
        {
            "jsonrpc": "2.0",
            "id": 20,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "slow one"}]},
        }
    )
    deadline = time.monotonic() + 10
    req = 30
    while _held_by(_listed(second, ama, req)[sid]) != {"pid": first.proc.pid, "idle": False}:
        assert time.monotonic() < deadline, "the running turn never showed in session/list"
        req += 1
    err = second.request(req + 1, "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
    assert err["error"]["code"] == -32010
    message = err["error"]["message"]
    assert f"running a turn in another ama (pid {first.proc.pid})" in message and "then load again" in message
    assert err["error"]["data"] == {"sessionId": sid, "pid": first.proc.pid, "details": message}  # toad shows details
    assert first.response(20, timeout=30)["result"]["stopReason"] == "end_turn"  # the turn ran on, unharmed
    assert _held_by(_listed(second, ama, req + 2)[sid]) == {"pid": first.proc.pid, "idle": True}


def _poke(path: bytes, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(path)
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            return sock.recv(4096)
        except OSError:  # hung up on: nothing to read
            return b""


def test_a_hostile_client_on_the_socket_changes_nothing(pair: tuple[Ama, RawAma, RawAma]) -> None:
    ama, first, second = pair
    sid = _new_spoken(first, ama)
    path = address(first.proc.pid)  # abstract: no file in the data dir to plant a link as, none left after a crash
    assert not (ama.data / "run").exists()
    for junk in (b"\xff\xfe\x00garbage\n", b"{}\n", b'{"release": 5}\n', b"x" * 10_000, b'{"release": "x", "y": 1}\n'):
        assert _poke(path, junk) == b""  # hung up on, unanswered
    for other in ("ses_000000000000aaaaaaaaaaaa", "a/../b", sid.upper()):  # not a session held there
        assert _poke(path, f'{{"release": "{other}"}}\n'.encode()) == b'{"answer":"not-held"}\n'
    flood = [socket.socket(socket.AF_UNIX) for _ in range(40)]  # silent askers holding connections open
    try:
        for sock in flood:
            sock.connect(path)
        assert _held_by(_listed(second, ama, 40)[sid]) == {"pid": first.proc.pid, "idle": True}
    finally:
        for sock in flood:
            sock.close()
    answer = first.request(41, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "still"}]})
    assert "result" in answer, answer  # still open in the first process
    # And a real asker is still served afterwards.
    loaded = second.request(42, "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
    assert "result" in loaded, loaded


@pytest.mark.skipif(
    kernel_abi()[0] < landlock.SCOPE_ABI, reason=f"Landlock scopes abstract sockets from ABI {landlock.SCOPE_ABI}"
)
def test_a_command_in_the_sandbox_cannot_ask_another_windows_session_away(pair: tuple[Ama, RawAma, RawAma]) -> None:
    """A prompt-injected command (what run_command runs, through the sandbox's launcher) that speaks the hand-over
    protocol to the ama holding an idle session is refused by the kernel; the same words from outside the sandbox
    are answered, so the refusal is the sandbox's."""
    ama, first, second = pair
    sid = _new_spoken(first, ama)
    ask = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({address(first.proc.pid)!r})\n"
        "except OSError as e:\n"
        "    print('refused', e.errno); sys.exit(0)\n"
        f"s.sendall(b'{{\"release\": \"{sid}\"}}\\n'); print('answered', s.recv(100))\n"
    )
    spec = landlock.encode_spec(True, [str(ama.workspace)], [], [sys.executable, "-I", "-c", ask])
    confined = subprocess.run(
        [sys.executable, "-I", "-S", landlock.__file__],
        env={landlock.SPEC_VAR: spec},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert confined.stdout.startswith("refused 1"), (confined.stdout, confined.stderr)  # EPERM
    assert _held_by(_listed(second, ama, 60)[sid]) == {"pid": first.proc.pid, "idle": True}  # still held there
    outside = subprocess.run(
        [sys.executable, "-I", "-c", ask.replace(sid, "ses_000000000000aaaaaaaaaaaa")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "not-held" in outside.stdout, outside  # the socket answers a process outside the sandbox


def test_an_asker_with_no_new_privs_is_not_answered_on_any_kernel(pair: tuple[Ama, RawAma, RawAma]) -> None:
    """Every command of a sandbox runs with no_new_privs (Landlock and bubblewrap set it; it cannot be dropped):
    where the kernel does not keep it from the socket (Landlock before ABI 6), the holder does. Here an asker that
    only set no_new_privs, with no Landlock at all: it reaches the socket and is hung up on."""
    ama, first, second = pair
    sid = _new_spoken(first, ama)
    request = (json.dumps({"release": sid}) + "\n").encode()
    ask = (
        "import ctypes, socket\n"
        "assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0\n"  # PR_SET_NO_NEW_PRIVS
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.connect({address(first.proc.pid)!r})\n"
        "try:\n"
        f"    s.sendall({request!r}); s.settimeout(10); print('answer', s.recv(100))\n"
        "except OSError:\n"
        "    print('hung up')\n"  # before its request was even sent
    )
    done = subprocess.run([sys.executable, "-I", "-c", ask], capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.strip() in ("answer b''", "hung up"), (done.stdout, done.stderr)  # unanswered
    assert _held_by(_listed(second, ama, 70)[sid]) == {"pid": first.proc.pid, "idle": True}  # still held there
    assert "runs confined (a sandboxed command?): not answered" in ama.log_text()
