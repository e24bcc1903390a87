"""Ending everything an agent left running: its whole process group, TERM, a grace, then KILL. Used where ama
runs other people's agents: the conformance suite (conformance/core/agent.py) and an external agent that carries
out a task (session/tasks/external/agent.py).

Each agent is started as the leader of a process group of its own (`start_new_session`), so the MCP servers,
shells and relaunched children it starts belong to that group unless they left it on purpose (setsid). Closing
the agent ends only the leader; this ends the rest. A group is alive while a process that is not a zombie has
that group id: a zombie has already ended, and whether it is reaped is up to its parent (or init), not us.
"""

from __future__ import annotations

import os
import signal
import time

import anyio

TERM_GRACE = 2.0  # seconds the group's processes have to exit after SIGTERM before SIGKILL
_POLL = 0.05


def _members_proc(pgid: int) -> list[int] | None:
    """The live (non-zombie) processes of group `pgid`, read from /proc; None where there is no /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read(4096)
        except OSError:
            continue  # ended while we looked
        # pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) >= 3 and fields[0] != b"Z" and fields[2] == str(pgid).encode():
            found.append(int(name))
    return found


def alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (not counting zombies)."""
    members = _members_proc(pgid)
    if members is not None:
        return bool(members)
    try:  # no /proc (macOS, BSD): signal 0 tells whether the group has members, zombies included
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _gone(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pgid):
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(_POLL)
    return True


async def end_group(pgid: int | None, grace: float = TERM_GRACE) -> str | None:
    """End every process left in group `pgid` (TERM, `grace` seconds, KILL). Returns what it took — None when
    nothing was left (or no group is known), "terminated" or "killed" — for the record."""
    if pgid is None or os.name != "posix" or pgid <= 1 or pgid == os.getpgrp() or not alive(pgid):
        return None  # never signal our own group (an agent started without a session of its own)
    if not _signal(pgid, signal.SIGTERM):
        return None  # it ended between the look and the signal
    if await _gone(pgid, grace):
        return "terminated"
    _signal(pgid, signal.SIGKILL)
    await _gone(pgid, grace)
    return "killed"
