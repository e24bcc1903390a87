"""Where tools touch files and run commands.

`Workspace` is the whole surface a tool may use for reading, writing and running things, so the same tool
works against the local disk (`LocalWorkspace`) or against the editor (ACP `fs/*` and `terminal/*`). Paths
handed to a workspace are absolute; the tools resolve them and the permission layer has already decided
whether the call may go ahead.

Searching (find_files, search) always walks the local disk: ACP has no method to list or search files.
"""

# run_command takes a timeout on purpose: running out of time is part of its result (timed_out, the output
# so far), which a cancel scope around the call would lose.

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat as stat_mod
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Protocol

import anyio
import msgspec
from anyio.abc import Process

from ama_acp.errors import ToolError
from ama_acp.sandbox import Sandbox
from ama_acp.sandbox.temp import private_temp, remove_temp
from ama_acp.tools.proctree import MARKER_VAR, group_alive, kill_group, marked_pids, new_marker, signal_marked
from ama_acp.tools.regular import describe_mode, open_regular


class CutShort(msgspec.Struct):
    """What a command cancelled while it ran leaves for the person's view of its call (session/turn/host.py puts it
    in the call's final update and its record): its output so far and, when it ran in the editor's terminal,
    that terminal, kept until the final update has shown it and then `release`d."""

    output: str = ""
    terminal_id: str | None = None
    release: Callable[[], Awaitable[None]] | None = None


# Set by whoever runs a tool (session/turn/host.py) to a fresh CutShort for the call; a command cancelled mid-run
# fills it (a cancel is an exception: the output would otherwise go with it).
cut_short: ContextVar[CutShort | None] = ContextVar("cut_short", default=None)

# A NUL byte in the first block of a file means binary, as git and ripgrep decide it.
BINARY_SNIFF_BYTES = 8192


class BinaryFileError(ToolError, ValueError):
    """The file is not UTF-8 text (NUL bytes or undecodable); tools show a message, not the bytes."""


class FileStat(msgspec.Struct, frozen=True):
    size: int
    mtime: float
    is_dir: bool
    is_file: bool  # a regular file
    is_symlink: bool = False
    # What it is when neither a directory nor a regular file: "a FIFO (named pipe)", "a character device", ...
    special: str | None = None


class DirEntry(msgspec.Struct, frozen=True):
    name: str
    is_dir: bool  # symlinks to directories count as directories
    size: int  # bytes; 0 for directories
    mtime: float
    is_symlink: bool = False
    special: str | None = None  # a FIFO, device or socket: listed, never opened


class CommandResult(msgspec.Struct, frozen=True):
    exit_code: int | None  # None when the process died from a signal
    signal: int | None  # the signal that ended it, if any
    output: str  # stdout and stderr interleaved; a note marks any part cut out of the middle
    truncated: bool  # output was longer than output_cap
    timed_out: bool
    # What the sandbox it ran in refused ("writes outside the workspace and …"); "" when it ran unconfined.
    sandbox: str = ""


class Workspace(Protocol):
    """File and process access for tools. All paths are absolute.

    Errors: a missing file raises `FileNotFoundError`, a directory where a file is expected raises
    `IsADirectoryError`, a binary or non-UTF-8 file raises `BinaryFileError`.
    """

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """The file's text, exactly (no newline translation). `line` (1-based) and `limit` select a slice of
        lines, as ACP `fs/read_text_file` does; without them the whole file."""
        ...

    async def write_text(self, path: str, text: str) -> None:
        """Replace the file's content with `text` exactly, creating missing parent directories."""
        ...

    async def stat(self, path: str) -> FileStat | None:
        """Metadata, following symlinks; None when nothing is there."""
        ...

    async def exists(self, path: str) -> bool: ...

    async def is_dir(self, path: str) -> bool: ...

    async def list_dir(self, path: str) -> list[DirEntry]:
        """The directory's entries in no particular order."""
        ...

    async def run_command(
        self, command: str, cwd: str, timeout: float, output_cap: int, confined: bool = True
    ) -> CommandResult:
        """Run a shell command line. It ends by `timeout` (seconds) and is killed with everything it started
        when it times out or the caller is cancelled. At most `output_cap` bytes of output are kept (the
        head and the tail). `confined`: in the sandbox, where there is one; False only for the one run outside
        it that the person allowed (tools/shell.py `outside_sandbox`)."""
        ...


# --- local disk ----------------------------------------------------------------------------------------

_ENV_OVERRIDES = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    # A command must never sit waiting for a password nobody will type.
    "GIT_TERMINAL_PROMPT": "0",
}


