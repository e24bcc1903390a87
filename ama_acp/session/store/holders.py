"""Which sessions other ama processes hold, and whether a turn is running in them, from one read of Linux's
/proc/locks: session/list marks them without asking anyone (docs/sessions.md "Sessions open elsewhere").

A holder has two locks on its session file: the writer's `flock` (held while the session is open: locks.py) and,
while a turn runs, an open-file-description lock on one byte far past any content (`mark_turn`). Neither can
outlive its process, so a mark is never stale; the OFD lock is tied to the writer's descriptor, so no other
open or close of the file in the holder (a listing scanning it) can drop it, as a POSIX lock would be dropped.
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

import msgspec

_PROC_LOCKS = Path("/proc/locks")
_LIMIT = 1 << 20  # thousands of locks fit; a bigger table is read no further (its tail goes unmarked)
# The byte the turn lock covers: past any session file (their lines are capped far below), so it locks nothing
# a reader or writer touches, and /proc/locks names it exactly.
TURN_BYTE = 1 << 62


class Holder(msgspec.Struct, frozen=True):
    """A session file's holder: its pid and whether a turn is running there."""

    pid: int
    busy: bool


def mark_turn(fd: int, running: bool) -> None:
    """The turn lock on the open session file `fd` taken (`running`) or released. Never waits; a file system
    that cannot lock leaves the session unmarked (listed as idle), which costs a loader one question."""
    kind = fcntl.F_WRLCK if running else fcntl.F_UNLCK
    # struct flock: l_type, l_whence (short each), l_start, l_len (off_t), l_pid (0 for OFD locks)
    lock = struct.pack("hhqqi", kind, os.SEEK_SET, TURN_BYTE, 1, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock)
    except OSError:
        pass


def _locks() -> bytes:
    try:
        with open(_PROC_LOCKS, "rb") as f:
            return f.read(_LIMIT)
    except OSError:
        return b""


def _file_key(field: bytes) -> tuple[int, int, int] | None:
    try:
        major, minor, inode = field.split(b":")
        return int(major, 16), int(minor, 16), int(inode)
    except ValueError:
        return None


def lock_table() -> tuple[dict[tuple[int, int, int], int], set[tuple[int, int, int]]]:
    """From /proc/locks: each flocked file's (device major, minor, inode) → the holder's pid, and the files
    with a turn lock. Lines read `1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF` and `2: OFDLCK ADVISORY
    WRITE -1 08:01:1234567 4611686018427387904 4611686018427387904`; waiting requests (`1: -> FLOCK …`) are
    not holders."""
    flocks: dict[tuple[int, int, int], int] = {}
    turns: set[tuple[int, int, int]] = set()
    for line in _locks().splitlines():
        fields = line.split()
        if len(fields) < 8 or fields[3] != b"WRITE":
            continue
        key = _file_key(fields[5])
        if key is None:
            continue
        if fields[1] == b"FLOCK":
            try:
                flocks[key] = int(fields[4])
            except ValueError:
                continue
        elif fields[1] == b"OFDLCK" and fields[6] == str(TURN_BYTE).encode():
            turns.add(key)
    return flocks, turns


def held_elsewhere(paths: dict[str, Path]) -> dict[str, Holder]:
    """Of the session files `paths` (session id → path), those another process holds, with their holder.
    One read of /proc/locks; a file is looked at (one lstat) only when some flock lies on its folder's
    device, so a listing with nothing held elsewhere costs that one read."""
    flocks, turns = lock_table()
    if not flocks or not paths:
        return {}
    devices = {key[:2] for key in flocks}
    me = os.getpid()
    out: dict[str, Holder] = {}
    for session_id, path in paths.items():
        try:
            info = os.lstat(path)
        except OSError:
            continue
        dev = (os.major(info.st_dev), os.minor(info.st_dev))
        if dev not in devices:
            continue
        key = (*dev, info.st_ino)
        pid = flocks.get(key)
        if pid is not None and pid != me:
            out[session_id] = Holder(pid, key in turns)
    return out
