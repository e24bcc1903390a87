"""ama's ACP server run inside the test's own process, behind the same client as a real `ama --mode acp`.

A test that drives ama over ACP almost never tests the process: it tests what ama answers. Starting the
interpreter and importing ama costs about 160 ms a run; the same exchange in-process takes a few. So
`run_ama` (tests/support/harness.py) hands `AgentProcess` a launcher that returns an `InProcessAgent`: an
`anyio.abc.Process` whose stdin and stdout are in-memory byte pipes and whose "process" is
`ama_acp.server.serve` running as a task in the test's event loop, started from the same code as the command
(`ama_acp.cli.prepare_acp`: the config read, its key variables registered as secrets, logging set up, the model
chosen, the reload that `authenticate` uses).

What belongs to a process, and how a run here gets its own (`_Borrowed`):
- the environment: the test's `env=` replaces `os.environ` for the run and the test's own comes back after
  (config, credentials, the secret redactor, the scripted model and the commands ama runs all read it);
- module state that lives as long as ama's process (`FRESH`): each run starts as a fresh process would, and the
  test process gets its own values back after, so one test's secrets never reach another's redaction;
- logging: `setup_logging` adds its handlers to the root logger (ama.log under the data dir, and stderr, which
  goes to the file the harness names); they are removed and closed after, and the loggers' levels restored;
- the stop signals: `serve(..., stop_signals=False)`, so the test runner keeps its Ctrl-C;
- the working directory: not changed. The command runs in the workspace, but ama's ACP server never reads its
  own cwd (every path comes from a session's absolute cwd, every program it starts gets one explicitly);
- the preload thread: `serve` joins it before it returns, as in the process.

One in-process server at a time: the environment and the root logger have only one state. A test that needs
two agents at once, a pid, a signal, stdin EOF as an exit status, stdout free of stray prints, resource limits
or anything else of a real process runs it with `run_ama(..., process=True)` (docs/testing.md lists them).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

import anyio
import anyio.abc
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ama_acp.rpc.stdio import EndableReceiveStream

if TYPE_CHECKING:
    from ama_acp.cli import AcpStart

# Module state that a process starts with and keeps while it runs: (module, attribute, its value in a fresh
# process). Each in-process run starts from these values and gives the test process its own back after.
# tests/unit/test_inprocess_agent.py fails when ama gains module state that is in neither table.
FRESH: tuple[tuple[str, str, Callable[[], object]], ...] = (
    # the secret names the config declared and the secret values ama was given (an MCP server's token)
    ("ama_acp.secrets", "_configured", set),
    ("ama_acp.secrets", "_extra_values", set),
    ("ama_acp.secrets", "_generation", lambda: 0),
    # the redactor built from the environment of the process
    ("ama_acp.redact", "_default", lambda: None),
    ("ama_acp.redact", "_default_generation", lambda: -1),
    # warnings said once per process (tests read them in ama.log)
    ("ama_acp.context.estimate", "_warned", lambda: False),
    ("ama_acp.tools.programs", "_told", set),
    ("ama_acp.sandbox", "_told", set),
    # the first sandboxed command of a process sweeps the private temp folders dead processes left
    ("ama_acp.sandbox.temp", "_swept", lambda: False),
    ("ama_acp.session.rules.sources", "_REPORTED", set),
    ("ama_acp.shaping.hooks", "_REPORTED", set),  # a bad [[hooks]] entry said once per process
    ("ama_acp.shaping.hooks", "_last", lambda: None),  # the config of a process and its hooks, decoded once
    ("ama_acp.shaping.command_files", "_PARSED", dict),  # command files parsed, by path and stat
)
# Caches emptied for each run: their answers are logged once when computed (programs: refused PATH entries).
CLEARED: tuple[tuple[str, str], ...] = (("ama_acp.tools.programs", "_lookup"),)
# Module state kept across runs on purpose: pure caches whose values do not depend on the environment of a
# run and that log nothing (the TLS context, tiktoken encodings, estimators, compiled globs, exact caps).
KEPT: tuple[tuple[str, str], ...] = (
    ("ama_acp.providers.tls", "ssl_context"),
    ("ama_acp.context.estimate", "_ENCODINGS"),
    ("ama_acp.session.accounting.session_context", "shared_estimator"),
    ("ama_acp.tools.search.globs", "glob_regex"),
    ("ama_acp.context.tiers", "_exact_caps"),
    # what the kernel offers for the sandbox (Landlock's ABI) and the libc symbols the launcher calls
    ("ama_acp.sandbox", "kernel_abi"),
    ("ama_acp.sandbox.landlock", "_functions"),
    # which bwrap a PATH and roots lead to, and whether that one can start here (the trial run)
    ("ama_acp.sandbox.bwrap", "_find"),
    ("ama_acp.sandbox.bwrap", "trial"),
)


class OneAtATime(RuntimeError):
    """A second in-process ama while one runs: the environment and the logging of a process exist once."""


_running: InProcessAgent | None = None


class _Borrowed:
    """What one run borrows from the test process (its environment, ama's module state, the loggers' levels)
    and gives back."""

    def __init__(self, env: Mapping[str, str]) -> None:
        # What can fail (a module or a name renamed) is looked up before anything is changed.
        modules = [(importlib.import_module(name), attr, fresh) for name, attr, fresh in FRESH]
        self._state = [(module, attr, getattr(module, attr)) for module, attr, _ in modules]
        self._caches = [getattr(importlib.import_module(name), attr) for name, attr in CLEARED]
        self._env = dict(os.environ)
        _replace_environ(env)
        for module, attr, fresh in modules:
            setattr(module, attr, fresh())
        for cache in self._caches:
            cache.cache_clear()
        root = logging.getLogger()
        self._root_level = root.level
        self._levels = {
            name: logger.level for name, logger in root.manager.loggerDict.items() if isinstance(logger, logging.Logger)
        }
        self.handlers: list[logging.Handler] = []  # what setup_logging added: removed and closed on give_back

    def give_back(self) -> None:
        root = logging.getLogger()
        for handler in self.handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(self._root_level)
        for name, logger in root.manager.loggerDict.items():
            if isinstance(logger, logging.Logger) and logger.level != (level := self._levels.get(name, logging.NOTSET)):
                logger.setLevel(level)
        for module, attr, value in self._state:
            setattr(module, attr, value)
        for cache in self._caches:
            cache.cache_clear()
        _replace_environ(self._env)


def _replace_environ(env: Mapping[str, str]) -> None:
    for name in [n for n in os.environ if n not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` is `env` while open (as for a process started with `env=`); the test's own comes back after."""
    saved = dict(os.environ)
    _replace_environ(env)
    try:
        yield
    finally:
        _replace_environ(saved)


