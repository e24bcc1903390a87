"""What the client does when the agent asks it for something: files on disk, terminals as real
subprocesses, and permission answers chosen by a policy.

Each handler takes the request's params (a JSON object) and returns the result, or raises `RpcError` (the
client's `rpc.errors.AcpError`); the connection (`serving.py`) turns that into the JSON-RPC answer.
"""

from __future__ import annotations

import inspect
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path

import anyio
import anyio.abc

from ama_acp.client.confine import Access, Decide, Roots, resolve, why_unconfined, within
from ama_acp.client.errors import RpcError as RpcError
from ama_acp.config import SandboxConfig
from ama_acp.rpc.dispatch import JSONObject

# JSON-RPC / ACP error codes the client answers with: the one table is rpc/errors.py (re-exported, `as`).
from ama_acp.rpc.errors import INTERNAL_ERROR as INTERNAL_ERROR
from ama_acp.rpc.errors import INVALID_PARAMS as INVALID_PARAMS
from ama_acp.rpc.errors import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from ama_acp.rpc.errors import REQUEST_CANCELLED as REQUEST_CANCELLED
from ama_acp.rpc.errors import RESOURCE_NOT_FOUND as RESOURCE_NOT_FOUND
from ama_acp.sandbox import Sandbox, SandboxState, sandbox_state
from ama_acp.sandbox.temp import remove_temp
from ama_acp.sandbox.terminal import Confined, confine, program_argv

# A RequestPermissionOutcome: `{"outcome": "cancelled"}` or `{"outcome": "selected", "optionId": ...}`.
Outcome = JSONObject


def _absolute_path(params: JSONObject, field: str = "path") -> Path:
    value = params.get(field)
    if not isinstance(value, str) or not value:
        raise RpcError(INVALID_PARAMS, f"`{field}` is required and must be a string")
    if not os.path.isabs(value):
        raise RpcError(INVALID_PARAMS, f"`{field}` must be an absolute path")
    return Path(value)


def _optional_uint(params: JSONObject, field: str) -> int | None:
    value = params.get(field)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RpcError(INVALID_PARAMS, f"`{field}` must be a non-negative integer")
    return value


def _session_id(params: JSONObject) -> str | None:
    sid = params.get("sessionId")
    return sid if isinstance(sid, str) else None


# --- fs/* ---------------------------------------------------------------------------------------------


class FileGate:
    """Which files an agent may read and write: those under its session's folders (`roots`), and the others
    only when `decide` says so. The path served is the resolved one, so a link cannot be swapped in between."""

    def __init__(self, roots: Roots, decide: Decide) -> None:
        self.roots = roots
        self.decide = decide

    async def admit(self, method: str, params: JSONObject, path: Path) -> Path:
        sid = _session_id(params)
        resolved = resolve(str(path))
        access = Access(method, sid, resolved, within(resolved, self.roots(sid)))
        if access.inside or await self.decide(access):
            return Path(resolved)
        raise RpcError(INVALID_PARAMS, f"Refused: {path} is outside the session's folder")


async def read_text_file(params: JSONObject, gate: FileGate | None = None) -> dict[str, str]:
    """fs/read_text_file: the file's text, or `limit` lines from 1-based `line`."""
    path = _absolute_path(params)
    if gate is not None:
        path = await gate.admit("fs/read_text_file", params, path)
    line = _optional_uint(params, "line")
    limit = _optional_uint(params, "limit")
    text = await _read_text(path)
    if line is None and limit is None:
        return {"content": text}
    return {"content": _lines(text, line, limit)}


async def _read_text(path: Path) -> str:
    try:
        # Bytes, then decode: universal-newline reading would turn CRLF into LF and an agent's
        # read-modify-write would silently change every line ending.
        return (await anyio.Path(path).read_bytes()).decode("utf-8")
    except FileNotFoundError:
        raise RpcError(RESOURCE_NOT_FOUND, f"File not found: {path}", {"uri": path.as_uri()}) from None
    except IsADirectoryError:
        raise RpcError(INVALID_PARAMS, f"Not a file: {path}") from None
    except UnicodeDecodeError:
        raise RpcError(INTERNAL_ERROR, f"Not a UTF-8 text file: {path}") from None
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"Cannot read {path}: {exc.strerror or exc}") from None