def command_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment commands run with: the agent's own, minus every credential (ama_acp.secrets: the same rule
    that keeps them out of session files and logs, including the configured providers' key variables)."""
    from ama_acp.secrets import is_secret

    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret(k)}
    env.update(_ENV_OVERRIDES)
    env.setdefault("PATH", os.defpath)
    return env


def _shell() -> list[str]:
    # Not a login shell: profile scripts are slow, chatty and may change the directory.
    for candidate in ("/bin/bash", "/usr/bin/bash"):
        if os.access(candidate, os.X_OK):
            return [candidate, "-c"]
    return ["/bin/sh", "-c"]


class _HeadTail:
    """Keeps the first and the last `cap // 2` bytes of a stream, counting what falls out of the middle."""

    def __init__(self, cap: int) -> None:
        self.head_cap = max(cap // 2, 0)
        self.tail_cap = max(cap - self.head_cap, 0)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        over = len(self.tail) - self.tail_cap
        if over > 0:
            del self.tail[:over]
            self.dropped += over

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n\n[... {self.dropped} bytes of output omitted ...]\n\n{tail}"


class LocalWorkspace:
    """The local disk and local subprocesses."""

    def __init__(
        self, *, kill_grace: float = 0.5, env: Mapping[str, str] | None = None, sandbox: Sandbox | None = None
    ) -> None:
        self.kill_grace = kill_grace
        self._env_base = env
        self.sandbox = sandbox  # None or inactive: commands run unconfined

    # files

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        return await anyio.to_thread.run_sync(_read_text, path, line, limit, abandon_on_cancel=True)

    async def write_text(self, path: str, text: str) -> None:
        await anyio.to_thread.run_sync(_write_text, path, text)

    async def stat(self, path: str) -> FileStat | None:
        return await anyio.to_thread.run_sync(_stat, path)

    async def exists(self, path: str) -> bool:
        return await self.stat(path) is not None

    async def is_dir(self, path: str) -> bool:
        st = await self.stat(path)
        return st is not None and st.is_dir

    async def list_dir(self, path: str) -> list[DirEntry]:
        return await anyio.to_thread.run_sync(_list_dir, path, abandon_on_cancel=True)

    # commands

    async def run_command(
        self, command: str, cwd: str, timeout: float, output_cap: int, confined: bool = True
    ) -> CommandResult:
        # Shielded: a cancel while asyncio still connects the pipes would kill only the shell (its own cleanup)
        # and orphan whatever it already started. With the handle in hand the finally below kills the group.
        env = command_env(self._env_base)
        # Inherited by everything the command starts, so even a process that left the group is found.
        env[MARKER_VAR] = new_marker()
        argv, tmp = [*_shell(), command], None
        box = self.sandbox if confined and self.sandbox is not None and self.sandbox.state.active else None
        if box is not None:
            # The command's private temp folder: the one place outside the workspace it may write.
            env["TMPDIR"] = tmp = private_temp()
        try:
            result = await self._run(argv, env, tmp, cwd, timeout, output_cap)
        finally:
            remove_temp(tmp)
            if box is not None:  # the next command's launcher, started once this one is over
                box.prepare({MARKER_VAR: new_marker()})
        # What the sandbox refused, for the model reading a failed command.
        return result if box is None else msgspec.structs.replace(result, sandbox=box.state.blocked())

    async def _spawn(self, argv: list[str], env: dict[str, str], tmp: str | None, cwd: str) -> Process:
        """The command's process: in its own session and process group, so one killpg reaches everything it
        starts. Sandboxed (`tmp`: its private temp folder) by the launcher the sandbox keeps ready, which takes on
        the command (its marker becomes the command's: `env`), or else by a launcher started now."""
        if tmp is not None and self.sandbox is not None:
            warm = await self.sandbox.start(argv, env, tmp, cwd)
            if warm is not None:
                return warm
            argv = self.sandbox.wrap(argv, env, tmp)
        return await anyio.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )

    async def _run(
        self, argv: list[str], env: dict[str, str], tmp: str | None, cwd: str, timeout: float, output_cap: int
    ) -> CommandResult:
        with anyio.CancelScope(shield=True):
            proc = await self._spawn(argv, env, tmp, cwd)
        marker = env[MARKER_VAR]  # the one the command carries: a warm launcher's, when one took it
        pgid = proc.pid
        out = _HeadTail(output_cap)
        eof = anyio.Event()

        async def pump() -> None:
            assert proc.stdout is not None
            try:
                async for chunk in proc.stdout:
                    out.add(chunk)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                eof.set()

        timed_out = cancelled = False
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                with anyio.move_on_after(timeout) as scope:
                    await proc.wait()
                timed_out = scope.cancelled_caught
                # The shell is done (or out of time); whatever it left behind, in its group or not, goes too.
                await self._terminate(proc, pgid, marker)
                # A process that escaped the group (setsid) may still hold the pipe: stop waiting for it.
                with anyio.move_on_after(1.0):
                    await eof.wait()
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await self._terminate(proc, pgid, marker)
                with contextlib.suppress(Exception):
                    await proc.aclose()
            if cancelled and (sink := cut_short.get()) is not None:
                sink.output = out.text()

        code = proc.returncode
        if code is not None and code < 0:
            return CommandResult(None, -code, out.text(), out.dropped > 0, timed_out)
        # bash reports a child killed by a signal as 128+N; keep the exit code as the shell gave it.
        return CommandResult(code, None, out.text(), out.dropped > 0, timed_out)

    async def _terminate(self, proc: Process, pgid: int, marker: str) -> None:
        await end_command(proc, pgid, marker, self.kill_grace)


