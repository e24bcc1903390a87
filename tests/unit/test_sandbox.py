"""The sandbox of run_command: detecting Landlock, the rules asked for, the launcher, and `[sandbox]` parsing
(issue 38). The end-to-end checks through `ama --mode acp` are tests/integration/test_sandbox_e2e.py."""

from __future__ import annotations

import errno
import os
import posix
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ama_acp.config import SandboxConfig, parse_config
from ama_acp.sandbox import OFF, READ_ONLY, WORKSPACE_WRITE, Sandbox, SandboxState, kernel_abi, landlock

ABI, WHY = kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")

READ_FILE, READ_DIR, EXECUTE = 1 << 2, 1 << 3, 1 << 0


def test_the_kernel_answers_with_a_version_or_a_reason():
    abi, why = landlock.abi_version()
    assert abi >= 0
    assert (abi >= 1) == (why == "")


def test_another_os_has_no_landlock(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert landlock.abi_version() == (0, "Landlock is Linux-only (this is darwin)")


def test_another_machine_is_not_guessed_at(monkeypatch):
    monkeypatch.setattr(posix, "uname", lambda: SimpleNamespace(machine="riscv64"))
    abi, why = landlock.abi_version()
    assert abi == 0 and "riscv64" in why


@pytest.mark.parametrize(
    ("err", "said"),
    [(errno.ENOSYS, "no Landlock"), (errno.EOPNOTSUPP, "disabled"), (errno.EPERM, "not usable")],
)
def test_a_kernel_that_refuses_says_why(monkeypatch, err, said):
    def refuse(name: str, *args: object) -> int:
        raise OSError(err, "no")

    monkeypatch.setattr(landlock, "_libc_call", refuse)
    if not sys.platform.startswith("linux") or os.uname().machine not in landlock._MACHINES:
        pytest.skip("the syscall is asked only on Linux x86_64/aarch64")
    abi, why = landlock.abi_version()
    assert abi == 0 and said in why


def test_reads_and_execution_are_never_handled_so_stay_allowed_everywhere():
    for abi in range(1, 8):
        assert landlock.fs_rights(abi) & (READ_FILE | READ_DIR | EXECUTE) == 0
    assert landlock.fs_rights(1) & (1 << 13 | 1 << 14) == 0  # REFER and TRUNCATE came later
    assert landlock.fs_rights(3) & (1 << 13 | 1 << 14) == (1 << 13 | 1 << 14)


def state(mode: str = WORKSPACE_WRITE, network: bool = False, abi: int = 4) -> SandboxState:
    return SandboxState(mode, network, abi, "" if abi else "no Landlock")


def test_the_state_says_what_is_confined():
    assert state().active and state().network_blocked
    assert "network blocked" in state().summary() and "ABI 4" in state().summary()
    assert not state(network=True).network_blocked
    old = state(abi=3)
    assert old.active and not old.network_blocked and "need Landlock ABI 4" in old.summary()
    assert not state(abi=0).active and "not available: no Landlock" in state(abi=0).summary()
    assert not state(OFF).active and state(OFF).summary().startswith("off")
    assert state().blocked() == "writes outside the workspace and network connections (TCP connect and bind)"
    assert state(READ_ONLY, network=True).blocked() == "writes anywhere but the private temp folder"


def spec_of(sandbox: Sandbox, argv: list[str]) -> tuple[list[str], list[str], bool]:
    env: dict[str, str] = {}
    launcher = sandbox.wrap(argv, env, "/tmp/t")
    assert launcher[:4] == [sys.executable, "-I", "-S", "-c"] and "landlock.main()" in launcher[4]
    net, dirs, files, command = landlock.decode_spec(env[landlock.SPEC_VAR])
    assert command == argv
    return dirs, files, net


def test_the_launcher_gets_the_roots_only_when_the_workspace_is_writable():
    cmd = ["/bin/bash", "-c", "true"]
    dirs, files, net = spec_of(Sandbox(state(), ["/ws", "/more"]), cmd)
    assert dirs == ["/tmp/t", "/dev/shm", "/dev/pts", "/ws", "/more"] and net is False
    dirs, files, net = spec_of(Sandbox(state(READ_ONLY, network=True), ["/ws"]), cmd)
    assert "/ws" not in dirs and net is True and "/dev/null" in files


def launch(spec: str, cwd: str = "/") -> subprocess.CompletedProcess[str]:
    env = {landlock.SPEC_VAR: spec}
    argv = [sys.executable, "-I", "-S", landlock.__file__]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=30, check=False)


def test_a_launcher_that_cannot_confine_runs_nothing(tmp_path):
    done = launch("2:1x" + landlock.encode_spec(True, [], [], ["/bin/sh", "-c", f"touch {tmp_path}/ran"]))
    assert done.returncode == 126 and "the command did not run" in done.stderr
    assert not (tmp_path / "ran").exists()


