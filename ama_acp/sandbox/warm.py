"""A launcher started ahead of need, so that a sandboxed command does not wait for Python to start (issue 38).

Confining a command costs one start of the Landlock launcher (`python -I -S`, landlock.py): ~10 ms, nearly all of
it the interpreter's own start. So each sandbox keeps one launcher on standby, started the way `run_command` starts
a command (its own session and process group, stdin from /dev/null, stdout and stderr into one pipe of ama's), past
its start and blocked reading a socket it inherited (not stdin, which is the command's). A command hands it one
request (landlock.encode_request: the rules, the directory, the whole environment and the command line); the
launcher restricts itself, changes directory and execs the command, which thereby is a real child of ama with its
stdio, group and pid already in place. The next launcher is started in the background once the command is over
(`refill_soon`), so that its start — the fork and exec of an interpreter in ama's event loop — falls between two
commands, in the model's turn, not inside either.

The rules a launcher holds to: it runs nothing but what a whole request says (a request is framed: one cut short
runs nothing); it serves one request and becomes that command or exits; it exits when ama's end of its socket
closes without a request (ama gone, the sandbox closed). One that died or is stuck is dropped, not waited on, and
the command starts the usual (cold) way. A launcher carries in its environment the variables its owner gives it
(`marks`: the process-tree marker of tools/proctree.py), and the command it runs carries them too, so the sweep
that ends a command's processes finds the launcher as well as everything the command starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import subprocess
import sys

import anyio
import anyio.lowlevel
from anyio.abc import Process

log = logging.getLogger(__name__)

# How long handing a request over may take: the launcher reads it as soon as its start is done (ms). One that has
# not taken it by then is stuck (stopped, starved), and the command starts without it.
HAND_TIMEOUT = 5.0
# How long a launcher told to go (its socket closed) gets to exit before it is killed.
EXIT_GRACE = 1.0


class Launcher:
    """One launcher process, waiting for its request on `sock`."""

    def __init__(self, proc: Process, sock: socket.socket, marks: dict[str, str]) -> None:
        self.proc = proc
        self.marks = marks
        self._sock = sock
        self._loop = anyio.lowlevel.current_token()  # its process handle belongs to this event loop
        self._ready = False

    @classmethod
    async def start(cls, code: str, marks: dict[str, str]) -> Launcher:
        """A new launcher running `code` (format field `fd`: its end of the socket), with `marks` as its whole
        environment (a request brings the command's)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = await anyio.open_process(
                [sys.executable, "-I", "-S", "-c", code.format(fd=theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd="/",  # the request names the command's
                env=marks,
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        return cls(proc, ours, marks)

    def usable(self) -> bool:
        """Still running, and a child of the event loop asking (a test's loop may be gone)."""
        return self.proc.returncode is None and self._loop == anyio.lowlevel.current_token()

    def ready(self) -> bool:
        """Whether it is past its start, waiting for its request (its one byte "r" arrived)."""
        if not self._ready:
            with contextlib.suppress(OSError):  # BlockingIOError: not yet; others: gone
                self._ready = self._sock.recv(1) == b"r"
        return self._ready

    async def hand(self, request: bytes) -> bool:
        """Give it its request; False when it could not take it (it died, or is stuck)."""
        view = memoryview(request)
        try:
            with anyio.move_on_after(HAND_TIMEOUT):
                while view:
                    try:
                        view = view[self._sock.send(view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(self._sock)
                self._sock.shutdown(socket.SHUT_WR)  # the end of the request
                return True
            return False
        except OSError:  # EPIPE, ECONNRESET: it is gone
            return False
        finally:
            self._sock.close()

    async def aclose(self) -> None:
        """Tell it to go (its socket closed: EOF), kill it when it does not, and reap it."""
        self._sock.close()
        if self._loop != anyio.lowlevel.current_token():
            return  # its loop is gone, and its handle with it; the closed socket ends it
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(EXIT_GRACE):
                await self.proc.wait()
            if self.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
            await self.proc.aclose()


class Standby:
    """The one launcher a sandbox keeps ready, and its replacement as each is taken."""

    def __init__(self, code: str) -> None:
        self._code = code
        self._launcher: Launcher | None = None
        self._closed = False
        self._told = False
        self._pending: asyncio.Task[None] | None = None  # the next launcher's start, in the background

    def ready(self) -> bool:
        return self._launcher is not None and self._launcher.ready()

    async def take(self) -> Launcher | None:
        """The launcher on standby, for one command; None when there is none that can serve."""
        launcher, self._launcher = self._launcher, None
        if launcher is not None and not launcher.usable():
            await launcher.aclose()
            return None
        return launcher

    async def refill(self, marks: dict[str, str]) -> None:
        """Start the next launcher (with `marks`) unless one is there (`refill_soon` starts one at a time). A
        launcher that cannot be started is logged once; commands then start the cold way."""
        if self._launcher is not None or self._closed:
            return
        try:
            launcher = await Launcher.start(self._code, marks)
        except Exception as exc:  # OSError (no memory, no processes left); anything else would be a bug of ours
            if not self._told:
                self._told = True
                log.warning(
                    "no sandbox launcher could be started ahead of need (%s): each command starts its own",
                    exc,
                    exc_info=not isinstance(exc, OSError),
                )
            return
        if self.closed():  # while it started (a call: mypy would take `_closed` as still False after the await)
            await launcher.aclose()
        else:
            self._launcher = launcher

    def refill_soon(self, marks: dict[str, str]) -> None:
        """`refill` in the background: called as a command ends, so that the next launcher's start (the fork and
        exec of an interpreter, milliseconds of ama's event loop) falls between commands, not inside one. A task
        of the loop's own, not of a task group: nothing that runs a command waits for it; `aclose` does."""
        if self._launcher is not None or self._pending is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on asyncio (ama always is): no launcher kept ready, each command starts its own
            return
        self._pending = loop.create_task(self._refill_then_forget(marks))

    async def _refill_then_forget(self, marks: dict[str, str]) -> None:
        try:
            await self.refill(marks)
        finally:
            self._pending = None

    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        self._closed = True
        if (pending := self._pending) is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await pending  # a launcher it started sees the standby closed and goes
        launcher, self._launcher = self._launcher, None
        if launcher is not None:
            await launcher.aclose()
