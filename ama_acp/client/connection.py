"""`AgentProcess`: an ACP client connection to an agent running as a subprocess.

It spawns the agent (or takes one a launcher started), reads its stdout as a strict editor would
(`reader.py`: lines through rpc/framing's `LineSplitter`, a 10 MiB line is one message, a line longer than
`ClientOptions.max_line` is a violation that ends the connection), judges each message itself
(`classify.py`), matches responses to our requests (rpc/pending's `PendingRequests`, as ama's server does),
hands session/update notifications to the caller, and answers the agent's requests (permission, fs/*,
terminal/*: `serving.py`, `handlers.py`). Anything the agent does that a strict editor would reject is
recorded in `violations` (`violations.py`, bounded) instead of raising, so a test can assert on it while the
conversation carries on.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import IO, Any

import anyio
import anyio.abc
import msgspec

from ama_acp.client import handlers
from ama_acp.client.classify import AgentNotification, AgentRequest, AgentResponse, classify, well_formed_error
from ama_acp.client.errors import AgentExited, AgentStartError, RpcError
from ama_acp.client.handlers import TerminalManager
from ama_acp.client.options import ClientOptions
from ama_acp.client.reader import StdoutReader, TranscriptEntry
from ama_acp.client.serving import Handler, PermissionHook, Serving
from ama_acp.client.violations import Violation, Violations
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.rpc.pending import Pending, PendingRequests

__all__ = [
    "CAPTURE",
    "AgentExited",
    "AgentProcess",
    "AgentStartError",
    "ClientOptions",
    "PendingRequest",
    "TranscriptEntry",
    "Violation",
]

# Pass as `stderr=` to keep the agent's stderr in memory (`stderr_tail`) instead of inheriting it.
CAPTURE = "capture"
_STDERR_TAIL = 64 * 1024


class PendingRequest(Pending):
    """One of our requests awaiting its response; its `id` is what a `$/cancel_request` names."""

    __slots__ = ()

    async def wait(self, timeout: float | None = None) -> JSONValue:  # a per-call deadline is the API
        """The result; raises RpcError for an error response, TimeoutError, or AgentExited."""
        with anyio.fail_after(timeout):
            await self.event.wait()
        if self.error is not None:
            raise self.error
        return self.result


class AgentProcess:
    """`async with AgentProcess(["ama", "--mode", "acp"]) as conn: ...` — see the module docstring."""

    def __init__(
        self,
        command: Sequence[str],
        options: ClientOptions | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        stderr: str | os.PathLike[str] | IO[bytes] | int | None = None,
        on_update: Callable[[JSONObject], None] | None = None,
        on_notification: Callable[[str, JSONObject], None] | None = None,
        on_line: Callable[[str], None] | None = None,
        on_permission: PermissionHook | None = None,
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
        self._violations = Violations()
        self.violations: list[Violation] = self._violations.items
        self.updates: list[JSONObject] = []  # session/update params, in order
        self.notifications: list[tuple[str, JSONObject]] = []  # every notification received
        self.requests_received: list[tuple[str, JSONValue]] = []  # (method, params) of the agent's requests
        self.session_cwds: dict[str, str] = {}
        self.stderr_tail = bytearray()
        # How the process ended once `close()` ran: "eof" (it exited on its own after stdin closed, within the
        # grace period), "terminated" / "killed" (it had to be), "exited before close"; None before close().
        self.ended_by: str | None = None

        self._process: anyio.abc.Process | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stderr_file: IO[bytes] | None = None
        self._write_lock = anyio.Lock()
        self._pending = PendingRequests(PendingRequest)
        self._changed = anyio.Event()
        self._eof = anyio.Event()
        self._closed = False
        self._reader = StdoutReader(
            self.options.max_line,
            self.transcript if self.options.history else None,
            self._violations.record,
            self._on_line_check,
            self._on_message,
            self._signal_change,
        )
        self.terminals = TerminalManager(self._spawn)
        self.terminals.default_cwd = lambda sid: self.session_cwds.get(sid) if sid is not None else None
        self.terminals.roots = self._roots
        self.terminals.gate = self.options.terminal_gate
        self.terminals.sandbox = self.options.sandbox
        self.terminals.sandbox_roots = self.options.sandbox_roots
        gate = handlers.FileGate(self._roots, self.options.file_gate) if self.options.file_gate else None
        self._serving = Serving(
            self.options,
            self.terminals,
            gate,
            send=self._send,
            record=self._violations.record,
            spawn=self._spawn,
            exited=self._eof.is_set,
            permission_hook=lambda: self.on_permission,
        )
        self.permission_log = self._serving.permission_log

    def _roots(self, session_id: str | None) -> list[str]:
        """The folders a session's files and commands belong to: its cwd (none for a session we never opened)."""
        cwd = self.session_cwds.get(session_id) if session_id is not None else None
        return [cwd] if cwd is not None else []

    @property
    def dropped_lines(self) -> int:
        """Lines that carried nothing (not JSON, blank), past the `reader.NOISE_KEPT` kept in the transcript."""
        return self._reader.dropped_lines

    # --- lifecycle ---------------------------------------------------------------------------------

    async def __aenter__(self) -> AgentProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._launch is not None:  # the launcher sees to the agent's stderr itself
            self._process = await self._launch()
            await self._start_readers()
            return
        stderr = self._stderr_spec
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

    async def close(self, timeout: float = 5.0) -> int | None:  # a grace period, not a deadline
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

    def _spawn(self, fn: Callable[[], Coroutine[object, object, None]]) -> None:
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
        if self.options.history:
            self.transcript.append(TranscriptEntry("out", line.rstrip("\n"), time.monotonic()))
        async with self._write_lock:
            try:
                await self._process.stdin.send(line.encode("utf-8"))
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise AgentExited("the agent's stdin is closed", self.returncode) from exc

    async def _send(self, message: Mapping[str, object]) -> None:
        await self._write(msgspec.json.encode(message).decode("utf-8") + "\n")

    async def notify(self, method: str, params: object = None) -> None:
        """`params` is sent as given (None: none), whatever it is: tests send malformed ones on purpose."""
        message: dict[str, object] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def start_request(self, method: str, params: object = None) -> PendingRequest:
        """Send a request and return at once; `await pending.wait()` for the result. Its `id` is what a
        `$/cancel_request` names."""
        if self._eof.is_set():
            raise AgentExited(f"the agent has exited; cannot send {method}", self.returncode)
        pending = self._pending.open(method)
        if method == "session/prompt" and isinstance(params, dict) and isinstance(sid := params.get("sessionId"), str):
            self._serving.new_turn(sid)
        message: dict[str, object] = {"jsonrpc": "2.0", "id": pending.id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._send(message)
        except AgentExited:
            self._pending.close(pending)
            raise
        return pending

    async def request(
        self,
        method: str,
        params: object = None,
        timeout: float | None = 60.0,
    ) -> JSONValue:
        """Send a request and wait for its result. Raises RpcError, TimeoutError or AgentExited."""
        pending = await self.start_request(method, params)
        try:
            return await pending.wait(timeout)
        finally:
            self._pending.close(pending)

    # --- conveniences for the usual ACP sequence -------------------------------------------------

    async def initialize(self, protocol_version: int = 1, timeout: float | None = 30.0) -> JSONObject:
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
        mcp_servers: Sequence[object] | None = None,
        timeout: float | None = 60.0,
        **extra: object,
    ) -> JSONObject:
        cwd = os.path.abspath(cwd)  # noqa: ASYNC240 - string work plus one getcwd
        result = self._object_result(
            "session/new",
            await self.request("session/new", {"cwd": cwd, "mcpServers": mcp_servers or [], **extra}, timeout),
        )
        if isinstance(session_id := result.get("sessionId"), str):
            self.session_cwds[session_id] = cwd
        return result

    async def prompt(self, session_id: str, text: str, timeout: float | None = None) -> JSONObject:
        result = await self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, timeout
        )
        return self._object_result("session/prompt", result)

    def _object_result(self, method: str, result: JSONValue) -> JSONObject:
        """The result of a method whose schema result is an object; anything else is the agent's violation,
        recorded, and the caller sees `{}` (no member it looks for) instead of a value of another type."""
        if isinstance(result, dict):
            return result
        self.record_violation("result_not_object", f"the result of {method} is not an object: {type(result).__name__}")
        return {}

    async def cancel(self, session_id: str) -> None:
        """session/cancel, then answer this session's pending permission requests with `cancelled`, as
        an editor must (Appendix A)."""
        self._serving.session_cancelled(session_id)
        await self.notify("session/cancel", {"sessionId": session_id})
        self._serving.withdraw_permissions(session_id)

    # --- waiting on what arrives ------------------------------------------------------------------

    async def wait_for(self, predicate: Callable[[], bool], timeout: float | None = 10.0) -> None:
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
        """The `update` objects received for one session, optionally of one `sessionUpdate` kind. (Their values
        are left untyped for the conformance groups, which read the agent's figures from them as they are.)"""
        found: list[dict[str, Any]] = []
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
        try:
            await self._reader.read(self._process.stdout, self._stop_agent)
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
        detail = f" (exit code {rc})" if rc is not None else ""
        self._pending.fail_all(lambda p: AgentExited(f"the agent exited before answering {p.method}{detail}", rc))
        self._signal_change()

    def _stop_agent(self) -> None:
        """End the agent after a line the client cannot frame: it is killed, its stdin closed by close()."""
        proc = self._process
        if proc is not None and proc.returncode is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass

    def _on_line_check(self, raw: str) -> None:
        if self.on_line is not None:
            try:
                self.on_line(raw)
            except Exception as exc:  # a test's validator said no: record it, keep the conversation going
                self.record_violation("on_line", f"{type(exc).__name__}: {exc}", raw)

    def record_violation(self, kind: str, detail: str, raw: str | None = None) -> None:
        """Record something the agent did that the client's own policy refused (kept with the same bounds)."""
        self._violations.record(kind, detail, raw)

    # --- what arrives --------------------------------------------------------------------------------

    def _on_message(self, message: JSONValue, raw: str) -> bool:
        """Act on one JSON line; whether it was a message (JSON that is none counts toward a flood: reader.py)."""
        classified = classify(message)
        for problem in classified.problems:
            self.record_violation("not_jsonrpc", problem, raw)
        match classified.message:
            case AgentRequest(id=request_id, method=method, params=params):
                if self.options.history:
                    self.requests_received.append((method, params))
                self._serving.accept(request_id, method, params)
            case AgentNotification(method=method, params=params):
                self._on_notification(method, params)
            case AgentResponse() as response:
                self._on_response(response, raw)
            case None:
                return False
        return True

    def _on_response(self, response: AgentResponse, raw: str) -> None:
        pending = self._pending.find(response.id)
        if pending is None:
            # R11: the id must come back with its JSON type; say so, but do not leave our request hanging.
            pending = next((p for p in self._pending if str(p.id) == str(response.id)), None)
            if pending is None:
                self.record_violation(
                    "unknown_response_id", f"a response for an id we never sent: {response.id!r}", raw
                )
                return
            self.record_violation("response_id_type", f"response id {response.id!r} differs in type from ours", raw)
        if response.has_error:
            if not well_formed_error(response.error):
                self.record_violation("not_jsonrpc", "malformed error object", raw)
            pending.resolve(error=RpcError.from_answer(response.error))
        else:
            pending.resolve(response.result)

    def _on_notification(self, method: str, params: JSONObject) -> None:
        if self.options.history:
            self.notifications.append((method, params))
        if method == "session/update":
            if self.options.history:
                self.updates.append(params)
            if self.on_update is not None:
                self.on_update(params)
        elif method == "$/cancel_request":
            self._serving.cancel_request(params)
        if self.on_notification is not None:
            self.on_notification(method, params)

    # --- customising ----------------------------------------------------------------------------------

    def set_handler(self, method: str, handler: Handler, advertise: bool = True) -> None:
        """Replace or add the handler for an agent->client request (e.g. a `_`-extension)."""
        self._serving.set_handler(method, handler, advertise)

    def violations_of(self, kind: str) -> list[Violation]:
        return self._violations.of(kind)

    def terminal_output(self, terminal_id: str) -> str | None:
        return self.terminals.output_text(terminal_id)
