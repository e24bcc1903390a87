"""The handover socket between ama processes (session/store/handover.py): a real Unix socket served by a real
event loop in a thread; hostile bytes get no answer and release nothing, and the asker believes only the holder.
The processes' side (two real ama processes) is tests/integration/test_held_elsewhere_e2e.py."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from ama_acp.session.store import handover
from ama_acp.session.store.handover import Answer, Listener, address, ask_release
from ama_acp.session.store.holders import TURN_BYTE, lock_table, mark_turn
from tests.support.hypothesis_profiles import examples


class _Holder:
    """A listener whose decisions are recorded: it holds `held` (idle) and answers as the real one would."""

    def __init__(self, held: str = "ses_held") -> None:
        self.held = held
        self.asked: list[tuple[str, int]] = []

    async def decide(self, session_id: str, asker: int) -> Answer:
        self.asked.append((session_id, asker))
        return "released" if session_id == self.held else "not-held"


@pytest.fixture
def served() -> Iterator[tuple[bytes, _Holder, BlockingPortal]]:
    holder = _Holder()
    listener = Listener()
    listener.open()
    with start_blocking_portal() as portal:
        task = portal.start_task_soon(listener.serve, holder.decide)
        try:
            yield address(os.getpid()), holder, portal
        finally:
            task.cancel()
    with socket.socket(socket.AF_UNIX) as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(address(os.getpid()))  # the name went with the socket: nothing is left behind


def _poke(path: bytes, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(path)
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            out = b""
            while chunk := sock.recv(4096):
                out += chunk
            return out
        except OSError:
            return b""


def _wanted(data: bytes) -> str | None:
    """The session id a well-formed request in `data` names, as the protocol defines one."""
    line, newline, _ = data.partition(b"\n")
    if not newline or len(line) + 1 > handover.MAX_LINE:
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if isinstance(value, dict) and set(value) == {"release"} and isinstance(value["release"], str):
        return value["release"]
    return None


def test_the_holder_releases_what_is_asked_and_says_so(served: tuple[bytes, _Holder, BlockingPortal]) -> None:
    path, holder, _ = served
    assert path == f"\0ama-handover/{os.getuid()}/{os.getpid()}".encode()  # abstract: no file, the uid in the name
    assert ask_release(os.getpid(), "ses_held") == "released"
    assert ask_release(os.getpid(), "ses_other") == "not-held"
    assert holder.asked == [("ses_held", os.getpid()), ("ses_other", os.getpid())]  # the asker's pid, from the kernel


hostile = hs.one_of(
    hs.binary(max_size=600),
    hs.builds(lambda v: json.dumps(v).encode() + b"\n", hs.dictionaries(hs.text(max_size=8), hs.text(max_size=40))),
    hs.builds(lambda s: json.dumps({"release": s}).encode() + b"\n", hs.text(max_size=300)),
)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile)
def test_hostile_bytes_get_no_answer_unless_they_are_a_request(
    served: tuple[bytes, _Holder, BlockingPortal], data: bytes
) -> None:
    path, holder, _ = served
    before = len(holder.asked)
    answer = _poke(path, data)
    wanted = _wanted(data)
    if wanted is None:
        assert answer == b"" and len(holder.asked) == before
    else:
        assert holder.asked[before:] == [(wanted, os.getpid())]
        assert answer == (b'{"answer":"released"}\n' if wanted == "ses_held" else b'{"answer":"not-held"}\n')


def test_a_flood_of_silent_askers_is_hung_up_on_and_then_served(
    served: tuple[bytes, _Holder, BlockingPortal],
) -> None:
    path, holder, _ = served
    silent = [socket.socket(socket.AF_UNIX) for _ in range(handover.MAX_ASKERS + 8)]
    try:
        for sock in silent:
            sock.connect(path)
        # Past the few served at once, the rest are hung up on at once; the served ones at READ_SECONDS.
        for sock in silent:
            sock.settimeout(handover.READ_SECONDS + 8)
            assert sock.recv(64) == b""
    finally:
        for sock in silent:
            sock.close()
    assert holder.asked == []
    assert ask_release(os.getpid(), "ses_held") == "released"


def test_the_asker_believes_only_the_holder() -> None:
    """A socket under the holder's name bound by another process (here: this one) is not asked."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with socket.socket(socket.AF_UNIX) as squatter:
            squatter.bind(address(child.pid))
            squatter.listen()
            assert ask_release(child.pid, "ses_held") is None
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def test_no_socket_no_answer_and_a_name_taken_is_no_listener() -> None:
    assert ask_release(os.getpid(), "ses_held") is None  # nothing listens under this process's name
    first = Listener()
    first.open()
    try:
        with pytest.raises(OSError):  # the name is taken (here by the first): no second listener, no handover
            Listener().open()
    finally:
        first.close()
    assert ask_release(os.getpid(), "ses_held") is None


def test_the_turn_mark_shows_in_the_lock_table(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    fd = os.open(path, os.O_RDWR)
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
        info = os.fstat(fd)
        key = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
        mark_turn(fd, True)
        os.close(os.open(path, os.O_RDONLY))  # another open and close here does not drop it (a POSIX lock would)
        flocks, turns = lock_table()
        assert flocks[key] == os.getpid() and key in turns
        mark_turn(fd, False)
        assert key not in lock_table()[1]
    finally:
        os.close(fd)
    assert TURN_BYTE > 1 << 40 and struct.calcsize("q") == 8


def test_serve_ends_when_cancelled() -> None:
    async def main() -> None:
        listener = Listener()
        listener.open()
        with anyio.move_on_after(0.2):
            await listener.serve(_Holder().decide)

    anyio.run(main)
    with socket.socket(socket.AF_UNIX) as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(address(os.getpid()))  # closed with the serving: the name is free for the next process


def test_a_process_with_no_new_privs_or_gone_counts_as_confined() -> None:
    from ama_acp.session.store.handover import confined

    assert not confined(os.getpid())  # this test run: no sandbox
    code = "import ctypes, sys; ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); print('set', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"set\n"
        assert confined(child.pid)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    assert confined(child.pid)  # gone (reaped): no answer is the safe side