@needs_landlock
def test_the_launcher_confines_writes_to_the_folders_it_names(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = "echo a > ws/in && mkdir ws/d && mv ws/in ws/d/ && echo ok > /dev/null; echo b > out"
    dirs = [str(ws), str(tmp_path / "missing")]
    done = launch(landlock.encode_spec(True, dirs, ["/dev/null"], ["/bin/sh", "-c", script]), cwd=str(tmp_path))
    assert (ws / "d" / "in").read_text() == "a\n"
    assert not (tmp_path / "out").exists() and "Permission denied" in done.stderr


@needs_landlock
def test_the_command_gets_default_signals_and_not_the_spec():
    script = "grep -E '^SigIgn' /proc/self/status; echo spec=${AMA_SANDBOX-unset}"
    done = launch(landlock.encode_spec(True, [], [], ["/bin/sh", "-c", script]))
    assert "SigIgn:\t0000000000000000" in done.stdout and "spec=unset" in done.stdout


@pytest.mark.parametrize("argv", [["/bin/sh"], ["/bin/sh", "-c", "echo '1:x' 3:: \u00e9\U0001f600 \udcff"], ["/p", ""]])
def test_the_spec_survives_its_encoding(argv):
    dirs = ["/a:b", "", "/ü"]
    assert landlock.decode_spec(landlock.encode_spec(True, dirs, [], argv)) == (True, dirs, [], argv)


@pytest.mark.parametrize("text", ["", "x", "1:0", "1:01:0", "1:21:01:0", "9:0", "1:01:01:0", "-1:"])
def test_a_malformed_spec_is_refused(text):
    with pytest.raises((ValueError, IndexError)):
        landlock.decode_spec(text)


def parse(text: str) -> tuple[SandboxConfig, tuple[str, ...]]:
    cfg = parse_config(text, "c.toml")
    return cfg.sandbox, cfg.warnings


def test_a_sandbox_table_is_read():
    assert parse("") == (SandboxConfig(), ())
    assert SandboxConfig() == SandboxConfig(WORKSPACE_WRITE, network=False)
    assert parse('[sandbox]\nmode = "read-only"\nnetwork = true\n') == (SandboxConfig(READ_ONLY, True), ())
    assert parse('sandbox = { mode = "off" }\n') == (SandboxConfig(OFF), ())


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('model = "m"\n[sandbox]\nmode = "strict"\n', "c.toml (at line 2): [sandbox] mode must be"),
        ('[sandbox]\nmode = "off"\nnetwork = 1\n', "c.toml (at line 1): [sandbox] network must be true or false"),
        ("[sandbox]\nnet = true\n", "has no setting 'net'"),
        ("sandbox = 3\n", "c.toml (at line 1): [sandbox] must be a table"),
        ('sandbox.mode = ["off"]\n', "at line 1"),
    ],
)
def test_a_malformed_sandbox_is_reported_and_dropped_whole(text, said):
    sandbox, warnings = parse(text)
    assert sandbox == SandboxConfig()  # the default, never a part of what was written
    assert len(warnings) == 1 and said in warnings[0] and "it is ignored" in warnings[0]


@pytest.mark.parametrize(
    ("table", "mode", "mechanism"),
    [("", WORKSPACE_WRITE, "landlock" if ABI >= 1 else None), ('[sandbox]\nmode = "off"\n', OFF, None)],
)
def test_doctor_reports_the_sandbox(tmp_path, table, mode, mechanism):
    from ama_acp import doctor

    config = tmp_path / "config.toml"
    config.write_text(table)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")}
    report = doctor.diagnose(config=str(config), env=env, network=False)
    assert report.sandbox is not None
    assert (report.sandbox.mode, report.sandbox.mechanism) == (mode, mechanism)
    assert report.to_json()["sandbox"]["abi"] == (ABI if mode != OFF else 0)
    line = next(line for line in doctor.render(report) if line.startswith("sandbox: "))
    assert line == f"sandbox: {report.sandbox.summary}"
    assert ("Landlock ABI" in line) == (mechanism is not None)


def test_doctor_says_when_there_is_no_sandbox(tmp_path, monkeypatch):
    from ama_acp import doctor, sandbox

    monkeypatch.setattr(sandbox, "kernel_abi", lambda: (0, "the kernel has no Landlock (too old, or built without it)"))
    monkeypatch.setattr(sandbox, "_bubblewrap", lambda roots: ("", "bubblewrap (bwrap) is not installed"))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d")}
    report = doctor.diagnose(env=env, network=False)
    assert report.sandbox is not None and report.sandbox.mechanism is None
    assert (
        "sandbox: not available: the kernel has no Landlock (too old, or built without it); bubblewrap (bwrap) is "
        "not installed; commands run unconfined" in (doctor.render(report))
    )


def test_the_private_temp_folders_of_dead_processes_are_swept_and_nothing_else(tmp_path: Path) -> None:
    """An ama killed while its command ran leaves `ama-run-<pid>-…`; the next process's first command removes it.
    A live process's folder, a link by that name (to a folder elsewhere), a file and other names stay."""
    import subprocess
    import sys

    from ama_acp.sandbox.temp import sweep_dead_runs

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"ama-run-{gone.pid}-abc"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "f").write_text("x")
    alive = tmp_path / f"ama-run-{os.getpid()}-def"
    alive.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("k")
    (tmp_path / f"ama-run-{gone.pid}-link").symlink_to(target)
    (tmp_path / f"ama-run-{gone.pid}-file").write_text("f")
    (tmp_path / "ama-run-notapid-x").mkdir()
    sweep_dead_runs(str(tmp_path))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert dead.name not in left
    assert alive.name in left and (target / "keep").exists()
    assert {f"ama-run-{gone.pid}-link", f"ama-run-{gone.pid}-file", "ama-run-notapid-x"} <= set(left)
