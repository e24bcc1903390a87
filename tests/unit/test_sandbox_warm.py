"""The launcher a sandbox keeps ready (sandbox/warm.py, issue 38): it runs one command and only what a whole request
says, exits when its socket closes (the sandbox closed, or its ama killed), is replaced when it died, and its
command is ended by the same process-tree sweep as any other. Real processes, real sockets and pipes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import Sandbox, kernel_abi, landlock, sandbox_state
from ama_acp.sandbox import warm as warm_module
from ama_acp.sandbox.warm import Launcher
from ama_acp.tools.proctree import MARKER_VAR, marked_pids
from ama_acp.tools.workspace import LocalWorkspace
from tests.support.waiting import poll_until

ABI, WHY = kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")

names = st.binary(min_size=1, max_size=20).filter(lambda b: b"=" not in b and b"\0" not in b)


@given(
    st.text(max_size=40),
    st.binary(max_size=40),
    st.dictionaries(names, st.binary(max_size=40).filter(lambda b: b"\0" not in b), max_size=5),
)
def test_a_request_survives_its_encoding_and_no_cut_of_it_is_a_request(spec, cwd, env):
    request = landlock.encode_request(spec, cwd, env)
    assert landlock.decode_request(request) == (spec, cwd, env)
    for end in range(len(request)):  # ama killed while it wrote: the launcher must run nothing
        with pytest.raises((ValueError, IndexError)):
            landlock.decode_request(request[:end])


async def until(condition: object, what: str, seconds: float = 10.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.005)


@pytest.fixture
async def warm(tmp_path: Path) -> AsyncIterator[tuple[Sandbox, LocalWorkspace]]:
    """A sandbox of `tmp_path/ws` whose first command has run, so that a launcher is on its way."""
    ws = tmp_path / "ws"
    ws.mkdir()
    box = Sandbox(sandbox_state(SandboxConfig(), [str(ws)]), [str(ws)], warm=True)
    workspace = LocalWorkspace(sandbox=box)
    try:
        assert (await workspace.run_command("true", str(ws), 30, 1000)).exit_code == 0
        await until(box.warm_ready, "the first launcher")
        yield box, workspace
    finally:
        await box.aclose()


def standby_pid(box: Sandbox) -> int:
    launcher = box._standby._launcher if box._standby is not None else None
    assert launcher is not None
    return launcher.proc.pid


pytestmark = [pytest.mark.anyio, needs_landlock]


async def test_the_warm_launcher_becomes_the_command_in_its_folder_confined_holding_nothing_of_amas(tmp_path, warm):
    box, workspace = warm
    pid = standby_pid(box)
    # The process-tree sweep finds the idle launcher by the marker its command will carry.
    environ = [v for v in (await anyio.Path(f"/proc/{pid}/environ").read_bytes()).split(b"\0") if v]
    assert len(environ) == 1 and environ[0].startswith(f"{MARKER_VAR}=".encode())  # nothing else of ama's
    marker = environ[0].split(b"=", 1)[1].decode()
    assert pid in marked_pids(marker)
    ws = tmp_path / "ws"
    (ws / "sub").mkdir()
    script = (
        "echo $$; pwd; echo \"$TMPDIR\"; ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; "
        f'echo in > inside && echo wrote-inside; echo out > {tmp_path}/outside || echo blocked; echo "${MARKER_VAR}"'
    )
    result = await workspace.run_command(script, str(ws / "sub"), 30, 10_000)
    lines = result.output.splitlines()
    assert int(lines[0]) == pid  # the launcher kept ready, not a new process
    assert lines[1] == str(ws / "sub") and lines[2].startswith(os.path.join(os.path.dirname(lines[2]), "ama-run-"))
    # stdin, stdout, stderr and ls's own: the socket to ama is closed before the exec
    assert lines[3].split() == ["0", "1", "2", "3"]
    assert "wrote-inside" in result.output and "blocked" in result.output and "Permission denied" in result.output
    assert (ws / "sub" / "inside").exists() and not (tmp_path / "outside").exists()
    assert lines[-1] == marker and result.exit_code == 0 and result.sandbox


async def test_a_launcher_serves_one_command_and_the_next_is_another(warm):
    box, workspace = warm
    pids = []
    for _ in range(3):
        await until(box.warm_ready, "the next launcher")
        pids.append(standby_pid(box))
        result = await workspace.run_command("echo $$", "/", 30, 1000)
        assert int(result.output) == pids[-1]
    assert len(set(pids)) == 3


async def test_a_launcher_exits_when_its_sandbox_closes(warm):
    box, _ = warm
    launcher = box._standby._launcher if box._standby is not None else None
    assert launcher is not None
    await box.aclose()
    assert launcher.proc.returncode == 0  # it went by itself on EOF, not killed after the grace
    assert not box.warm_ready()


async def test_a_launcher_that_died_is_replaced_and_the_command_still_runs(warm):
    box, workspace = warm
    dead = standby_pid(box)
    os.kill(dead, signal.SIGKILL)
    # Dead, whether ama has reaped it yet (its return code known) or not (then the hand-over finds its socket closed).
    # One killed at the very moment it is handed its command takes the command with it, as any killed command would.
    await until(lambda: _zombie(dead), "the launcher to die")
    result = await workspace.run_command("echo $$", "/", 30, 1000)
    assert result.exit_code == 0 and int(result.output) != dead
    await until(box.warm_ready, "a new launcher")
    assert standby_pid(box) != dead


async def test_a_request_cut_short_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    from ama_acp.sandbox import _SERVE

    launcher = await Launcher.start(_SERVE, {})
    try:
        await until(launcher.ready, "the launcher")
        argv = ["/bin/sh", "-c", f"touch {marker}"]
        request = landlock.encode_request(landlock.encode_spec(True, [], [], argv), b"/", {})
        assert await launcher.hand(request[:-1])
        assert await launcher.proc.wait() == 126
        assert launcher.proc.stdout is not None
        said = (await launcher.proc.stdout.receive()).decode()
        assert "the sandbox could not be set up, so the command did not run" in said
        assert not marker.exists()
    finally:
        await launcher.aclose()


async def test_a_timeout_ends_the_warm_command_and_what_it_left_outside_its_group(tmp_path, warm):
    box, workspace = warm
    pidfile = tmp_path / "ws" / "escaped"
    result = await workspace.run_command(f"setsid sleep 300 & echo $! > {pidfile}; sleep 300", "/", 0.5, 1000)
    assert result.timed_out
    escaped = int(pidfile.read_text())
    poll_until(lambda: not os.path.exists(f"/proc/{escaped}") or _zombie(escaped), 5, "the escaped sleep to end")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except OSError:
        return True


async def test_a_launcher_gone_before_its_request_is_not_handed_one():
    launcher = await Launcher.start("import os; os.close({fd})", {})
    try:
        await launcher.proc.wait()
        assert not await launcher.hand(b"4:1:x,")
    finally:
        await launcher.aclose()


async def test_a_stuck_launcher_is_not_waited_on_forever(monkeypatch):
    monkeypatch.setattr(warm_module, "HAND_TIMEOUT", 0.2)
    monkeypatch.setattr(warm_module, "EXIT_GRACE", 0.1)
    launcher = await Launcher.start("import time; time.sleep(300)", {})  # holds its socket, never reads
    try:
        assert not await launcher.hand(b"x" * (8 << 20))  # more than the socket buffers hold
    finally:
        await launcher.aclose()
    assert launcher.proc.returncode == -signal.SIGKILL


OWNER = """
import anyio, json, sys
from ama_acp.config import SandboxConfig
from ama_acp.sandbox import Sandbox, sandbox_state
from ama_acp.tools.workspace import LocalWorkspace

