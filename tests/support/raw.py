"""A raw line-level driver of `ama --mode acp`, for malformed input that a real client would never send.

By default ama runs inside the test process (tests/support/inprocess_agent.py: the same start-up code as the
command, `serve(..., stop_signals=False)`, in-memory byte pipes), on an event loop of its own in a thread
(a blocking portal), so the test's synchronous reads and waits never stop ama's work. `process=True` starts
the real `ama --mode acp` subprocess, for a test of the process itself (signals, the exit after stdin EOF,
SIGKILL, its pid); `proc` is only there then. AMA_TEST_PROCESSES=1 makes every RawAma a real process.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from contextlib import ExitStack
from typing import Any, Protocol

import anyio
from anyio.from_thread import start_blocking_portal

from ama_conformance.schema.validate import load_validator
from tests.support.harness import Ama, clean_env
from tests.support.inprocess_agent import InProcessAgent, start_in_process


class _Agent(Protocol):
    """What RawAma needs of an ama: a byte stdin, an exit status."""

    def write(self, data: bytes) -> None: ...
    def close_input(self) -> None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float) -> int: ...
    def kill(self) -> None: ...


class _Process:
    """The real `ama --mode acp`, its stdout read line by line on a thread."""

    def __init__(self, ama: Ama, args: tuple[str, ...], env: dict[str, str], lines: queue.Queue[bytes | None]):
        with open(ama.stderr, "ab") as stderr:
            self.proc = subprocess.Popen(
                ama.command(*args),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=ama.workspace,
                env=env,
            )
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()

    def _pump(self, lines: queue.Queue[bytes | None]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            lines.put(line)
        lines.put(None)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close_input(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


_live: set[_InProcess] = set()  # in-process amas not yet waited for (close_leftovers ends them)


class _InProcess:
    """ama's server in this process, on an event loop of its own (a blocking portal's thread)."""

    def __init__(self, ama: Ama, args: tuple[str, ...], env: dict[str, str], lines: queue.Queue[bytes | None]):
        self._stack = ExitStack()
        portal = self._stack.enter_context(start_blocking_portal(name="raw-ama"))
        try:
            self.agent: InProcessAgent = portal.call(start_in_process, ama.argv(*args), env, ama.stderr)
        except BaseException:
            self._stack.close()
            raise
        self._portal = portal
        self._pump_done = portal.start_task_soon(self._pump, lines)
        _live.add(self)

    async def _pump(self, lines: queue.Queue[bytes | None]) -> None:
        """stdout cut into lines as a pipe's reader sees them (each with its newline; a last line without one)."""
        pending: list[bytes] = []
        try:
            while True:
                try:
                    chunk = await self.agent.stdout.receive()
                except anyio.EndOfStream:
                    break
                while (end := chunk.find(b"\n")) >= 0:
                    lines.put(b"".join(pending) + chunk[: end + 1])
                    pending, chunk = [], chunk[end + 1 :]
                if chunk:
                    pending.append(chunk)
        finally:
            if pending:
                lines.put(b"".join(pending))
            lines.put(None)

    def write(self, data: bytes) -> None:
        if self not in _live:
            raise BrokenPipeError("ama has ended")
        try:
            self._portal.call(self.agent.stdin.send, data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise BrokenPipeError("ama no longer reads its input") from exc

    def close_input(self) -> None:
        if self in _live:
            self._portal.call(self.agent.stdin.aclose)

    def poll(self) -> int | None:
        return self.agent.returncode

    def wait(self, timeout: float) -> int:
        if self not in _live:  # waited for already: the portal is gone, the status stays
            assert self.agent.returncode is not None
            return self.agent.returncode

        async def waited() -> int:
            with anyio.fail_after(timeout):
                return await self.agent.wait()

        code = self._portal.call(waited)  # TimeoutError past `timeout`, as Popen.wait's TimeoutExpired
        self._shut_down()
        return code

    def kill(self) -> None:
        if self not in _live:
            return
        self._portal.call(self._kill_and_wait)
        self._shut_down()

    async def _kill_and_wait(self) -> None:
        if self.agent.returncode is None:
            self.agent.kill()  # the server's task cancelled: its pipes close when it has ended
        with anyio.fail_after(10):
            await self.agent.wait()

    def _shut_down(self) -> None:
        """After the agent ended: the pump reads to EOF, then the portal's loop and thread end."""
        if self not in _live:
            return
        _live.discard(self)
        self._pump_done.result(10)
        self._stack.close()


def close_leftovers(keep: set[object]) -> int:
    """End the in-process amas started since `keep` was taken (a test that failed before closing its own):
    the environment and the one in-process slot go back to the next test. Returns how many were ended."""
    left = [agent for agent in _live if agent not in keep]
    for agent in left:
        agent.kill()
    return len(left)


def live_in_process() -> set[object]:
    return set(_live)


class RawAma:
    def __init__(self, ama: Ama, *args: str, env: dict[str, str] | None = None, process: bool = False) -> None:
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.methods: dict[Any, str] = {}  # ids we sent → method, for per-method schema validation
        self.validator = load_validator()
        self.validate = True  # off for junk whose answers no schema method describes
        full_env = clean_env(ama.tmp, env)
        self.in_process = not process and os.environ.get("AMA_TEST_PROCESSES") != "1"
        self._agent: _Agent = (
            _InProcess(ama, args, full_env, self.lines)
            if self.in_process
            else _Process(ama, args, full_env, self.lines)
        )

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        """The real process (pid, signals, its stdin as a file): only with `process=True`."""
        if not isinstance(self._agent, _Process):
            raise RuntimeError("this RawAma runs in-process and has no process: start it with process=True")
        return self._agent.proc

    def send_line(self, data: bytes) -> None:
        self._remember(data)
        self._agent.write(data + b"\n")

    def send(self, msg: Any) -> None:
        """Send any JSON value as one line."""
        self.send_line(json.dumps(msg).encode())

    def _remember(self, data: bytes) -> None:
        """A request-looking line with a string or integer id: its answer is validated against its method."""
        if b'"method"' not in data:
            return
        try:
            msg = json.loads(data)
        except (ValueError, RecursionError):
            return
        if isinstance(msg, dict) and "method" in msg and type(msg.get("id")) in (str, int):
            self.methods[msg["id"]] = msg["method"] if isinstance(msg["method"], str) else repr(msg["method"])

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line is not None, "ama closed stdout"
        text = line.decode("utf-8")
        assert text.endswith("\n")
        if not self.validate:
            message = json.loads(text)
            assert isinstance(message, dict), f"not a JSON-RPC message: {text!r}"
            return message
        return self.validator.validate_line(text.rstrip("\n"), self.methods)

    def response(self, req_id: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The response to `req_id`, skipping notifications (and answering permission requests: allow once)."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.recv(max(0.1, deadline - time.monotonic()))
            if msg.get("method") == "session/request_permission":
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": msg["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
                continue
            if "method" not in msg and msg.get("id") == req_id:
                return msg

    def until(self, req_id: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Every message up to and including the response to `req_id`, as written (no automatic answers)."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            msg = self.recv(max(0.1, deadline - time.monotonic()))
            seen.append(msg)
            if "method" not in msg and msg.get("id") == req_id and type(msg.get("id")) is type(req_id):
                return seen

    def alive(self) -> bool:
        return self._agent.poll() is None

    def returncode(self) -> int | None:
        return self._agent.poll()

    def request(self, req_id: Any, method: str, params: Any) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
        return self.response(req_id)

    def close(self, timeout: float = 5.0) -> int:
        """End ama's input and wait for it to end: its exit status (in-process, the command's: 0 when serve
        returned, 1 when it raised)."""
        try:
            self._agent.close_input()
        except BrokenPipeError:
            pass  # it ended already: its exit status is what is asked
        return self._agent.wait(timeout)

    def kill(self) -> None:
        """SIGKILL (in-process: the server's task cancelled) and wait, unless it already ended."""
        self._agent.kill()
