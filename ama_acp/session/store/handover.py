"""Two ama processes on one data dir handing a session over (docs/sessions.md "Sessions open elsewhere").

Each ama that has a session open listens on a Unix socket of its own, `<data dir>/run/<pid>.sock` (the folder
0700, the socket 0600, reached through ownfiles' opener: no link on the way). A loader that finds a session's
file locked learns the holder's pid from /proc/locks (locks.py) and asks it, one line each way:

    → {"release": "ses_…"}
    ← {"answer": "released" | "busy" | "not-held"}

Every byte from the other end is hostile. The holder answers only a peer of its own uid (SO_PEERCRED), reads
one line of at most 256 bytes within two seconds, serves a few askers at a time (the rest are hung up on), and
releases nothing but the one session named, and only when no turn is running in it. The asker answers only to
the pid that holds the file and runs as its uid (SO_PEERCRED of the socket it reached).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import anyio
import msgspec

from ama_acp import ownfiles
from ama_acp.pids import pid_alive

log = logging.getLogger(__name__)

RUN_DIR = "run"
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


def _address(dir_fd: int, pid: int) -> str:
    # Through the folder's descriptor: a data dir of any length fits the 108 bytes a socket address holds, and
    # the folder reached is the one ownfiles opened, not whatever the path names a moment later.
    return f"/proc/self/fd/{dir_fd}/{pid}.sock"


def _sweep(dir_fd: int) -> None:
    """Sockets of processes that are gone (a crash, a kill) removed: their pid may come back as another program."""
    for name in os.listdir(dir_fd):
        pid_text, dot, ext = name.partition(".")
        if dot and ext == "sock" and pid_text.isdigit() and not pid_alive(int(pid_text)):
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass


class Listener:
    """This process's socket: `open` binds it, `serve` answers askers until cancelled, then removes it."""

    def __init__(self, data_dir: Path) -> None:
        self._root = data_dir
        self._dir = data_dir / RUN_DIR
        self._name = f"{os.getpid()}.sock"
        self._sock: socket.socket | None = None
        self._serving = 0

    def open(self) -> None:
        """The socket bound and listening; an OSError when the data dir cannot have one (then no handover)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        try:
            with ownfiles.folder(self._dir, self._root, create=True) as fd:
                _sweep(fd)
                try:
                    os.unlink(self._name, dir_fd=fd)  # an earlier process of this pid's, gone: its name only
                except FileNotFoundError:
                    pass
                sock.bind(_address(fd, os.getpid()))
                os.chmod(self._name, 0o600, dir_fd=fd)
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
        if sock is None:
            return
        sock.close()
        try:
            with ownfiles.folder(self._dir, self._root) as fd:
                info = os.lstat(self._name, dir_fd=fd)
                if stat.S_ISSOCK(info.st_mode):
                    os.unlink(self._name, dir_fd=fd)
        except OSError:
            pass


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


def ask_release(data_dir: Path, pid: int, session_id: str) -> Answer | None:
    """Ask the ama process `pid` to release `session_id` (blocking: run it in a worker thread). None: no answer
    worth believing — no socket (an older ama, `ama -p`), a peer that is not `pid` of our uid, a timeout, a
    malformed line."""
    try:
        with ownfiles.folder(data_dir / RUN_DIR, data_dir) as fd, socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(ASK_SECONDS)
            sock.connect(_address(fd, pid))
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
