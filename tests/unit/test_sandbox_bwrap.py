"""bubblewrap, the sandbox where the kernel has no Landlock (sandbox/bwrap.py, issue 38): which `bwrap` is taken,
the trial run that says whether it can start here, the state and `ama doctor` it gives, and real commands run
through it by `LocalWorkspace` (real processes and pipes; skipped where bwrap cannot run here, with why)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import OFF, READ_ONLY, WORKSPACE_WRITE, Sandbox, SandboxState, bwrap, sandbox_state
from ama_acp.tools.workspace import LocalWorkspace

FOUND = bwrap.find(os.environ.get("PATH", os.defpath), [])
WHY_NOT = "bwrap is not installed" if FOUND is None else bwrap.trial(FOUND)
needs_bwrap = pytest.mark.skipif(bool(WHY_NOT), reason=f"bubblewrap cannot confine here: {WHY_NOT}")


def fake_bwrap(folder: Path, script: str = "exit 0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "bwrap"
    program.write_text(f"#!/bin/sh\n{script}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def test_bwrap_is_taken_only_from_absolute_entries_outside_the_workspace(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    inside = fake_bwrap(ws / "bin")
    linked = tmp_path / "linked"
    linked.symlink_to(ws / "bin")  # an entry outside that leads inside
    outside = fake_bwrap(tmp_path / "usr" / "bin")
    monkeypatch.chdir(ws)  # where the relative and empty entries would lead
    path = os.pathsep.join(["", "bin", str(ws / "bin"), str(linked), str(outside.parent)])
    assert bwrap.find(path, [str(ws)]) == str(outside)
    assert bwrap.find(os.pathsep.join(["", "bin", str(inside.parent)]), [str(ws)]) is None
    assert bwrap.find(str(inside.parent), []) == str(inside)  # no roots: nothing is inside


def test_a_program_link_into_the_workspace_is_not_taken(tmp_path):
    ws = tmp_path / "ws"
    target = fake_bwrap(ws / "tools")
    entry = tmp_path / "bin"
    entry.mkdir()
    (entry / "bwrap").symlink_to(target)  # a global link into the project
    assert bwrap.find(str(entry), [str(ws)]) is None


def test_the_trial_says_why_bwrap_cannot_start_in_its_own_words(tmp_path):
    refused = fake_bwrap(tmp_path / "a", "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1")
    assert bwrap.trial(str(refused)) == (
        f"bubblewrap ({refused}) cannot start here (bwrap: setting up uid map: Permission denied)"
    )
    silent = fake_bwrap(tmp_path / "b", "exit 3")
    assert bwrap.trial(str(silent)) == f"bubblewrap ({silent}) cannot start here (exit code 3)"
    assert bwrap.trial(str(fake_bwrap(tmp_path / "c"))) == ""


def test_the_command_line_binds_only_the_writable_folders_and_cuts_the_network(tmp_path):
    line = bwrap.command_line(
        "/usr/bin/bwrap", [str(tmp_path), str(tmp_path)], network=False, argv=["/bin/sh", "-c", "x"]
    )
    assert line[:5] == ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev"]
    assert {"--die-with-parent", "--new-session", "--unshare-net"} <= set(line)
    assert line.count("--bind-try") == 1 and line[-4:] == ["--", "/bin/sh", "-c", "x"]
    assert "--unshare-net" not in bwrap.command_line("b", [], network=True, argv=["/bin/true"])


def no_landlock(monkeypatch: pytest.MonkeyPatch, bubblewrap: tuple[str, str]) -> None:
    from ama_acp import sandbox

    monkeypatch.setattr(sandbox, "kernel_abi", lambda: (0, "the kernel has no Landlock (in this test)"))
    monkeypatch.setattr(sandbox, "_bubblewrap", lambda roots: bubblewrap)


def test_without_landlock_bubblewrap_confines_and_says_so(monkeypatch):
    no_landlock(monkeypatch, ("/usr/bin/bwrap", ""))
    state = sandbox_state(SandboxConfig())
    assert state.mechanism == "bubblewrap" and state.active and state.network_blocked
    assert state.summary() == (
        "workspace-write, bubblewrap /usr/bin/bwrap (no Landlock: the kernel has no Landlock (in this test)), "
        "network blocked"
    )
    assert "network connections" in state.blocked()
    assert not sandbox_state(SandboxConfig(network=True)).network_blocked
    assert sandbox_state(SandboxConfig(OFF)).mechanism is None


def test_without_either_commands_run_unconfined_and_both_reasons_are_given(monkeypatch):
    no_landlock(monkeypatch, ("", "bubblewrap (/usr/bin/bwrap) cannot start here (bwrap: no namespaces)"))
    state = sandbox_state(SandboxConfig())
    assert not state.active and state.mechanism is None
    assert state.reason == (
        "the kernel has no Landlock (in this test); bubblewrap (/usr/bin/bwrap) cannot start here (bwrap: no namespaces)"
    )


def test_doctor_names_bubblewrap(tmp_path, monkeypatch):
    from ama_acp import doctor

    no_landlock(monkeypatch, ("/usr/bin/bwrap", ""))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")}
    report = doctor.diagnose(env=env, network=False)
    assert report.sandbox is not None and report.sandbox.mechanism == "bubblewrap"
    assert f"sandbox: {report.sandbox.summary}" in doctor.render(report)
    assert report.sandbox.summary.startswith("workspace-write, bubblewrap /usr/bin/bwrap (no Landlock: ")


def forced(mode: str = WORKSPACE_WRITE, network: bool = False) -> SandboxState:
    assert FOUND is not None
    return SandboxState(mode, network, 0, "forced by the test", FOUND)


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


WRITES = (
    'echo in > inside && echo wrote-inside; echo t > "$TMPDIR/t" && echo wrote-tmp; echo out > {out} && echo wrote-out'
)
CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"


@needs_bwrap
@pytest.mark.anyio
async def test_bubblewrap_blocks_writes_outside_and_the_network(tmp_path, listener):
    ws = tmp_path / "ws"
    ws.mkdir()
    workspace = LocalWorkspace(sandbox=Sandbox(forced(), [str(ws)]))
    result = await workspace.run_command(WRITES.format(out=tmp_path / "out"), str(ws), 30, 10_000)
    assert "wrote-inside" in result.output and "wrote-tmp" in result.output and "wrote-out" not in result.output
    assert "Read-only file system" in result.output and not (tmp_path / "out").exists()
    assert result.sandbox.startswith("writes outside the workspace and network connections")
    result = await workspace.run_command(CONNECT.format(port=listener), str(ws), 30, 10_000)
    assert "connected" not in result.output and result.exit_code != 0
    free = LocalWorkspace(sandbox=Sandbox(forced(network=True), [str(ws)]))
    assert "connected" in (await free.run_command(CONNECT.format(port=listener), str(ws), 30, 10_000)).output


@needs_bwrap
@pytest.mark.anyio
async def test_bubblewrap_read_only_keeps_only_the_temp_folder_writable(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    workspace = LocalWorkspace(sandbox=Sandbox(forced(READ_ONLY), [str(ws)]))
    result = await workspace.run_command(WRITES.format(out=tmp_path / "out"), str(ws), 30, 10_000)
    assert "wrote-tmp" in result.output and "wrote-inside" not in result.output and not (ws / "inside").exists()


@needs_bwrap
@pytest.mark.anyio
async def test_a_timeout_ends_the_bubblewrapped_command_and_what_left_its_group(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    workspace = LocalWorkspace(sandbox=Sandbox(forced(), [str(ws)]))
    result = await workspace.run_command(f"setsid sleep 300 & echo $! > {ws}/pid; sleep 300", str(ws), 0.5, 1000)
    assert result.timed_out
    pid = (ws / "pid").read_text().strip()
    from tests.support.leaks import stat_fields
    from tests.support.waiting import poll_until

    poll_until(lambda: stat_fields(pid)[:1] in ([], [b"Z"]), 5, "the escaped sleep to end")


@needs_bwrap
def test_a_terminal_started_by_another_program_runs_under_bubblewrap_the_real_command_last(tmp_path):
    """An editor's terminal (sandbox/terminal.py): the line it shows and runs is bwrap's, ending in the command, and
    the loader's variables reach the command, not bwrap."""
    import subprocess

    from ama_acp.sandbox.temp import remove_temp
    from ama_acp.sandbox.terminal import confine

    ws = tmp_path / "ws"
    ws.mkdir()
    command = ["/bin/sh", "-c", f'echo in > {ws}/in; echo out > {tmp_path}/out; echo "$LD_X $TMPDIR"']
    confined = confine(Sandbox(forced(), [str(ws)]), command, {"LD_X": "loader", "AMA_SANDBOX": "x"})
    assert confined is not None
    try:
        assert confined.argv[0] == FOUND and confined.argv[-3:] == command and "AMA_SANDBOX" not in confined.env
        done = subprocess.run(confined.argv, env={**os.environ, **confined.env}, capture_output=True, timeout=30)
    finally:
        remove_temp(confined.tmp)
    assert (ws / "in").exists() and not (tmp_path / "out").exists()
    assert b"Read-only file system" in done.stderr and done.stdout.decode().split() == ["loader", confined.tmp]
