"""The sandbox of `run_command` (issue 38), through the real pipes: `ama --mode acp`, ama's own client (no fs or
terminal capability, so ama runs the commands itself) and the scripted model calling run_command.

Skipped where the kernel has no Landlock, or where bubblewrap cannot start (its tests): there is nothing to confine
with. The bubblewrap tests run a real `ama` process told to act as if the kernel had no Landlock (the test hook
`AMA_TEST_HIDE_LANDLOCK`, docs/testing.md).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ama_acp
from ama_acp.client.connection import ClientOptions
from ama_acp.client.demo import DEMO_MODEL
from ama_acp.sandbox import HIDE_LANDLOCK_VAR, bwrap, kernel_abi
from ama_acp.sandbox.landlock import NET_ABI
from tests.support.harness import Ama, run_ama, write_script
from tests.support.json_values import as_object, session_id
from tests.support.leaks import stat_fields
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

ABI, WHY = kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")
needs_net_rules = pytest.mark.skipif(ABI < NET_ABI, reason=f"Landlock ABI {ABI} has no TCP rules (needs {NET_ABI})")
BWRAP = bwrap.find(os.environ.get("PATH", os.defpath), [])
BWRAP_WHY_NOT = "bwrap is not installed" if BWRAP is None else bwrap.trial(BWRAP)
needs_bwrap = pytest.mark.skipif(bool(BWRAP_WHY_NOT), reason=f"bubblewrap cannot confine here: {BWRAP_WHY_NOT}")
NO_LANDLOCK = {HIDE_LANDLOCK_VAR: "1"}
OWN_FOLDER = os.path.dirname(os.path.dirname(os.path.realpath(ama_acp.__file__)))  # the checkout or site-packages


def sandboxed_ama(tmp: Path, sandbox: str = "") -> Ama:
    (tmp / "config.toml").write_text(f'model = "{DEMO_MODEL}"\n{sandbox}', encoding="utf-8")
    return Ama(tmp)


async def run_command(ama: Ama, command: str, mode: str = "full_access") -> str:
    """The text of run_command's final update after the scripted model ran `command` (in `mode`)."""
    return (await run_command_in(ama, command, mode))[0]


async def run_command_in(
    ama: Ama, command: str, mode: str, env: dict[str, str] | None = None, process: bool = False
) -> tuple[str, list[str], str]:
    """The final update's text, the permission questions' titles and the agent's messages; `env` and `process`
    as run_ama takes them."""
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "ran"},
    ]
    script = write_script(ama.tmp / "script.json", replies)
    options = ClientOptions(fs=False, terminal=False)
    env = {"AMA_SCRIPT": str(script), **(env or {})}
    async with run_ama(ama, "--model", "scripted/t", env=env, options=options, process=process) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": mode})
        result = await conn.prompt(sid, "go", timeout=30)
        assert result["stopReason"] == "end_turn"
        finals = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
        assert len(finals) == 1
        titles = [str(as_object(params)["toolCall"]["title"]) for params, _ in conn.permission_log]
        said = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
        return str(finals[0]["content"][-1]["content"]["text"]), titles, said


WRITES = "echo in > inside.txt && echo wrote-inside; echo out > {outside} && echo wrote-outside"


@needs_landlock
async def test_a_write_outside_the_workspace_is_blocked_and_one_inside_allowed(tmp_path):
    ama = sandboxed_ama(tmp_path)
    outside = tmp_path / "outside.txt"
    text = await run_command(ama, WRITES.format(outside=outside))
    assert "wrote-inside" in text and (ama.workspace / "inside.txt").read_text() == "in\n"
    assert "wrote-outside" not in text and "Permission denied" in text
    assert not outside.exists()
    assert "[Writes outside the workspace" in text and "are blocked by ama's sandbox" in text  # the model is told why


@needs_landlock
async def test_read_only_mode_blocks_writes_in_the_workspace_too_but_not_tmpdir(tmp_path):
    ama = sandboxed_ama(tmp_path, '[sandbox]\nmode = "read-only"\n')
    text = await run_command(ama, 'echo t > "$TMPDIR/t" && echo wrote-tmp; echo in > inside.txt && echo wrote-in')
    assert "wrote-tmp" in text and "wrote-in" not in text
    assert not (ama.workspace / "inside.txt").exists()


