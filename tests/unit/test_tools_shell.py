import os
import time
from pathlib import Path

import anyio
import pytest

from ama_acp.tools.base import ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.shell import ShellTool
from ama_acp.tools.workspace import LocalWorkspace, command_env


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))


def shell(ctx: ToolContext, **args: object) -> ToolResult:
    return anyio.run(ShellTool().run, args, ctx)


def gone(pid: int) -> bool:
    """Dead, or a zombie nobody reaped yet (the container's init may never reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for_pid_file(path: Path, seconds: float = 5.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.01)
    raise AssertionError("the command never wrote its pid")


def test_exit_code_and_output(ctx):
    ok = shell(ctx, command="echo out; echo err >&2")
    assert "out" in ok.text and "err" in ok.text
    assert "Exit code: 0" in ok.text
    assert not ok.is_error
    bad = shell(ctx, command="echo nope; exit 3")
    assert "Exit code: 3" in bad.text
    assert bad.is_error


def test_runs_in_cwd_with_sane_env(tmp_path, ctx, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("MY_CLIENT_SECRET", "s")
    monkeypatch.setenv("AMA_HARMLESS", "kept")
    result = shell(ctx, command="pwd; env; read x; echo read=$?")
    assert str(tmp_path) in result.text
    assert "sk-secret" not in result.text and "ghp-secret" not in result.text and "MY_CLIENT_SECRET" not in result.text
    assert "AMA_HARMLESS=kept" in result.text
    assert "TERM=dumb" in result.text and "PAGER=cat" in result.text and "GIT_PAGER=cat" in result.text
    assert "read=1" in result.text  # stdin is /dev/null: read hits EOF at once


def test_command_env_drops_secrets():
    env = command_env({"PATH": "/bin", "ANTHROPIC_API_KEY": "x", "aws_secret_access_key": "y", "HOME": "/h"})
    assert env["PATH"] == "/bin" and env["HOME"] == "/h"
    assert not any("API_KEY" in k.upper() or "SECRET" in k.upper() for k in env)


def test_output_cap_keeps_head_and_tail(ctx):
    result = shell(ctx, command="echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END")
    assert "START" in result.text and "END" in result.text
    assert "bytes of output omitted" in result.text
    assert "middle was cut" in result.text
    assert len(result.text) < 32_000


def test_timeout_kills_the_process_group(tmp_path, ctx):
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = shell(ctx, command=f"sleep 300 & echo $! > {pid_file}; wait", timeout=1)
    assert time.monotonic() - started < 5
    assert result.is_error and "Timed out after 1 s" in result.text
    grandchild = int(pid_file.read_text())
    assert gone(grandchild)


def test_background_leftovers_are_killed_after_exit(tmp_path, ctx):
    pid_file = tmp_path / "bg.pid"
    started = time.monotonic()
    result = shell(ctx, command=f"sleep 300 & echo $! > {pid_file}; echo done")
    assert time.monotonic() - started < 5
    assert "done" in result.text and "Exit code: 0" in result.text
    assert gone(int(pid_file.read_text()))


def test_cancellation_kills_the_group_quickly(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    workspace = LocalWorkspace()
    outcome: dict[str, float] = {}  # True/False, or seconds
    grandchildren: list[int] = []

    async def main():
        async with anyio.create_task_group() as tg:

            async def runner():
                await workspace.run_command(f"sleep 300 & echo $! > {pid_file}; wait", str(tmp_path), 60, 30_000)
                outcome["finished"] = True

            tg.start_soon(runner)
            grandchild = await anyio.to_thread.run_sync(wait_for_pid_file, pid_file)
            outcome["alive_before"] = not gone(grandchild)
            t0 = time.monotonic()
            tg.cancel_scope.cancel()
        outcome["elapsed"] = time.monotonic() - t0
        grandchildren.append(grandchild)

    anyio.run(main)
    assert outcome["alive_before"]
    assert "finished" not in outcome
    assert outcome["elapsed"] < 1.0
    assert gone(grandchildren[0])


def test_term_ignoring_process_gets_sigkill(tmp_path):
    pid_file = tmp_path / "stubborn.pid"
    workspace = LocalWorkspace(kill_grace=0.3)
    command = f"sh -c 'trap \"\" TERM; echo $$ > {pid_file}; while :; do sleep 0.05; done' & wait"
    result = anyio.run(workspace.run_command, command, str(tmp_path), 0.5, 30_000)
    assert result.timed_out
    assert gone(int(pid_file.read_text()))


def test_killed_by_signal(ctx):
    result = shell(ctx, command="kill -9 $$")
    assert result.is_error and "SIGKILL" in result.text


def test_no_output_and_title(ctx):
    assert shell(ctx, command="true").text == "(no output)\n\nExit code: 0"
    assert ShellTool().title({"command": "pytest -q"}) == "Run `pytest -q`"
    assert ShellTool().kind == "execute"


def test_pid_helper_sanity():
    assert not gone(os.getpid())


def test_missing_cwd_is_a_tool_error(tmp_path):
    from ama_acp.tools.base import ToolError

    ctx = ToolContext(LocalWorkspace(), str(tmp_path / "gone"), PathPolicy([str(tmp_path)]))
    with pytest.raises(ToolError):
        shell(ctx, command="true")