def _lines(text: str, line: int | None, limit: int | None) -> str:
    # Lines end at "\n" only (str.splitlines would also split on form feeds and U+2028).
    lines = [piece + "\n" for piece in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    # Line numbers are 1-based; a 0 is read as "from the start" rather than refused.
    start = max((line or 1) - 1, 0)
    end = len(lines) if limit is None else start + limit
    return "".join(lines[start:end])


async def write_text_file(params: JSONObject, gate: FileGate | None = None) -> JSONObject:
    """fs/write_text_file: replace the file's content, creating it (and its folders) when missing."""
    path = _absolute_path(params)
    content = params.get("content")
    if not isinstance(content, str):
        raise RpcError(INVALID_PARAMS, "`content` is required and must be a string")
    if gate is not None:
        path = await gate.admit("fs/write_text_file", params, path)
    try:
        await anyio.Path(path.parent).mkdir(parents=True, exist_ok=True)
        # newline="" keeps the agent's line endings byte for byte.
        async with await anyio.open_file(path, "w", encoding="utf-8", newline="") as f:
            await f.write(content)
    except IsADirectoryError:
        raise RpcError(INVALID_PARAMS, f"Not a file: {path}") from None
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"Cannot write {path}: {exc.strerror or exc}") from None
    return {}


# --- session/request_permission -------------------------------------------------------------------

# A policy: one of the PermissionOptionKind strings ("allow_once", "allow_always", "reject_once",
# "reject_always"; "allow" and "reject" mean the *_once ones), "cancel", or a callable(params) -> optionId |
# outcome dict | None (None = cancelled), sync or async (its answer is checked: `_as_outcome`).
PermissionPolicy = str | Callable[[JSONObject], object]

# When the preferred kind is not offered, the nearest one with the same meaning is taken.
_KIND_FALLBACK = {
    "allow_once": ("allow_once", "allow_always"),
    "allow_always": ("allow_always", "allow_once"),
    "reject_once": ("reject_once", "reject_always"),
    "reject_always": ("reject_always", "reject_once"),
    "allow": ("allow_once", "allow_always"),
    "reject": ("reject_once", "reject_always"),
}


def choose_option(options: Sequence[object], kind: str) -> str | None:
    """The optionId of the first option of `kind` (or its nearest kind), None when nothing fits."""
    for wanted in _KIND_FALLBACK.get(kind, (kind,)):
        for opt in options:
            if (
                isinstance(opt, dict)
                and opt.get("kind") == wanted
                and isinstance(option_id := opt.get("optionId"), str)
            ):
                return option_id
    return None


def _as_outcome(answer: object) -> Outcome:
    if answer is None:
        return {"outcome": "cancelled"}
    if isinstance(answer, str):
        return {"outcome": "selected", "optionId": answer}
    if isinstance(answer, dict) and answer.get("outcome") in ("selected", "cancelled"):
        return answer
    raise TypeError(f"a permission policy returned {answer!r}; expected an optionId, an outcome dict or None")


async def decide_permission(policy: PermissionPolicy, params: JSONObject) -> Outcome:
    """The RequestPermissionOutcome the policy gives for this request."""
    if callable(policy):
        answer = policy(params)
        if inspect.isawaitable(answer):
            answer = await answer
        return _as_outcome(answer)
    if policy == "cancel":
        return {"outcome": "cancelled"}
    options = params.get("options")
    return _as_outcome(choose_option(options if isinstance(options, list) else [], policy))


# --- terminal/* ---------------------------------------------------------------------------------------

_SHELL_CHARS = set(" \t|&;<>()$`\"'*?~")


def _argv(command: str, args: list[str]) -> list[str]:
    # Agents differ: some send `command="pytest", args=["-q"]`, others one shell line with no args.
    # A bare line that is not itself an executable runs through the shell, as an editor's terminal would.
    if not args and _SHELL_CHARS.intersection(command) and shutil.which(command) is None and os.name == "posix":
        return ["/bin/sh", "-c", command]
    return [command, *args]


def _command(params: JSONObject) -> str:
    command = params.get("command")
    if not isinstance(command, str) or not command:
        raise RpcError(INVALID_PARAMS, "`command` is required and must be a string")
    return command


