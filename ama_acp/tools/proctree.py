"""Finding every process a command started, including the ones that left its process group.

A command runs in a process group of its own, and killing the group ends most of what it started. But
`setsid cmd &`, a daemonizing server or `nohup` moves a process into a session of its own, out of reach of
that kill, and it would outlive the turn and ama itself. Each command therefore carries a marker in its
environment (`AMA_RUN_ID=<uuid>`), which children inherit through fork and exec (unless a program goes out
of its way to scrub its environment); at the end every live process whose /proc/<pid>/environ holds the
marker is signalled too. Linux only; elsewhere only the process group is reached.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import uuid

MARKER_VAR = "AMA_RUN_ID"


def new_marker() -> str:
    return uuid.uuid4().hex


def proc_pids() -> list[str] | None:
    """The process ids /proc lists; None when it cannot be read."""
    try:
        return [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None


def stat_fields(pid: str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat from the state on (state, ppid, pgrp, ...); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The state follows the command name, which may hold spaces and parentheses: look after the last ')'.
    return stat[stat.rfind(b")") + 2 :].split()


def _live(pid: str) -> bool:
    fields = stat_fields(pid)
    if not fields:
        return False
    return fields[0] not in (b"Z", b"X")  # zombies hold nothing; they only wait to be reaped


def marked_pids(marker: str) -> list[int]:
    """Live processes whose environment carries `AMA_RUN_ID=<marker>`."""
    needle = f"{MARKER_VAR}={marker}".encode()
    me = os.getpid()
    pids = proc_pids()
    if pids is None:
        return []
    found: list[int] = []
    for pid in pids:
        if int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone meanwhile, or another user's process: not ours either way
            continue
        if needle in env.split(b"\0") and _live(pid):
            found.append(int(pid))
    return found


def signal_marked(marker: str, sig: int = signal.SIGKILL) -> int:
    """Send `sig` to every live marked process; returns how many were signalled."""
    pids = marked_pids(marker)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process remains in the group. Zombies count as gone: when the
    container's init never reaps, they linger forever but hold nothing."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    pids = proc_pids()
    if pids is None:
        return True
    return any(_live_in_group(pid, pgid) for pid in pids)


def _live_in_group(pid: str, pgid: int) -> bool:
    """Whether the process `pid` (still there) is in the group and not a zombie."""
    fields = stat_fields(pid)
    return fields is not None and len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z"


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
