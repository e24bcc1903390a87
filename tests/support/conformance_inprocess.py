"""The conformance suite run in the test's own process, with ama under test run in-process too.

`python -m ama_conformance … -- python -m ama_acp --mode acp …` costs an interpreter and ama's imports for each of
the ~36 agents a full run starts (~0.7 s of CPU each) plus the suite's own. `run_conformance(argv, env)` runs
the same command line (`ama_conformance.cli.main`, same options, same report text on stdout, same JSON report)
inside the test's process and hands the suite a launcher (`ama_conformance.core.config.Launcher`, the embedding seam)
that starts each agent with `tests.support.inprocess_agent.start_in_process`: ama's real `serve()` as a task of
the suite's event loop, from the same argv.

What differs from the subprocess run, and how it is made the same:
- the environment: the suite reads `os.environ` (`--env-clean` keeps part of it, `--model-env` adds to it); it
  is the test's `env` for the run, and each in-process agent gets the environment the suite gives it
  (inprocess_agent.py replaces `os.environ` while it runs);
- stderr: an in-process ama writes its stderr to a file (one per agent); the launched process offers it as its
  stderr stream once the agent has exited, and its stdout ends only after that stream was read, so the suite's
  R5 and start-up reports see what the command would have written;
- process groups: an in-process agent has no pid; the suite ends no group for it (conformance/core/agent.py);
- two agents alive at once (a group that keeps one while it starts another): only one ama runs in-process at a
  time, so the second is a real `ama --mode acp` process (`SuiteRun.spawned` counts them).

What only a real process shows (stdin EOF as an exit status of a process, stdout free of stray writes, the
interpreter start) stays with the process run of the shipped command in tests/integration/test_conformance.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.abc import ByteReceiveStream, ByteSendStream

from tests.support.inprocess_agent import InProcessAgent, OneAtATime, environment, start_in_process

AMA = [sys.executable, "-m", "ama_acp"]
# The suite's options that point ama at the suite's own scripted model (OpenAI dialect), so its tool, permission,
# fs, terminal and MCP groups really drive tools.
MODEL_ENV = [
    "--model-env",
    "OPENAI_BASE_URL={openai}",
    "--model-env",
    "OPENAI_API_KEY=sk-acp-conformance-0000",
    "--model-env",
    "AMA_MODEL=openai/gpt-4.1",
]


class _StderrAtExit(ByteReceiveStream):
    """The in-process agent's stderr file, read once the agent has exited; `drained` once read to the end."""

    def __init__(self, agent: InProcessAgent, path: Path) -> None:
        self._agent, self._path = agent, path
        self._rest: bytes | None = None
        self.drained = anyio.Event()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._rest is None:
            await self._agent.wait()
            self._rest = self._path.read_bytes() if self._path.exists() else b""
        if not self._rest:
            self.drained.set()
            raise anyio.EndOfStream
        chunk, self._rest = self._rest[:max_bytes], self._rest[max_bytes:]
        return chunk

    async def aclose(self) -> None:
        self.drained.set()


class _StdoutAfterStderr(ByteReceiveStream):
    """The agent's stdout, whose end waits until its stderr has been read (as a dead process's pipes are both
    at their end): the client's close() waits for the stdout's end, so the stderr is whole by then."""

    def __init__(self, stdout: ByteReceiveStream, stderr: _StderrAtExit) -> None:
        self._stdout, self._stderr = stdout, stderr

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._stdout.receive(max_bytes)
        except anyio.EndOfStream:
            with anyio.move_on_after(5):
                await self._stderr.drained.wait()
            raise

    async def aclose(self) -> None:
        await self._stdout.aclose()


class _LaunchedAma(anyio.abc.Process):
    """An InProcessAgent with its stderr as a stream (what conformance's Agent captures)."""

    def __init__(self, agent: InProcessAgent, stderr: Path) -> None:
        self._agent = agent
        self._stderr = _StderrAtExit(agent, stderr)
        self._stdout = _StdoutAfterStderr(agent.stdout, self._stderr)

    async def wait(self) -> int:
        return await self._agent.wait()

    def terminate(self) -> None:
        self._agent.terminate()

    def kill(self) -> None:
        self._agent.kill()

    def send_signal(self, signal: Any) -> None:
        self._agent.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._agent.pid  # raises: no process of its own

    @property
    def returncode(self) -> int | None:
        return self._agent.returncode

    @property
    def stdin(self) -> ByteSendStream:
        return self._agent.stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream:
        return self._stderr

    async def aclose(self) -> None:
        try:
            await self._agent.aclose()
        finally:
            await self._stderr.aclose()


@dataclass
class Launcher:
    """conformance's Launcher for `python -m ama_acp ARGV`: in-process, or a real process while one runs."""

    scratch: Path
    launched: int = 0  # agents run in-process
    spawned: int = 0  # agents started as processes (another agent was alive in-process)
    commands: list[list[str]] = field(default_factory=list)

    async def __call__(self, command: list[str], env: dict[str, str], cwd: Path) -> anyio.abc.Process:
        if command[: len(AMA)] != AMA:
            raise ValueError(f"not an ama command line: {command}")
        self.commands.append(list(command))
        stderr = self.scratch / f"agent-{len(self.commands)}.stderr"
        try:
            agent = await start_in_process(command[len(AMA) :], env, stderr)
        except OneAtATime:
            self.spawned += 1
            return await anyio.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=os.name == "posix",
            )
        self.launched += 1
        return _LaunchedAma(agent, stderr)


@dataclass
class SuiteRun:
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any]  # --report-json's content ({} when none was written)
    launcher: Launcher


def run_conformance(argv: list[str], env: dict[str, str], scratch: Path) -> SuiteRun:
    """`python -m ama_conformance ARGV` run in this process with `env` as its environment, the agent (`python -m
    ama_acp …` after `--`) launched in-process. `--report-json PATH` in `argv` is read back into `report`;
    `scratch` takes the agents' stderr files."""
    scratch.mkdir(parents=True, exist_ok=True)
    launcher = Launcher(scratch)
    out, err = io.StringIO(), io.StringIO()
    from ama_conformance.cli import main

    with environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv), launch=launcher)
    report: dict[str, Any] = {}
    if "--report-json" in argv:
        path = Path(argv[argv.index("--report-json") + 1])
        if path.exists():
            report = json.loads(path.read_text(encoding="utf-8"))
    return SuiteRun(code, out.getvalue(), err.getvalue(), report, launcher)
