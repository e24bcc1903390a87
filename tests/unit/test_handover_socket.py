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

from ama_acp.ownfiles import OwnFileRefused
from ama_acp.session.store import handover
from ama_acp.session.store.handover import Answer, Listener, ask_release
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
def served(tmp_path: Path) -> Iterator[tuple[Path, _Holder, BlockingPortal]]:
    data = tmp_path / "data"
    holder = _Holder()
    listener = Listener(data)
    listener.open()
    with start_blocking_portal() as portal:
        task = portal.start_task_soon(listener.serve, holder.decide)
        try:
            yield data, holder, portal
        finally:
            task.cancel()
    assert not (data / "run" / f"{os.getpid()}.sock").exists()  # removed when the serving ends


def _poke(path: Path, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
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


def test_the_holder_releases_what_is_asked_and_says_so(served: tuple[Path, _Holder, BlockingPortal]) -> None:
    data, holder, _ = served
    path = data / "run" / f"{os.getpid()}.sock"
    assert path.is_socket() and path.stat().st_mode & 0o777 == 0o600
    assert (data / "run").stat().st_mode & 0o777 == 0o700
    assert ask_release(data, os.getpid(), "ses_held") == "released"
    assert ask_release(data, os.getpid(), "ses_other") == "not-held"
    assert holder.asked == [("ses_held", os.getpid()), ("ses_other", os.getpid())]  # the asker's pid, from the kernel


hostile = hs.one_of(
    hs.binary(max_size=600),
    hs.builds(lambda v: json.dumps(v).encode() + b"\n", hs.dictionaries(hs.text(max_size=8), hs.text(max_size=40))),
    hs.builds(lambda s: json.dumps({"release": s}).encode() + b"\n", hs.text(max_size=300)),
)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=hostile)
def test_hostile_bytes_get_no_answer_unless_they_are_a_request(
    served: tuple[Path, _Holder, BlockingPortal], data: bytes
) -> None:
    root, holder, _ = served
    before = len(holder.asked)
    answer = _poke(root / "run" / f"{os.getpid()}.sock", data)
    wanted = _wanted(data)
    if wanted is None:
        assert answer == b"" and len(holder.asked) == before
    else:
        assert holder.asked[before:] == [(wanted, os.getpid())]
        assert answer == (b'{"answer":"released"}\n' if wanted == "ses_held" else b'{"answer":"not-held"}\n')


def test_a_flood_of_silent_askers_is_hung_up_on_and_then_served(
    served: tuple[Path, _Holder, BlockingPortal],
) -> None:
    data, holder, _ = served
    path = data / "run" / f"{os.getpid()}.sock"
    silent = [socket.socket(socket.AF_UNIX) for _ in range(handover.MAX_ASKERS + 8)]
    try:
        for sock in silent:
            sock.connect(str(path))
        # Past the few served at once, the rest are hung up on at once; the served ones at READ_SECONDS.
        for sock in silent:
            sock.settimeout(handover.READ_SECONDS + 8)
            assert sock.recv(64) == b""
    finally:
        for sock in silent:
            sock.close()
    assert holder.asked == []
    assert ask_release(data, os.getpid(), "ses_held") == "released"


def test_the_asker_believes_only_the_holder(tmp_path: Path) -> None:
    """A socket under the holder's name bound by another process (here: this one) is not asked."""
    data = tmp_path / "data"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        run = data / "run"
        run.mkdir(parents=True, mode=0o700)
        with socket.socket(socket.AF_UNIX) as squatter:
            squatter.bind(str(run / f"{child.pid}.sock"))
            squatter.listen()
            assert ask_release(data, child.pid, "ses_held") is None
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def test_no_socket_no_answer_and_a_linked_folder_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert ask_release(data, os.getpid(), "ses_held") is None  # no run folder at all
    data.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / "run").symlink_to(elsewhere)
    with pytest.raises(OwnFileRefused):
        Listener(data).open()
    assert ask_release(data, os.getpid(), "ses_held") is None
    assert list(elsewhere.iterdir()) == []


def test_a_dead_processes_socket_is_swept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    run = data / "run"
    run.mkdir(parents=True, mode=0o700)
    (run / f"{child.pid}.sock").write_bytes(b"")
    listener = Listener(data)
    listener.open()
    try:
        assert not (run / f"{child.pid}.sock").exists()
    finally:
        listener.close()


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


def test_serve_ends_when_cancelled(tmp_path: Path) -> None:
    async def main() -> None:
        listener = Listener(tmp_path)
        listener.open()
        with anyio.move_on_after(0.2):
            await listener.serve(_Holder().decide)

    anyio.run(main)
    assert list((tmp_path / "run").iterdir()) == []