def _string_args(params: JSONObject) -> list[str]:
    given_args = params.get("args") or []
    if not isinstance(given_args, list) or not all(isinstance(a, str) for a in given_args):
        raise RpcError(INVALID_PARAMS, "`args` must be a list of strings")
    return [a for a in given_args if isinstance(a, str)]


def _requested_env(params: JSONObject) -> dict[str, str]:
    """The request's `env` entries (the command gets the client's own environment with these over it)."""
    env: dict[str, str] = {}
    env_vars = params.get("env") or []
    if not isinstance(env_vars, list):
        raise RpcError(INVALID_PARAMS, "`env` must be a list of {name, value}")
    for var in env_vars:
        name, value = (var.get("name"), var.get("value")) if isinstance(var, dict) else (None, None)
        if not isinstance(name, str) or not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, "`env` entries must be {name, value} strings")
        env[name] = value
    return env


def _given_cwd(params: JSONObject) -> str | None:
    given_cwd = params.get("cwd")
    if given_cwd is None:
        return None
    if not isinstance(given_cwd, str) or not os.path.isabs(given_cwd):
        raise RpcError(INVALID_PARAMS, "`cwd` must be an absolute path")
    return given_cwd


async def _open_process(command: str, argv: list[str], cwd: str | None, env: dict[str, str]) -> anyio.abc.Process:
    try:
        # A new session (process group) so kill reaches the children of `sh -c ...` too.
        return await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=os.name == "posix",
        )
    except OSError as exc:
        raise RpcError(INTERNAL_ERROR, f"Cannot run {command}: {exc.strerror or exc}") from None


class Terminal:
    """One command the agent started through terminal/create, with its retained output."""

    def __init__(self, terminal_id: str, argv: list[str], limit: int | None, tmp: str | None = None) -> None:
        self.id = terminal_id
        self.argv = argv
        self.limit = limit
        self.tmp = tmp  # the command's private temp folder when it runs sandboxed: removed with the terminal
        self.buffer = bytearray()
        self.truncated = False
        self.process: anyio.abc.Process | None = None
        self.exited = anyio.Event()
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.released = False

    def append(self, data: bytes) -> None:
        self.buffer += data
        if self.limit is not None and len(self.buffer) > self.limit:
            del self.buffer[: len(self.buffer) - self.limit]
            # Cut on a character boundary: drop UTF-8 continuation bytes left at the front.
            while self.buffer and (self.buffer[0] & 0xC0) == 0x80:
                del self.buffer[0]
            self.truncated = True

    def text(self) -> str:
        return self.buffer.decode("utf-8", errors="replace")

    def exit_status(self) -> JSONObject:
        return {"exitCode": self.exit_code, "signal": self.signal}


