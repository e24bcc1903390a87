"""The sandbox of `run_command` (issue 38), through the real pipes: `ama --mode acp`, ama's own client (no fs or
terminal capability, so ama runs the commands itself) and the scripted model calling run_command.

Skipped where the kernel has no Landlock: there is nothing to confine with.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.client.demo import DEMO_MODEL
from ama_acp.sandbox import kernel_abi
from ama_acp.sandbox.landlock import NET_ABI
from tests.support.harness import Ama, run_ama, write_script
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

ABI, WHY = kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")
needs_net_rules = pytest.mark.skipif(ABI < NET_ABI, reason=f"Landlock ABI {ABI} has no TCP rules (needs {NET_ABI})")


def sandboxed_ama(tmp: Path, sandbox: str = "") -> Ama:
    (tmp / "config.toml").write_text(f'model = "{DEMO_MODEL}"\n{sandbox}', encoding="utf-8")
    return Ama(tmp)


async def run_command(ama: Ama, command: str, mode: str = "full_access") -> str:
    """The text of run_command's final update after the scripted model ran `command` (in `mode`)."""
    return (await run_command_in(ama, command, mode))[0]


async def run_command_in(ama: Ama, command: str, mode: str) -> tuple[str, list[str], str]:
    """The final update's text, the permission questions' titles and the agent's messages."""
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": command}}]},
        {"text": "ran"},
    ]
    script = write_script(ama.tmp / "script.json", replies)
    options = ClientOptions(fs=False, terminal=False)
    async with run_ama(ama, "--model", "scripted/t", env={"AMA_SCRIPT": str(script)}, options=options) as conn:
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
    monkeypatch.setattr(sandbox, "_told_unavailable", False)
    ama = sandboxed_ama(tmp_path)
    outside = tmp_path / "outside.txt"
    text, titles, said = await run_command_in(ama, WRITES.format(outside=outside), "manual")
    assert "wrote-outside" in text and outside.exists() and "sandbox" not in text
    assert len(titles) == 1 and titles[0].endswith("(not sandboxed)")
    assert said.count("The commands ama runs are not sandboxed: the kernel has no Landlock (in this test).") == 1
    assert "commands are not sandboxed: the kernel has no Landlock" in caplog.text
