"""Two ama processes on one data dir handing a session over (docs/sessions.md "Sessions open elsewhere").

Each ama that has a session open listens on a Unix socket of its own in Linux's abstract namespace (`address`:
its uid and pid, no file). Abstract, so that a command ama runs in its sandbox cannot reach it: Landlock scopes
abstract sockets to the sandbox's own (ABI 6, sandbox/landlock.py), where a socket file in the data dir would be
reachable by any process of the person's uid (a prompt-injected `python -c` could ask another window's idle
session away); and so that there is no file to sweep after a crash, nor to plant a link as. A loader that finds
a session's file locked learns the holder's pid from /proc/locks (locks.py) and asks it, one line each way:

    → {"release": "ses_…"}
    ← {"answer": "released" | "busy" | "not-held"}

Every byte from the other end is hostile. The holder answers only a peer of its own uid (SO_PEERCRED) that is not
a sandboxed command (no_new_privs, `confined`: the check that holds where Landlock cannot scope the socket), reads
one line of at most 256 bytes within two seconds, serves a few askers at a time (the rest are hung up on), and
releases nothing but the one session named, and only when no turn is running in it. The asker answers only to
the pid that holds the file and runs as its uid (SO_PEERCRED of the socket it reached).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import msgspec

log = logging.getLogger(__name__)

MAX_LINE = 256  # a request or an answer: one line, newline included
READ_SECONDS = 2.0  # a peer that sends no whole line by then is hung up on
MAX_ASKERS = 4  # askers served at once; more are hung up on at once (a flood costs accepts, nothing else)
ASK_SECONDS = 5.0  # the asker's wait for an answer: the holder closes a file, nothing slower

Answer = Literal["released", "busy", "not-held"]
Decide = Callable[[str, int], Awaitable[Answer]]  # (session id, the asker's pid) → the answer


class _Ask(msgspec.Struct, forbid_unknown_fields=True):
    release: str


class _Told(msgspec.Struct, forbid_unknown_fields=True):
    answer: Answer


_ask_decoder = msgspec.json.Decoder(_Ask)
_told_decoder = msgspec.json.Decoder(_Told)


def _peer(sock: socket.socket) -> tuple[int, int]:
    """The other end's (pid, uid), as the kernel recorded them at connect (bind and listen for a server)."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


def address(pid: int) -> bytes:
    """The abstract socket address of `pid`'s listener: the name starts with a NUL byte (no file), and carries the
    uid, so that one person's processes never meet another's — who could take a name first, and would then get
    no question (the asker checks the peer's pid and uid) and leave that process without handover."""
    return f"\0ama-handover/{os.getuid()}/{pid}".encode()


class Listener:
    """This process's socket: `open` binds it, `serve` answers askers until cancelled, then removes it."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._serving = 0

    def open(self) -> None:
        """The socket bound and listening; an OSError when there can be none here (not Linux, the name taken:
        then no handover)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        try:
            sock.bind(address(os.getpid()))
            sock.listen(16)
        except BaseException:
            sock.close()
            raise
        self._sock = sock

    async def serve(self, decide: Decide) -> None:
        sock = self._sock
        if sock is None:
            raise RuntimeError("Listener.serve before open")
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    await anyio.wait_readable(sock)
                    try:
                        conn, _ = sock.accept()
                    except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                        continue
                    except OSError as exc:  # EMFILE: this round is lost, the socket stays
                        log.info("handover socket: cannot accept: %s", exc)
                        await anyio.sleep(0.1)
                        continue
                    if self._serving >= MAX_ASKERS:
                        conn.close()
                        continue
                    self._serving += 1
                    tg.start_soon(self._one, conn, decide)
        finally:
            self.close()

    async def _one(self, conn: socket.socket, decide: Decide) -> None:
        try:
            with conn:
                conn.setblocking(False)
                pid, uid = _peer(conn)
                if uid != os.getuid():  # another user's process: no answer at all
                    return
                if confined(pid) and not confined(os.getpid()):
                    # A command in a sandbox (Landlock and bubblewrap both set no_new_privs, which every process
                    # they start inherits and none can drop): where the kernel cannot keep it from this socket
                    # (Landlock before ABI 6), it is still not answered. An ama that runs with no_new_privs itself
                    # (a container that sets it for everything) answers askers like it.
                    log.info("handover socket: pid %d runs confined (a sandboxed command?): not answered", pid)
                    return
                with anyio.move_on_after(READ_SECONDS):
                    line = await _read_line(conn)
                    if line is None:
                        return
                    try:
                        ask = _ask_decoder.decode(line)
                    except msgspec.DecodeError:
                        return
                    with anyio.CancelScope(shield=True):  # a release is done whole or not begun
                        answer = await decide(ask.release, pid)
                    conn.send(msgspec.json.encode(_Told(answer)) + b"\n")  # a few bytes: the buffer takes them
        except OSError as exc:  # the asker hung up, or sent garbage the kernel refused: nothing was changed
            log.debug("handover socket: an asker's connection failed: %s", exc)
        finally:
            self._serving -= 1

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # an abstract name goes with its socket: nothing left behind


def confined(pid: int) -> bool:
    """Whether process `pid` runs with no_new_privs (`NoNewPrivs: 1` in /proc/PID/status), as every command of a
    sandbox does; a process gone or unreadable counts as confined (no answer is the safe side)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:  # the kernel's file, not one of ama's folders
            for line in status:
                if line.startswith(b"NoNewPrivs:"):
                    return line.split()[1:2] != [b"0"]
    except OSError:
        return True
    return False  # a kernel too old to say: no sandbox of ama's could have run there either


async def _read_line(conn: socket.socket) -> bytes | None:
    """One line from a non-blocking socket, without its newline; None past MAX_LINE or at an early end."""
    data = b""
    while b"\n" not in data:
        await anyio.wait_readable(conn)
        try:
            chunk = conn.recv(MAX_LINE - len(data))
        except BlockingIOError:
            continue
        if not chunk:
            return None
        data += chunk
        if len(data) >= MAX_LINE and b"\n" not in data:
            return None
    line, _, _rest = data.partition(b"\n")
    return line


def ask_release(pid: int, session_id: str) -> Answer | None:
    """Ask the ama process `pid` to release `session_id` (blocking: run it in a worker thread). None: no answer
    worth believing — no socket (an older ama, `ama -p`), a peer that is not `pid` of our uid, a timeout, a
    malformed line."""
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(ASK_SECONDS)
            sock.connect(address(pid))
            if _peer(sock) != (pid, os.getuid()):
                log.warning("handover: the socket of pid %d is held by another process; not asked", pid)
                return None
            sock.sendall(msgspec.json.encode(_Ask(session_id)) + b"\n")
            data = b""
            while b"\n" not in data and len(data) < MAX_LINE:
                chunk = sock.recv(MAX_LINE - len(data))
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED):
            log.info("handover: cannot ask pid %d about session %s: %s", pid, session_id, exc)
        return None
    line, newline, _ = data.partition(b"\n")
    if not newline:
        return None
    try:
        return _told_decoder.decode(line).answer
    except msgspec.DecodeError:
        return None