class _PipeWriter(ByteSendStream):
    """The writing end of an in-memory pipe. A closed reader makes `send` fail as a closed pipe does."""

    def __init__(self, chunks: MemoryObjectSendStream[bytes]) -> None:
        self._chunks = chunks

    async def send(self, item: bytes) -> None:
        if item:
            await self._chunks.send(bytes(item))

    def close(self) -> None:
        self._chunks.close()

    async def aclose(self) -> None:
        self._chunks.close()


class _PipeReader(ByteReceiveStream):
    """The reading end: at most `max_bytes` a read, as from a pipe; EndOfStream once the writer closed."""

    def __init__(self, chunks: MemoryObjectReceiveStream[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._rest:
            try:
                self._rest = await self._chunks.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                raise anyio.EndOfStream from None
        chunk, self._rest = self._rest[:max_bytes], self._rest[max_bytes:]
        return chunk

    def close(self) -> None:
        self._chunks.close()

    async def aclose(self) -> None:
        self._chunks.close()


def _pipe() -> tuple[_PipeWriter, _PipeReader]:
    # A bounded buffer, as a pipe has: a writer far ahead of its reader waits.
    send, receive = anyio.create_memory_object_stream[bytes](64)
    return _PipeWriter(send), _PipeReader(receive)


class InProcessAgent(anyio.abc.Process):
    """`ama --mode acp ARGV` as a task of the test's event loop. Exit status as the command's: 0 after the end of
    input (or `terminate()`, which ends the input as SIGTERM does), 2 for a bad config (its message on stderr), 1
    with the traceback on stderr when the server raised, -SIGKILL after `kill()` (the task cancelled: unlike a
    real SIGKILL, the server's clean-up still runs)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], stderr: Path) -> None:
        self._argv = list(argv)
        self._env = dict(env)
        self._stderr_path = stderr
        self._stdin, self._agent_in = _pipe()
        self._agent_out, self._stdout = _pipe()
        self._input = EndableReceiveStream(self._agent_in)
        self._returncode: int | None = None
        self._done = anyio.Event()
        self._scope = anyio.CancelScope()
        self._task: asyncio.Task[None] | None = None
        self._stderr_file: IO[str] | None = None
        self._borrowed: _Borrowed | None = None

    async def start(self) -> None:
        global _running
        if _running is not None:
            raise OneAtATime(
                "an in-process ama is already running in this test process: run the second one with "
                "run_ama(..., process=True)"
            )
        stderr = open(self._stderr_path, "a", encoding="utf-8", errors="backslashreplace")  # noqa: ASYNC230
        try:
            self._borrowed = _Borrowed(self._env)
        except BaseException:
            stderr.close()
            raise
        self._stderr_file, _running = stderr, self
        root = logging.getLogger()
        before = list(root.handlers)
        try:
            # Synchronous: nothing else runs while stderr is redirected (setup_logging's stderr handler keeps
            # the file; a bad config's message is written to it).
            with contextlib.redirect_stderr(self._stderr_file):
                from ama_acp.cli import main_parser, prepare_acp

                args = main_parser().parse_args(self._argv)
                if args.mode != "acp" or args.prompt is not None:
                    raise ValueError(f"not an `ama --mode acp` command line: {self._argv}")
                acp = prepare_acp(args)
        except SystemExit as exc:  # a bad config or bad options: exit status 2, the message already on stderr
            self._borrowed.handlers = [h for h in root.handlers if h not in before]
            self._finish(exc.code if isinstance(exc.code, int) else 1)
            return
        except BaseException:
            self._borrowed.handlers = [h for h in root.handlers if h not in before]
            self._finish(1)
            raise
        self._borrowed.handlers = [h for h in root.handlers if h not in before]
        # A task of the event loop's own, not of a task group: AgentProcess closes its process inside a shielded
        # cancel scope, where a group entered here could not be left. (The tests run on asyncio: conftest.py.)
        self._task = asyncio.get_running_loop().create_task(self._serve(acp), name=f"ama {self._argv}")

    async def _serve(self, acp: AcpStart) -> None:
        from ama_acp.server import serve

        code = -signal.SIGKILL  # unless serve returns or raises: cancelled, as by kill()
        try:
            with self._scope:
                await serve(
                    acp.config, acp.model_id, self._input, self._agent_out, acp.reload, acp.why, stop_signals=False
                )
                code = 0
        except Exception:  # what the interpreter does with an exception nobody caught: exit status 1
            code = 1
            if self._stderr_file is not None:
                traceback.print_exc(file=self._stderr_file)
        finally:
            self._finish(code)

    def _finish(self, code: int) -> None:
        global _running
        if self._returncode is not None:
            return
        self._returncode = code
        self._agent_out.close()  # the client reads to the end, then EOF: the process has exited
        self._agent_in.close()
        if self._borrowed is not None:
            self._borrowed.give_back()
            self._borrowed = None
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None
        if _running is self:
            _running = None
        self._done.set()

    # --- anyio.abc.Process

    async def wait(self) -> int:
        await self._done.wait()
        assert self._returncode is not None
        return self._returncode

    def terminate(self) -> None:
        """SIGTERM: ama ends its input and exits as at EOF (server.STOP_SIGNALS)."""
        self._input.end()

    def kill(self) -> None:
        self._scope.cancel()

    def send_signal(self, sig: signal.Signals) -> None:
        if sig == signal.SIGKILL:
            self.kill()
        elif sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            self.terminate()
        else:
            raise NotImplementedError(f"an in-process ama cannot take {sig!r}: run it with process=True")

    @property
    def pid(self) -> int:
        raise RuntimeError("an in-process ama has no process id of its own: run it with run_ama(..., process=True)")

    @property
    def returncode(self) -> int | None:
        return self._returncode

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None  # ama's stderr goes to the file the harness names

    async def aclose(self) -> None:
        """As anyio's Process.aclose: stdin and stdout closed, the agent waited for (killed if this wait is
        cancelled)."""
        self._stdin.close()
        self._stdout.close()
        try:
            await self.wait()
        except BaseException:
            with anyio.CancelScope(shield=True):
                self.kill()
                await self.wait()
            raise


async def start_in_process(argv: Sequence[str], env: Mapping[str, str], stderr: Path) -> InProcessAgent:
    """A launcher for `AgentProcess(launch=...)`: `ama ARGV` (options of `ama --mode acp`) started in-process."""
    agent = InProcessAgent(argv, env, stderr)
    await agent.start()
    return agent
