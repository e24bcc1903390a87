"""`AgentProcess`: an ACP client connection to an agent running as a subprocess.

It spawns the agent, frames its stdout into lines itself (a 10 MiB line is one message; a line longer than
`ClientOptions.max_line` is a violation that ends the connection), correlates responses with our requests by id, hands session/update notifications to the
caller, and answers the agent's requests (permission, fs/*, terminal/*) with pluggable handlers. Anything
the agent does that a strict editor would reject is recorded in `violations` instead of raising, so a
test can assert on it while the conversation carries on.

What it keeps is bounded, whatever the agent sends: no line longer than the cap, the first `NOISE_KEPT` lines
that carry nothing (not JSON, blank) in the transcript and the rest only counted (`dropped_lines`), the first
`VIOLATIONS_KEPT` violations of each kind and then one that counts the others, and 2,000 characters of a
violation's line.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import anyio
import anyio.abc
import msgspec

from ama_acp import __version__
from ama_acp.client import handlers
from ama_acp.client.confine import Decide
from ama_acp.client.handlers import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    PermissionPolicy,
    RpcError,
    TerminalManager,
)
from ama_acp.errors import ProtocolError

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

# Pass as `stderr=` to keep the agent's stderr in memory (`stderr_tail`) instead of inheriting it.
CAPTURE = "capture"
_STDERR_TAIL = 64 * 1024
# The longest line the client takes from an agent. Lower than ama's own server cap (rpc/framing.py, 256 MiB): the
# client keeps what it reads in its transcript, and no ACP message a client has to take is near this size.
MAX_LINE = 64 * 1024 * 1024
NOISE_KEPT = 1000  # lines that carry nothing (not JSON, blank) kept in the transcript; the rest are counted
VIOLATIONS_KEPT = 100  # violations of one kind kept; the rest are counted in one more
_VIOLATION_RAW = 2000
_FS_METHODS = ("fs/read_text_file", "fs/write_text_file")
_TERMINAL_METHODS = (
    "terminal/create",
    "terminal/output",
    "terminal/wait_for_exit",
    "terminal/kill",
    "terminal/release",
)


class AgentExited(ProtocolError):
    """The agent's stdout ended (it exited or closed it) while we still expected something."""

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class AgentStartError(ProtocolError):
    """The agent command could not be started at all."""


@dataclass
class ClientOptions:
    """What the client advertises in `initialize` and how it answers the agent's requests."""

    fs: bool = True  # fs.readTextFile and fs.writeTextFile
    terminal: bool = True
    permission: PermissionPolicy = "allow_once"
    # Unstable session capabilities (advertised as `{}` when true).
    notices: bool = False
    compaction: bool = False
    boolean_config: bool = False
    client_info: dict[str, Any] = field(
        default_factory=lambda: {"name": "ama-acp-client", "title": "ama ACP client", "version": __version__}
    )
    # Merged last into clientCapabilities, for tests of odd combinations.
    extra_capabilities: dict[str, Any] = field(default_factory=dict)
    # Confinement (ama_acp/client/confine.py). `file_gate`: asked about an fs/* path outside the session's cwd
    # (None: every path is served). `terminal_gate`: asked before every terminal/create (None: every command runs).
    file_gate: Decide | None = None
    terminal_gate: Decide | None = None
    # The longest stdout line taken; a longer one is a `line_too_long` violation and the connection ends.
    max_line: int = MAX_LINE

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {"fs": {"readTextFile": self.fs, "writeTextFile": self.fs}, "terminal": self.terminal}
        session: dict[str, Any] = {}
        if self.notices:
            session["notices"] = {}
        if self.compaction:
            session["compaction"] = {}
        if self.boolean_config:
            session["configOptions"] = {"boolean": {}}
        if session:
            caps["session"] = session
        caps.update(self.extra_capabilities)
        return caps


@dataclass
class TranscriptEntry:
    direction: str  # "in" (agent -> client) or "out" (client -> agent)
    raw: str
    time: float


@dataclass
class Violation:
    """Something the agent did that breaks the protocol (or a test's `on_line` check)."""

    kind: str  # non_json_stdout, not_jsonrpc, invalid_utf8, unterminated_line, unadvertised_method, ...
    detail: str
    raw: str | None = None


