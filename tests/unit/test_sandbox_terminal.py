"""A command another program starts confined (ama_acp/sandbox/terminal.py): the program found as a shell finds it,
the launcher's command line with the real command last, the variables the requester may and may not set; and a
client that can have no sandbox says "not sandboxed" in its question. Through the real pipes:
tests/integration/test_sandbox_terminals_e2e.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp import sandbox as sandbox_module
from ama_acp.client.confine import Access, unsandboxed
from ama_acp.client.handlers import TerminalManager
from ama_acp.client.terminal.access_prompt import question
from ama_acp.config import SandboxConfig
from ama_acp.sandbox import OFF, WORKSPACE_WRITE, Sandbox, SandboxState, landlock
from ama_acp.sandbox.temp import remove_temp
from ama_acp.sandbox.terminal import confine, program_argv

ABI, WHY = sandbox_module.kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")


def box(roots: list[str], abi: int = 4) -> Sandbox:
    return Sandbox(SandboxState(WORKSPACE_WRITE, False, abi, "" if abi else "no Landlock"), roots)


def test_the_program_is_found_as_a_shell_finds_it(tmp_path: Path) -> None:
    touch = shutil.which("touch")
    assert touch is not None
    assert program_argv("touch", ["a b"], None, "/w") == [touch, "a b"]
    assert program_argv("./run.sh", ["x"], None, "/w") == ["/w/./run.sh", "x"]
    assert program_argv("/bin/echo", [], None, "/w") == ["/bin/echo"]
    # A command line given whole, and a program found nowhere: through the shell, which says so (exit 127).
    assert program_argv("ls -la | wc -l", [], None, "/w") == ["/bin/sh", "-c", "ls -la | wc -l"]
    assert program_argv("no-such-program", ["a b"], str(tmp_path), "/w") == ["/bin/sh", "-c", "no-such-program 'a b'"]
    assert program_argv("touch", [], "", "/w")[:2] == ["/bin/sh", "-c"]  # an empty PATH finds nothing


def test_unconfined_without_an_active_sandbox() -> None:
    assert confine(None, ["/bin/true"], {}) is None
    assert confine(box(["/w"], abi=0), ["/bin/true"], {}) is None
    off = Sandbox(SandboxState(OFF, False, 7, ""), ["/w"])
    assert confine(off, ["/bin/true"], {}) is None


def test_the_launcher_reads_with_the_command_last_and_the_requester_sets_neither_spec_nor_tmpdir() -> None:
    given_env = {"AMA_SANDBOX": "0:1:/", "TMPDIR": "/", "LD_PRELOAD": "/evil.so", "FOO": "bar"}
    confined = confine(box(["/w"]), ["/bin/sh", "-c", "make"], given_env)
    assert confined is not None
    try:
        assert confined.argv[:4] == [sys.executable, "-I", "-S", confined.argv[3]]
        assert confined.argv[3].endswith("landlock.py") and not set(" ;'\"()[]").intersection(confined.argv[3])
        # The loader's variable reaches the command through `env`, after the launcher confined itself.
        assert os.path.basename(confined.argv[4]) == "env" and confined.argv[5:] == [
            "LD_PRELOAD=/evil.so",
            "/bin/sh",
            "-c",
            "make",
        ]
        assert confined.env["TMPDIR"] == confined.tmp and os.path.isdir(confined.tmp)
        assert confined.env["FOO"] == "bar" and "LD_PRELOAD" not in confined.env
        net, dirs, files, argv = landlock.decode_spec(confined.env["AMA_SANDBOX"] + "1:x")
        assert (net, dirs[0], dirs[-1], argv) == (False, confined.tmp, "/w", ["x"])
    finally:
        remove_temp(confined.tmp)
    assert not os.path.exists(confined.tmp)


@needs_landlock
@given(st.lists(st.text(st.characters(codec="utf-8", blacklist_characters="\0"), max_size=8), max_size=4))
def test_the_command_after_the_launcher_runs_as_given(args: list[str]) -> None:
    """Whatever the arguments (spaces, quotes, `1:x`, unicode), the command the launcher execs gets them as they
    were: the tail of its command line is the command, unparsed."""
    printer = [sys.executable, "-I", "-S", "-c", "import sys; print(repr(sys.argv[1:]))", *args]
    confined = confine(box([]), printer, {})
    assert confined is not None
    try:
        done = subprocess.run(confined.argv, env={**os.environ, **confined.env}, capture_output=True, timeout=30)
    finally:
        remove_temp(confined.tmp)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == repr(args)


def test_a_client_without_a_sandbox_to_give_says_not_sandboxed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox_module, "kernel_abi", lambda: (0, "the kernel has no Landlock (in this test)"))
    monkeypatch.setattr(sandbox_module, "_bubblewrap", lambda roots: ("", ""))  # nor bubblewrap
    assert unsandboxed(None) == ""  # a client that confines nothing (no [sandbox]) has nothing to say
    assert unsandboxed(SandboxConfig(OFF)) == '[sandbox] mode = "off"'
    assert unsandboxed(SandboxConfig()) == "the kernel has no Landlock (in this test)"
    asked: list[Access] = []

    async def gate(access: Access) -> bool:
        asked.append(access)
        return True

    async def create() -> None:
        async with anyio.create_task_group() as tg:

            def spawn(job: Callable[[], Coroutine[object, object, None]]) -> None:
                tg.start_soon(job)

            manager = TerminalManager(spawn)
            manager.gate, manager.sandbox = gate, SandboxConfig()
            made = await manager.create({"command": "touch", "args": [str(tmp_path / "ran")], "cwd": str(tmp_path)})
            await manager.wait_for_exit(made)
            await manager.release(made)

    anyio.run(create)
    [access] = asked
    assert access.unsandboxed == "the kernel has no Landlock (in this test)"
    assert question(access).count("\n") == 2
    assert f"in {tmp_path} (not sandboxed: the kernel has no Landlock (in this test))\n" in question(access)
    assert (tmp_path / "ran").exists()  # it ran, unconfined, as the question said
    assert "not sandboxed" not in question(Access("terminal/create", "s", "/w", inside=True, command="make"))


def test_the_question_says_what_the_command_runs_in_when_the_only_bwrap_is_in_the_session_s_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No Landlock, and the only bubblewrap lies inside a session's folder (never taken: the workspace could have
    put it there). The sandbox is worked out once, with the roots: the question says "not sandboxed", as it runs."""
    monkeypatch.setattr(sandbox_module, "kernel_abi", lambda: (0, "no Landlock (in this test)"))
    monkeypatch.setattr(
        sandbox_module,
        "_bubblewrap",
        lambda roots: ("", "its bwrap is inside the workspace") if roots else ("/usr/bin/bwrap", ""),
    )
    asked: list[Access] = []

    async def gate(access: Access) -> bool:
        asked.append(access)
        return True

    async def create() -> None:
        async with anyio.create_task_group() as tg:

            def spawn(job: Callable[[], Coroutine[object, object, None]]) -> None:
                tg.start_soon(job)

            manager = TerminalManager(spawn)
            manager.gate, manager.sandbox = gate, SandboxConfig()
            manager.roots = lambda _sid: (str(tmp_path),)
            made = await manager.create({"command": "touch", "args": [str(tmp_path / "ran")], "cwd": str(tmp_path)})
            await manager.wait_for_exit(made)
            await manager.release(made)

    anyio.run(create)
    [access] = asked
    assert access.unsandboxed == "no Landlock (in this test); its bwrap is inside the workspace"
    assert (tmp_path / "ran").exists()  # it ran, unconfined, as the question said