async def end_command(proc: Process, pgid: int, marker: str, grace: float) -> None:
    """SIGTERM the group and every process that carries `marker`, SIGKILL what is left after `grace`, and reap
    the shell: a command's end (run_command's, a hook's)."""
    if proc.returncode is None or group_alive(pgid) or marked_pids(marker):
        kill_group(pgid, signal.SIGTERM)
        signal_marked(marker, signal.SIGTERM)
        if not await _wait_gone(proc, pgid, marker, grace):
            kill_group(pgid, signal.SIGKILL)
            signal_marked(marker, signal.SIGKILL)
            # SIGKILL lands asynchronously; return only once they are really gone.
            await _wait_gone(proc, pgid, marker, 1.0)
    if proc.returncode is None:
        await proc.wait()


def _all_gone(proc: Process, pgid: int, marker: str) -> bool:
    return proc.returncode is not None and not group_alive(pgid) and not marked_pids(marker)


async def _wait_gone(proc: Process, pgid: int, marker: str, seconds: float) -> bool:
    """Poll until the shell has exited and no live process is left in its group or carries its marker:
    nothing signals the end of a process group, so polling it is."""
    for _ in range(max(int(seconds / 0.01), 1)):
        if _all_gone(proc, pgid, marker):
            return True
        await anyio.sleep(0.01)
    return _all_gone(proc, pgid, marker)


def _read_text(path: str, line: int | None, limit: int | None) -> str:
    # Regular files only, opened so that the open itself cannot block (a FIFO would, forever).
    with open(open_regular(path), "rb", closefd=True) as f:
        head = f.read(BINARY_SNIFF_BYTES)
        if b"\0" in head:
            raise BinaryFileError(f"{path} is a binary file")
        if line is None and limit is None:
            return _decode(head + f.read(), path)
        # A slice: stream lines so a huge file never sits in memory whole.
        f.seek(0)
        start = max(line or 1, 1)
        parts: list[bytes] = []
        for n, raw in enumerate(f, start=1):
            if n < start:
                continue
            if limit is not None and len(parts) >= limit:
                break
            parts.append(raw)
        return _decode(b"".join(parts), path)


def _decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BinaryFileError(f"{path} is not UTF-8 text") from e


def _write_text(path: str, text: str) -> None:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    data = text.encode("utf-8")
    # In place rather than rename-over: keeps the file's mode, owner, hard links and symlinks intact. Opened
    # without O_TRUNC and checked to be a regular file first: never written through to a FIFO or device.
    with open(open_regular(path, write=True), "wb", closefd=True) as f:
        f.truncate(0)
        f.write(data)


def _stat(path: str) -> FileStat | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG):
            return None
        raise
    return FileStat(
        size=st.st_size,
        mtime=st.st_mtime,
        is_dir=stat_mod.S_ISDIR(st.st_mode),
        is_file=stat_mod.S_ISREG(st.st_mode),
        is_symlink=os.path.islink(path),
        special=describe_mode(st.st_mode),
    )


def _list_dir(path: str) -> list[DirEntry]:
    entries: list[DirEntry] = []
    with os.scandir(path) as it:
        for e in it:
            try:
                st = e.stat()  # follows symlinks: a link to a directory lists as a directory
            except OSError:
                # A dangling symlink or a file that vanished meanwhile: still list the name.
                entries.append(DirEntry(e.name, False, 0, 0.0, is_symlink=True))
                continue
            is_dir = stat_mod.S_ISDIR(st.st_mode)
            size = st.st_size if stat_mod.S_ISREG(st.st_mode) else 0
            entries.append(DirEntry(e.name, is_dir, size, st.st_mtime, e.is_symlink(), describe_mode(st.st_mode)))
    return entries