class PendingRequest:
    """One of our requests awaiting its response."""

    def __init__(self, request_id: int, method: str) -> None:
        self.id = request_id
        self.method = method
        self._done = anyio.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def _resolve(self, result: Any = None, error: BaseException | None = None) -> None:
        if not self._done.is_set():
            self._result, self._error = result, error
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - a per-call deadline is the API
        """The result; raises RpcError for an error response, TimeoutError, or AgentExited."""
        with anyio.fail_after(timeout):
            await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result


def _id_key(request_id: Any) -> str:
    # JSON ids keep their type (R11): 1 and "1" are different ids.
    return msgspec.json.encode(request_id).decode()


class AgentProcess:
    """`async with AgentProcess(["ama", "--mode", "acp"]) as conn: ...` — see the module docstring."""

    def __init__(
        self,
        command: Sequence[str],
        options: ClientOptions | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        stderr: str | os.PathLike[str] | IO[Any] | int | None = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        on_notification: Callable[[str, dict[str, Any]], None] | None = None,
        on_line: Callable[[str], None] | None = None,
        on_permission: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
        launch: Callable[[], Awaitable[anyio.abc.Process]] | None = None,
    ) -> None:
        self.command = list(command)
        # Starts the agent instead of spawning `command` (the tests run ama's server in their own process this
        # way: the same client, the same byte streams, no interpreter start). None: spawn `command`.
        self._launch = launch
        self.options = options or ClientOptions()
        self._cwd = cwd
        self._env = env
        self._stderr_spec = stderr
        self.on_update = on_update
        self.on_notification = on_notification
        self.on_line = on_line
        self.on_permission = on_permission

        self.transcript: list[TranscriptEntry] = []
        self.violations: list[Violation] = []
        self.updates: list[dict[str, Any]] = []  # session/update params, in order
        self.notifications: list[tuple[str, dict[str, Any]]] = []  # every notification received
        self.requests_received: list[tuple[str, Any]] = []  # (method, params) of the agent's requests
        self.permission_log: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.session_cwds: dict[str, str] = {}
        self.stderr_tail = bytearray()
        self.dropped_lines = 0  # lines that carried nothing, past the NOISE_KEPT kept in the transcript
        self._noise_kept = 0
        self._violation_counts: dict[str, int] = {}
        # How the process ended once `close()` ran: "eof" (it exited on its own after stdin closed, within the
        # grace period), "terminated" / "killed" (it had to be), "exited before close"; None before close().
        self.ended_by: str | None = None

        self._process: anyio.abc.Process | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stderr_file: IO[Any] | None = None
        self._write_lock = anyio.Lock()
        self._next_id = 0
        self._pending: dict[str, PendingRequest] = {}
        self._incoming: dict[str, anyio.CancelScope] = {}
        self._permission_scopes: dict[int, tuple[Any, anyio.CancelScope]] = {}
        self._permission_counter = 0
        self._cancelled_sessions: set[str] = set()
        self._changed = anyio.Event()
        self._eof = anyio.Event()
        self._closed = False
        self.terminals = TerminalManager(self._spawn)
        self.terminals.default_cwd = lambda sid: self.session_cwds.get(sid) if isinstance(sid, str) else None
        self.terminals.roots = self._roots
        self.terminals.gate = self.options.terminal_gate
        gate = handlers.FileGate(self._roots, self.options.file_gate) if self.options.file_gate else None
        self._handlers: dict[str, Handler] = {
            "session/request_permission": self._handle_permission,
            "fs/read_text_file": lambda params: handlers.read_text_file(params, gate),
            "fs/write_text_file": lambda params: handlers.write_text_file(params, gate),
            "terminal/create": self.terminals.create,
            "terminal/output": self.terminals.output,
            "terminal/wait_for_exit": self.terminals.wait_for_exit,
            "terminal/kill": self.terminals.kill,
            "terminal/release": self.terminals.release,
        }
        self._advertised = {"session/request_permission"}
        if self.options.fs:
            self._advertised.update(_FS_METHODS)
        if self.options.terminal:
            self._advertised.update(_TERMINAL_METHODS)

    def _roots(self, session_id: str | None) -> list[str]:
        """The folders a session's files and commands belong to: its cwd (none for a session we never opened)."""
        cwd = self.session_cwds.get(session_id) if session_id is not None else None
        return [cwd] if cwd is not None else []

    # --- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> AgentProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._launch is not None:  # the launcher sees to the agent's stderr itself
            self._process = await self._launch()
            await self._start_readers()
            return
        stderr: Any = self._stderr_spec
        if stderr == CAPTURE:
            stderr = subprocess.PIPE
        elif isinstance(stderr, str | os.PathLike):
            # A local append-open; closed in aclose().
            self._stderr_file = stderr = open(stderr, "ab")  # noqa: ASYNC230
        try:
            # Its own process group: a Ctrl-C in the terminal reaches only us, and we turn it into
            # session/cancel, as an editor would; the agent never sees the signal.
            self._process = await anyio.open_process(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=self._cwd,
                env=self._env,
                start_new_session=os.name == "posix",
            )
        except OSError as exc:
            self._close_stderr_file()
            raise AgentStartError(f"cannot start {self.command[0]!r}: {exc.strerror or exc}") from exc
        await self._start_readers()

    async def _start_readers(self) -> None:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read_loop)
        if self._stderr_spec == CAPTURE:
            self._tg.start_soon(self._stderr_loop)

    async def close(self, timeout: float = 5.0) -> int | None:  # noqa: ASYNC109 - a grace period, not a deadline
        """Close the agent's stdin (the ACP way to end), wait for it to exit, and return its exit code.
        A process still running after `timeout` is terminated, then killed."""
        proc = self._process
        if proc is None:
            return None
        if self._closed:
            return proc.returncode
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.terminals.shutdown()
            # Its stdout already ended: it exited (or hung up) on its own, before anyone closed its stdin.
            gone = proc.returncode is not None or self._eof.is_set()
            self.ended_by = "exited before close" if gone else "eof"
            try:
                if proc.stdin is not None:  # it is a pipe: the agent was started with stdin=PIPE
                    await proc.stdin.aclose()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            with anyio.move_on_after(timeout):
                await proc.wait()
            if proc.returncode is None:
                self.ended_by = "terminated"
                proc.terminate()
                with anyio.move_on_after(2):
                    await proc.wait()
            if proc.returncode is None:
                self.ended_by = "killed"
                proc.kill()
                await proc.wait()
            # Let the reader take in whatever was still in the pipe.
            with anyio.move_on_after(1):
                await self._eof.wait()
        return proc.returncode

    async def aclose(self) -> None:
        """close(), then stop the background tasks and release everything."""
        try:
            await self.close()
        finally:
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
                tg, self._tg = self._tg, None
                await tg.__aexit__(None, None, None)
            if self._process is not None:
                with anyio.CancelScope(shield=True):
                    await self._process.aclose()
            self._close_stderr_file()

    def _close_stderr_file(self) -> None:
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def exited(self) -> bool:
        """The agent's stdout has ended."""
        return self._eof.is_set()

    def _spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        if self._tg is None:
            raise RuntimeError("the connection is not running")
        self._tg.start_soon(fn)

    # --- sending -----------------------------------------------------------------------------------

    async def send_raw(self, line: str) -> None:
        """Write one line as is (tests of malformed input); a missing final newline is added."""
        if not line.endswith("\n"):
            line += "\n"
        await self._write(line)

    async def _write(self, line: str) -> None:
        if self._process is None or self._process.stdin is None:
            raise RuntimeError("the connection is not running")
        self.transcript.append(TranscriptEntry("out", line.rstrip("\n"), time.monotonic()))
        async with self._write_lock:
            try:
                await self._process.stdin.send(line.encode("utf-8"))
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise AgentExited("the agent's stdin is closed", self.returncode) from exc

    async def _send(self, message: dict[str, Any]) -> None:
        await self._write(msgspec.json.encode(message).decode("utf-8") + "\n")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def start_request(self, method: str, params: dict[str, Any] | None = None) -> PendingRequest:
        """Send a request and return at once; `await pending.wait()` for the result. Its `id` is what a
        `$/cancel_request` names."""
        if self._eof.is_set():
            raise AgentExited(f"the agent has exited; cannot send {method}", self.returncode)
        self._next_id += 1
        pending = PendingRequest(self._next_id, method)
        self._pending[_id_key(pending.id)] = pending
        if method == "session/prompt" and isinstance(params, dict) and isinstance(sid := params.get("sessionId"), str):
            # A new turn: permission requests are answered by the policy again.
            self._cancelled_sessions.discard(sid)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": pending.id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(message)
        except AgentExited:
            self._pending.pop(_id_key(pending.id), None)
            raise
        return pending

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = 60.0) -> Any:  # noqa: ASYNC109
        """Send a request and wait for its result. Raises RpcError, TimeoutError or AgentExited."""
        pending = await self.start_request(method, params)
        try:
            return await pending.wait(timeout)
        finally:
            self._pending.pop(_id_key(pending.id), None)

    # --- conveniences for the usual ACP sequence -------------------------------------------------

    async def initialize(self, protocol_version: int = 1, timeout: float | None = 30.0) -> dict[str, Any]:  # noqa: ASYNC109
        result = await self.request(
            "initialize",
            {
                "protocolVersion": protocol_version,
                "clientCapabilities": self.options.capabilities(),
                "clientInfo": self.options.client_info,
            },
            timeout=timeout,
        )
        return self._object_result("initialize", result)

    async def new_session(
        self,
        cwd: str | os.PathLike[str],
        mcp_servers: list[Any] | None = None,
        timeout: float | None = 60.0,  # noqa: ASYNC109
        **extra: Any,
    ) -> dict[str, Any]:
        cwd = os.path.abspath(cwd)  # noqa: ASYNC240 - string work plus one getcwd
        result = self._object_result(
            "session/new",
            await self.request("session/new", {"cwd": cwd, "mcpServers": mcp_servers or [], **extra}, timeout),
        )
        if isinstance(result.get("sessionId"), str):
            self.session_cwds[result["sessionId"]] = cwd
        return result

    async def prompt(self, session_id: str, text: str, timeout: float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        result = await self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, timeout
        )
        return self._object_result("session/prompt", result)

    def _object_result(self, method: str, result: Any) -> dict[str, Any]:
        """The result of a method whose schema result is an object; anything else is the agent's violation,
        recorded, and the caller sees `{}` (no member it looks for) instead of a value of another type."""
        if isinstance(result, dict):
            return result
        self._violation("result_not_object", f"the result of {method} is not an object: {type(result).__name__}")
        return {}

    async def cancel(self, session_id: str) -> None:
        """session/cancel, then answer this session's pending permission requests with `cancelled`, as
        an editor must (Appendix A)."""
        self._cancelled_sessions.add(session_id)
        await self.notify("session/cancel", {"sessionId": session_id})
        for sid, scope in list(self._permission_scopes.values()):
            if sid == session_id:
                scope.cancel()

    # --- waiting on what arrives ------------------------------------------------------------------

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None = 10.0) -> None:  # noqa: ASYNC109
        """Wait until `predicate()` holds, re-checking after every message received and every 50 ms (so a
        condition on the world outside the connection — a file, a server's log — is seen while the agent
        is silent). Raises TimeoutError, or AgentExited when the agent's output ends first."""
        with anyio.fail_after(timeout):
            while not predicate():
                if self._eof.is_set():
                    raise AgentExited("the agent exited before the condition held", self.returncode)
                with anyio.move_on_after(0.05):
                    await self._changed.wait()

    def updates_for(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The `update` objects received for one session, optionally of one `sessionUpdate` kind."""
        found = []
        for params in self.updates:
            update = params.get("update")
            if params.get("sessionId") == session_id and isinstance(update, dict):
                if kind is None or update.get("sessionUpdate") == kind:
                    found.append(update)
        return found

    def _signal_change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # --- reading -------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        cap = self.options.max_line
        buf = bytearray()
        try:
            while True:
                try:
                    chunk = await stdout.receive(1 << 20)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                # Only the new bytes can hold the next newline; keeps a 10 MiB line linear.
                scan = len(buf)
                buf += chunk
                start = 0
                too_long = False
                while (nl := buf.find(b"\n", scan)) != -1:
                    if nl - start > cap:
                        too_long = True
                        break
                    await self._on_raw_line(bytes(buf[start:nl]))
                    start = scan = nl + 1
                if too_long or len(buf) - start > cap:
                    # Its end cannot be waited for (it may never come) and nothing after it can be trusted to be
                    # framed: the connection ends here. Only the line's head is kept, in the violation.
                    self._violation(
                        "line_too_long",
                        f"a stdout line is longer than {cap} bytes: the connection was ended",
                        _decode(bytes(buf[start : start + _VIOLATION_RAW])),
                    )
                    buf.clear()
                    self._stop_agent()
                    break
                if start:
                    del buf[:start]
            if buf.strip():
                self._violation("unterminated_line", "the last stdout line has no newline", _decode(bytes(buf)))
                await self._on_raw_line(bytes(buf))
        finally:
            await self._on_eof()

    async def _stderr_loop(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        try:
            async for chunk in self._process.stderr:
                self.stderr_tail += chunk
                if len(self.stderr_tail) > _STDERR_TAIL:
                    del self.stderr_tail[: len(self.stderr_tail) - _STDERR_TAIL]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def _on_eof(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._process is not None and self._process.returncode is None:
                # Usually the process is exiting; its code makes the error message useful.
                with anyio.move_on_after(2):
                    await self._process.wait()
        self._eof.set()
        rc = self.returncode
        for pending in self._pending.values():
            detail = f" (exit code {rc})" if rc is not None else ""
            pending._resolve(error=AgentExited(f"the agent exited before answering {pending.method}{detail}", rc))
        self._signal_change()

    def _stop_agent(self) -> None:
        """End the agent after a line the client cannot frame: it is killed, its stdin closed by close()."""
        proc = self._process
        if proc is not None and proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass

    def _keep_noise(self) -> bool:
        """Whether one more line that carries nothing is kept in the transcript (the first NOISE_KEPT are)."""
        if self._noise_kept < NOISE_KEPT:
            self._noise_kept += 1
            return True
        self.dropped_lines += 1
        return False

    def _keep(self, raw: str) -> None:
        self.transcript.append(TranscriptEntry("in", raw, time.monotonic()))

    async def _on_raw_line(self, raw_bytes: bytes) -> None:
        if raw_bytes.endswith(b"\r"):
            raw_bytes = raw_bytes[:-1]
        try:
            raw = raw_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raw = _decode(raw_bytes)
            self._violation("invalid_utf8", "a stdout line is not valid UTF-8", raw)
        if not raw.strip():
            if self._keep_noise():
                self._keep(raw)
            return  # blank lines carry nothing (R9: tolerated, not required)
        try:
            message = msgspec.json.decode(raw_bytes)
        except (msgspec.DecodeError, RecursionError) as exc:
            # msgspec raises RecursionError for nesting deeper than it walks: that line is not JSON a client can
            # read, the same decode error as any other.
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            if self._keep_noise():
                self._keep(raw)
            self._on_line_check(raw)
            self._violation("non_json_stdout", f"stdout line is not JSON: {why}", raw)
            self._signal_change()
            return
        self._keep(raw)
        self._on_line_check(raw)
        try:
            self._dispatch(message, raw)
        finally:
            self._signal_change()

    def _on_line_check(self, raw: str) -> None:
        if self.on_line is not None:
            try:
                self.on_line(raw)
            except Exception as exc:  # a test's validator said no: record it, keep the conversation going
                self._violation("on_line", f"{type(exc).__name__}: {exc}", raw)

    def record_violation(self, kind: str, detail: str, raw: str | None = None) -> None:
        """Record something the agent did that the client's own policy refused (kept with the same bounds)."""
        self._violation(kind, detail, raw)

    def _violation(self, kind: str, detail: str, raw: str | None = None) -> None:
        count = self._violation_counts[kind] = self._violation_counts.get(kind, 0) + 1
        if count > VIOLATIONS_KEPT:
            # One more violation stands for all the others of its kind, its count kept current.
            if count == VIOLATIONS_KEPT + 1:
                self.violations.append(Violation(kind, ""))
            summary = next(v for v in reversed(self.violations) if v.kind == kind)
            summary.detail = f"{count - VIOLATIONS_KEPT} more like the above (not kept)"
            return
        if raw is not None and len(raw) > _VIOLATION_RAW:
            raw = raw[:_VIOLATION_RAW] + f"… ({len(raw)} chars)"
        self.violations.append(Violation(kind, detail, raw))

    def _dispatch(self, message: Any, raw: str) -> None:
        if not isinstance(message, dict):
            self._violation("not_jsonrpc", "a stdout line is JSON but not a JSON-RPC object", raw)
            return
        if message.get("jsonrpc") != "2.0":
            self._violation("not_jsonrpc", 'missing or wrong "jsonrpc": "2.0"', raw)
        method = message.get("method")
        if "method" in message:
            if not isinstance(method, str):
                self._violation("not_jsonrpc", "`method` is not a string", raw)
                return
            params = message.get("params")
            if "id" in message:
                self.requests_received.append((method, params))
                # The scope is registered now, not when the task starts: a $/cancel_request on the very next
                # line must find it.
                scope = anyio.CancelScope()
                self._incoming[_id_key(message["id"])] = scope
                self._spawn(lambda: self._serve_request(message["id"], method, params, scope))
            else:
                self._on_notification(method, params if isinstance(params, dict) else {})
            return
        if "id" in message and ("result" in message or "error" in message):
            self._on_response(message, raw)
            return
        self._violation("not_jsonrpc", "neither a request, a notification nor a response", raw)

    def _on_response(self, message: dict[str, Any], raw: str) -> None:
        if "result" in message and "error" in message:
            self._violation("not_jsonrpc", "a response carries both result and error", raw)
        key = _id_key(message["id"])
        pending = self._pending.get(key)
        if pending is None:
            # R11: the id must come back with its JSON type; say so, but do not leave our request hanging.
            pending = next((p for p in self._pending.values() if str(p.id) == str(message["id"])), None)
            if pending is None:
                self._violation("unknown_response_id", f"a response for an id we never sent: {message['id']!r}", raw)
                return
            self._violation("response_id_type", f"response id {message['id']!r} differs in type from ours", raw)
        if "error" in message:
            err = message["error"]
            if (
                not isinstance(err, dict)
                or not isinstance(err.get("code"), int)
                or not isinstance(err.get("message"), str)
            ):
                self._violation("not_jsonrpc", "malformed error object", raw)
                err = err if isinstance(err, dict) else {}
            pending._resolve(
                error=RpcError(err.get("code", INTERNAL_ERROR), str(err.get("message", "")), err.get("data"))
            )
        else:
            pending._resolve(result=message.get("result"))

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))
        if method == "session/update":
            self.updates.append(params)
            if self.on_update is not None:
                self.on_update(params)
        elif method == "$/cancel_request":
            scope = self._incoming.get(_id_key(params.get("requestId")))
            if scope is not None:
                scope.cancel()
        if self.on_notification is not None:
            self.on_notification(method, params)

    async def _serve_request(self, request_id: Any, method: str, params: Any, scope: anyio.CancelScope) -> None:
        key = _id_key(request_id)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        handler = self._handlers.get(method)
        if method not in self._advertised or handler is None:
            self._incoming.pop(key, None)
            kind = "unadvertised_method" if method in self._handlers else "unknown_method"
            self._violation(kind, f"the agent called {method}, which this client did not advertise")
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
        else:
            try:
                with scope:
                    try:
                        reply["result"] = await handler(params if isinstance(params, dict) else {})
                    except RpcError as exc:
                        reply["error"] = exc.to_json()
                    except Exception as exc:  # a handler bug must not take the connection down
                        reply["error"] = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
            finally:
                self._incoming.pop(key, None)
            if scope.cancelled_caught:
                # The agent withdrew the request with $/cancel_request: answer -32800 (Appendix A).
                reply.pop("result", None)
                reply["error"] = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
        if self._eof.is_set():
            return
        try:
            await self._send(reply)
        except AgentExited:
            pass

    async def _handle_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        sid = params.get("sessionId")
        outcome: dict[str, Any] = {"outcome": "cancelled"}
        if sid not in self._cancelled_sessions:
            scope = anyio.CancelScope()
            self._permission_counter += 1
            token = self._permission_counter
            self._permission_scopes[token] = (sid, scope)
            try:
                with scope:
                    outcome = await handlers.decide_permission(self.options.permission, params)
            finally:
                self._permission_scopes.pop(token, None)
            if scope.cancelled_caught:
                outcome = {"outcome": "cancelled"}
        self.permission_log.append((params, outcome))
        if self.on_permission is not None:
            self.on_permission(params, outcome)
        return {"outcome": outcome}

    # --- customising ----------------------------------------------------------------------------------

    def set_handler(self, method: str, handler: Handler, advertise: bool = True) -> None:
        """Replace or add the handler for an agent->client request (e.g. a `_`-extension)."""
        self._handlers[method] = handler
        if advertise:
            self._advertised.add(method)
        else:
            self._advertised.discard(method)

    def violations_of(self, kind: str) -> list[Violation]:
        return [v for v in self.violations if v.kind == kind]

    def terminal_output(self, terminal_id: str) -> str | None:
        return self.terminals.output_text(terminal_id)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")