class TerminalManager:
    """Runs terminal/* requests as real subprocesses. `spawn_task` starts a background task (the
    connection's task group), so output is collected while the agent does other things."""

    def __init__(self, spawn_task: Callable[[Callable[[], Coroutine[object, object, None]]], None]) -> None:
        self._spawn_task = spawn_task
        self._terminals: dict[str, Terminal] = {}
        self._counter = 0
        self.default_cwd: Callable[[str | None], str | None] = lambda _session_id: None
        # Who agrees to each command (None: every command runs) and the folders a session's commands may start in.
        self.gate: Decide | None = None
        self.roots: Roots = lambda _session_id: ()
        # The sandbox of the commands (ClientOptions.sandbox, .sandbox_roots): None runs them unconfined.
        self.sandbox: SandboxConfig | None = None
        self.sandbox_roots: Sequence[str] = ()
        self._closing = False

    @property
    def created(self) -> list[str]:
        return list(self._terminals)

    def unreleased(self) -> list[str]:
        """Terminals the agent created and never released (R133 says it must release every one)."""
        return [t.id for t in self._terminals.values() if not t.released]

    def output_text(self, terminal_id: str) -> str | None:
        """What the terminal printed (kept after release: editors keep showing it)."""
        term = self._terminals.get(terminal_id)
        return term.text() if term else None

    def _get(self, params: JSONObject) -> Terminal:
        tid = params.get("terminalId")
        term = self._terminals.get(tid) if isinstance(tid, str) else None
        if term is None:
            raise RpcError(INVALID_PARAMS, f"Unknown terminalId: {tid!r}")
        if term.released:
            raise RpcError(INVALID_PARAMS, f"Terminal {tid} was released")
        return term

    async def create(self, params: JSONObject) -> JSONObject:
        command = _command(params)
        argv = _argv(command, _string_args(params))
        requested = _requested_env(params)
        given_cwd = _given_cwd(params)
        cwd = given_cwd if given_cwd is not None else self.default_cwd(_session_id(params))
        limit = _optional_uint(params, "outputByteLimit")
        sid = _session_id(params)
        roots = [*self.roots(sid), *self.sandbox_roots]
        # Worked out once: what the question says of the sandbox is what the command then runs in.
        state = sandbox_state(self.sandbox, roots) if self.sandbox is not None else None  # no bwrap from the roots
        if self.gate is not None:
            why = "" if state is None else why_unconfined(state)
            cwd = await self._agreed_cwd(self.gate, params, argv, cwd, why)
        box = self._confine(state, roots, argv, requested, cwd or os.getcwd())
        run, env = (argv, requested) if box is None else (box.argv, box.env)
        self._counter += 1
        term = Terminal(f"term-{self._counter}", argv, limit, box.tmp if box is not None else None)
        try:
            term.process = await _open_process(command, run, cwd, {**os.environ, **env})
        except BaseException:
            remove_temp(term.tmp)
            raise
        self._terminals[term.id] = term
        self._spawn_task(lambda: self._pump(term))
        return {"terminalId": term.id}

    def _confine(
        self, state: SandboxState | None, roots: list[str], argv: list[str], requested: dict[str, str], cwd: str
    ) -> Confined | None:
        """The command made ready to run in the sandbox of `state`, writable in `roots` (the session's folders and
        `sandbox_roots`); None when the client has no sandbox or the kernel none to give."""
        if state is None:
            return None
        sandbox = Sandbox(state, roots)
        path = requested.get("PATH", os.environ.get("PATH"))
        return confine(sandbox, program_argv(argv[0], argv[1:], path, cwd), requested)

    async def _agreed_cwd(self, gate: Decide, params: JSONObject, argv: list[str], cwd: str | None, why: str) -> str:
        """The folder the command runs in, once `gate` agreed to run it there."""
        sid = _session_id(params)
        folder = resolve(cwd or os.getcwd())
        inside = within(folder, self.roots(sid))
        access = Access("terminal/create", sid, folder, inside, shlex.join(argv), why)
        if not await gate(access):
            raise RpcError(INVALID_PARAMS, f"Refused: the client did not agree to run {shlex.join(argv)} in {folder}")
        return folder

    async def _pump(self, term: Terminal) -> None:
        proc = term.process
        assert proc is not None and proc.stdout is not None
        try:
            async for chunk in proc.stdout:
                term.append(chunk)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            with anyio.CancelScope(shield=True):
                rc = await proc.wait()
            if rc < 0:
                try:
                    term.signal = signal.Signals(-rc).name
                except ValueError:
                    term.signal = str(-rc)
            else:
                term.exit_code = rc
            term.exited.set()
            if term.released or self._closing:  # what it wrote while it was being killed goes too
                remove_temp(term.tmp)

    async def output(self, params: JSONObject) -> JSONObject:
        term = self._get(params)
        result: JSONObject = {"output": term.text(), "truncated": term.truncated}
        if term.exited.is_set():
            result["exitStatus"] = term.exit_status()
        return result

    async def wait_for_exit(self, params: JSONObject) -> JSONObject:
        term = self._get(params)
        await term.exited.wait()
        return term.exit_status()

    def _kill(self, term: Terminal) -> None:
        proc = term.process
        if proc is None or term.exited.is_set() or proc.returncode is not None:
            return
        try:
            if os.name == "posix":
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError):
            pass

    async def kill(self, params: JSONObject) -> JSONObject:
        self._kill(self._get(params))
        return {}

    async def release(self, params: JSONObject) -> JSONObject:
        term = self._get(params)
        self._kill(term)
        term.released = True
        remove_temp(term.tmp)
        return {}

    async def shutdown(self) -> None:
        """Kill every command still running (the connection is closing), and remove their temp folders."""
        self._closing = True
        for term in self._terminals.values():
            self._kill(term)
            remove_temp(term.tmp)