async def test_mode_off_runs_unconfined(tmp_path):
    ama = sandboxed_ama(tmp_path, '[sandbox]\nmode = "off"\n')
    outside = tmp_path / "outside.txt"
    text = await run_command(ama, WRITES.format(outside=outside))
    assert "wrote-inside" in text and "wrote-outside" in text
    assert outside.read_text() == "out\n"
    assert "sandbox" not in text


@needs_landlock
async def test_a_malformed_setting_is_reported_with_its_line_and_the_default_applies(tmp_path):
    ama = sandboxed_ama(tmp_path, '[sandbox]\nmode = "off"\nnetwork = "yes"\n')
    outside = tmp_path / "outside.txt"
    text = await run_command(ama, WRITES.format(outside=outside))
    stderr = ama.stderr.read_text(encoding="utf-8")
    assert "config.toml (at line 2): [sandbox] network must be true or false, not 'yes'" in stderr
    # Not half-applied: mode = "off" went with the bad network value, so the default sandbox confines it.
    assert "wrote-inside" in text and "wrote-outside" not in text and not outside.exists()


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts (the kernel's backlog does) and never answers: its port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"


@needs_net_rules
async def test_a_tcp_connect_is_refused(tmp_path, listener):
    ama = sandboxed_ama(tmp_path)
    text = await run_command(ama, CONNECT.format(port=listener))
    assert "connected" not in text and "Permission denied" in text
    assert "network connections" in text


@needs_landlock
async def test_network_true_allows_the_connect(tmp_path, listener):
    ama = sandboxed_ama(tmp_path, "[sandbox]\nnetwork = true\n")
    text = await run_command(ama, CONNECT.format(port=listener))
    assert "connected" in text


async def test_without_landlock_commands_run_unconfined_and_ama_says_so(tmp_path, monkeypatch, caplog):
    """A kernel without Landlock, as ama sees it (ama runs in this process: tests/support/harness.run_ama)."""
    from ama_acp import sandbox

    if os.environ.get("AMA_TEST_PROCESSES") == "1":
        pytest.skip("ama runs as its own process here: this process cannot play the kernel for it")
    monkeypatch.setattr(sandbox, "kernel_abi", lambda: (0, "the kernel has no Landlock (in this test)"))
    monkeypatch.setattr(sandbox, "_bubblewrap", lambda roots: ("", "no bubblewrap (in this test)"))
    monkeypatch.setattr(sandbox, "_told", set())
    ama = sandboxed_ama(tmp_path)
    outside = tmp_path / "outside.txt"
    text, titles, said = await run_command_in(ama, WRITES.format(outside=outside), "manual")
    assert "wrote-outside" in text and outside.exists() and "sandbox" not in text
    assert len(titles) == 1 and titles[0].endswith("(not sandboxed)")
    why = "the kernel has no Landlock (in this test); no bubblewrap (in this test)"
    assert said.count(f"The commands ama runs are not sandboxed: {why}.") == 1
    assert f"commands are not sandboxed: {why}" in caplog.text


@needs_bwrap
async def test_without_landlock_bubblewrap_blocks_a_write_outside_and_a_tcp_connect(tmp_path, listener):
    ama = sandboxed_ama(tmp_path)
    outside = tmp_path / "outside.txt"
    command = f"{WRITES.format(outside=outside)}; {CONNECT.format(port=listener)}"
    text, titles, said = await run_command_in(ama, command, "manual", NO_LANDLOCK, process=True)
    assert "wrote-inside" in text and (ama.workspace / "inside.txt").read_text() == "in\n"
    assert "wrote-outside" not in text and not outside.exists() and "connected" not in text
    assert "Read-only file system" in text and "Connection refused" in text  # nobody listens on its own loopback
    assert "Writes outside the workspace and network connections (no network but its own loopback) are blocked" in text
    assert titles and not titles[0].endswith("(not sandboxed)") and "not sandboxed" not in said
    assert f"commands are sandboxed: workspace-write, bubblewrap {BWRAP} (no Landlock: " in ama.log_text()


async def test_a_bwrap_that_cannot_start_leaves_commands_unconfined_and_ama_says_why(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    ama = sandboxed_ama(tmp_path)
    outside = tmp_path / "outside.txt"
    env = {**NO_LANDLOCK, "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    text, titles, said = await run_command_in(ama, WRITES.format(outside=outside), "manual", env, process=True)
    assert "wrote-outside" in text and outside.exists()
    assert titles and titles[0].endswith("(not sandboxed)")
    why = f"bubblewrap ({fake / 'bwrap'}) cannot start here (bwrap: No permissions to create new namespace)"
    assert f"The commands ama runs are not sandboxed: Landlock is hidden from ama ({HIDE_LANDLOCK_VAR}" in said
    assert why in said


@needs_landlock
async def test_commands_after_the_first_run_in_launchers_kept_ready_and_none_outlives_ama(tmp_path):
    """Three commands in one turn of a real `ama` process: the later ones are taken by the launcher kept ready
    (same confinement), and when ama exits its last launcher goes with it."""
    ama = sandboxed_ama(tmp_path)
    outside = tmp_path / "outside.txt"
    calls = [
        {"id": f"c{i}", "name": "run_command", "arguments": {"command": f"echo $$; {WRITES.format(outside=outside)}"}}
        for i in range(3)
    ]
    script = write_script(ama.tmp / "script.json", [{"tool_calls": [c]} for c in calls] + [{"text": "ran"}])
    options = ClientOptions(fs=False, terminal=False)
    async with run_ama(
        ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, options=options, process=True
    ) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": "full_access"})
        assert (await conn.prompt(sid, "go", timeout=60))["stopReason"] == "end_turn"
        finals = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
        texts = [str(f["content"][-1]["content"]["text"]) for f in finals]
        assert len(texts) == 3 and all("wrote-inside" in t and "wrote-outside" not in t for t in texts)
        assert not outside.exists()
        ama_pid = conn.pid
        assert ama_pid is not None
        standby = poll_until(lambda: launchers_of(ama_pid), 10, "the launcher kept ready")
    poll_until(lambda: all(gone(pid) for pid in standby), 10, "ama's launcher to exit with it")


def launchers_of(parent: int) -> list[int]:
    """The warm launchers (sandbox/warm.py) that are children of `parent`."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        fields = stat_fields(pid)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes() if fields else b""
        if fields and int(fields[1]) == parent and b"landlock.serve(" in cmdline:
            found.append(int(pid))
    return found


def gone(pid: int) -> bool:
    return stat_fields(str(pid))[:1] in ([], [b"Z"])


@needs_landlock
@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
async def test_a_session_whose_folders_hold_ama_itself_is_told_so(tmp_path, mode):
    """ama run on its own checkout (or from a venv inside the project): a command the sandbox lets write there
    could change the code ama imports later. The person is told once, as the session opens; read-only: nothing
    to tell."""
    ama = sandboxed_ama(tmp_path, f'[sandbox]\nmode = "{mode}"\n')
    async with run_ama(ama, options=ClientOptions(fs=False, terminal=False), process=True) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": OWN_FOLDER, "mcpServers": []}))
        await conn.prompt(sid, "hello", timeout=30)  # a whole turn: what was to be told has been told by its end
        said = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
    told = "are inside this session's folders, where the sandbox lets commands write: a command could change ama"
    assert said.count(told) == (1 if mode == "workspace-write" else 0), said


def test_ama_s_own_files_are_found_only_beneath_a_folder_the_sandbox_opens(tmp_path: Path) -> None:
    from ama_acp.sandbox import own_files_exposed

    (tmp_path / "proj" / ".venv").mkdir(parents=True)
    (tmp_path / "projects").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "proj")
    venv = str(tmp_path / "proj" / ".venv")
    assert own_files_exposed([str(tmp_path / "proj")], [venv]) == venv
    assert own_files_exposed([str(tmp_path / "link")], [venv]) == venv  # a root reached through a link
    assert own_files_exposed([str(tmp_path / "proj" / ".venv")], [venv]) == venv  # the folder itself
    assert own_files_exposed([str(tmp_path / "pro")], [venv]) is None  # a name's prefix is not a parent
    assert own_files_exposed([str(tmp_path / "projects")], [venv]) is None
    assert own_files_exposed([], [venv]) is None