async def main():
    box = Sandbox(sandbox_state(SandboxConfig(), [sys.argv[1]]), [sys.argv[1]], warm=True)
    await LocalWorkspace(sandbox=box).run_command("true", sys.argv[1], 30, 100)
    while not box.warm_ready():
        await anyio.sleep(0.005)
    print(json.dumps(box._standby._launcher.proc.pid), flush=True)
    await anyio.sleep(300)

anyio.run(main)
"""


def test_a_launcher_exits_when_its_ama_is_killed(tmp_path):
    """ama SIGKILLed: no clean-up of its runs, and its idle launcher must not outlive it."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path)], stdout=subprocess.PIPE, cwd=str(Path(__file__).parents[2])
    )
    try:
        assert owner.stdout is not None
        launcher = json.loads(owner.stdout.readline())
    finally:
        owner.kill()
        owner.wait()
    poll_until(lambda: _zombie(launcher), 10, "the orphaned launcher to exit")


async def test_a_missing_folder_fails_as_it_does_unconfined(tmp_path, warm):
    _, workspace = warm
    with pytest.raises(FileNotFoundError):
        await workspace.run_command("true", str(tmp_path / "gone"), 30, 1000)
    with pytest.raises(FileNotFoundError):
        await LocalWorkspace().run_command("true", str(tmp_path / "gone"), 30, 1000)


TRACE = "import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); pid = int(sys.argv[1]); " + (
    "print(libc.ptrace(16, pid, 0, 0), os.strerror(ctypes.get_errno()))"  # PTRACE_ATTACH
)


async def test_a_sandboxed_command_cannot_trace_the_launcher_kept_ready_nor_read_its_memory(warm):
    """The launcher waits unconfined: a command (confined) must not be able to take it over."""
    box, _ = warm
    pid = standby_pid(box)
    other = LocalWorkspace(sandbox=Sandbox(box.state, box.roots, warm=False))  # a command of another session
    script = f"{sys.executable} -I -S -c '{TRACE}' {pid}; dd if=/proc/{pid}/mem of=/dev/null bs=1 count=1 skip=4096"
    result = await other.run_command(script, "/", 30, 10_000)
    assert "-1 Operation not permitted" in result.output and "Permission denied" in result.output
    assert box.warm_ready() and standby_pid(box) == pid  # untouched, still waiting


def launchers_of(parent: int) -> list[int]:
    """The launchers kept ready (`landlock.serve`) that are live children of `parent`."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == parent and stat[0] != b"Z" and b"landlock.serve(" in cmdline:
            found.append(int(pid))
    return found


def settled(box: Sandbox) -> bool:
    return box._standby is not None and box._standby._pending is None and box._standby._launcher is None


async def test_a_sandbox_closed_while_its_next_launcher_starts_leaves_none(tmp_path):
    """The next launcher starts in the background once a command is over; closing the sandbox right then waits
    for that start and ends what it started."""
    ws = tmp_path / "ws"
    ws.mkdir()
    box = Sandbox(sandbox_state(SandboxConfig(), [str(ws)]), [str(ws)], warm=True)
    workspace = LocalWorkspace(sandbox=box)
    before = set(launchers_of(os.getpid()))
    try:
        assert (await workspace.run_command("true", str(ws), 30, 1000)).exit_code == 0
        assert box._standby is not None and box._standby._pending is not None  # on its way, not started yet
    finally:
        await box.aclose()
    assert settled(box)  # the start was waited for, and what it made is gone
    assert set(launchers_of(os.getpid())) <= before
    assert not box.warm_ready()
