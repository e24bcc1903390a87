"""What a test may not leave behind: processes, threads, and unexpected exceptions in ama's logs.

Used by tests/conftest.py around every test (processes, logs) and at the end of the run (threads). A leak
is polled for with a deadline before it counts: a process that is exiting, or a thread finishing its last
line, is not a leak.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from tests.support.waiting import holds_within

# Every exception ama did not expect is logged with its traceback; expected failures never are. One in any
# log a test produced means some input reached a path nobody handled.
TRACEBACK = "Traceback (most recent call last)"

# Logs ama writes in tests: its log file, and the stderr the harnesses capture.
LOG_NAMES = ("ama.log",)
LOG_SUFFIXES = (".log", ".err", ".stderr")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(1 << 16)
    except OSError:
        return b""


def processes_mentioning(
    needle: str, *, exclude: Iterable[int] = (), born_after: int | None = None
) -> list[tuple[int, str]]:
    """Live processes whose command line, working directory or environment names `needle` (a test's
    tmp_path): whatever the test started, including children that left its process group (setsid).
    `born_after` (clock ticks since boot, as `boot_ticks` gives): the processes started before it are not looked
    at — one that existed before `needle` did cannot have been started naming it."""
    skip = {os.getpid(), *exclude}
    found: list[tuple[int, str]] = []
    for pid, cmdline in _live_processes(born_after):
        if pid in skip:
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        if needle in cmdline or needle in cwd or needle.encode() in _read(f"/proc/{pid}/environ"):
            found.append((pid, cmdline.strip()))
    return found


def processes_with_cmdline(text: str) -> list[str]:
    """Command lines of the live (not zombie) processes whose command line contains `text`."""
    return [cmd for _, cmd in _live_processes() if text in cmd]


def stat_fields(pid: int | str) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command name (which may hold anything, parentheses and spaces
    included): [state, ppid, pgrp, …]; index i is field i + 3 of proc(5). Empty for a process that is gone."""
    return _read(f"/proc/{pid}/stat").rsplit(b")", 1)[-1].split()


STARTTIME = 19  # in stat_fields: field 22, the start in clock ticks since boot
UTIME, STIME = 11, 12  # fields 14 and 15: CPU time in user and kernel mode, in clock ticks


def boot_ticks(wall: float) -> int:
    """A wall-clock time (time.time()) in the unit of a process's start time in /proc/<pid>/stat: clock ticks
    since the machine booted."""
    with open("/proc/uptime", "rb") as fh:
        up = float(fh.read().split()[0])
    return int((wall - (time.time() - up)) * CLK_TCK)


def _live_processes(born_after: int | None = None) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields(name)
        if not fields or fields[0] == b"Z":
            continue
        if born_after is not None and len(fields) > STARTTIME and int(fields[STARTTIME]) < born_after:
            continue
        found.append((int(name), _read(f"/proc/{name}/cmdline").replace(b"\0", b" ").decode(errors="replace")))
    return found


def leftover_processes(tmp_path: Path, seconds: float = 5.0, *, since: float | None = None) -> list[tuple[int, str]]:
    """The processes still naming `tmp_path` after `seconds`; they are killed so the run can go on. `since`: a
    wall-clock time from before `tmp_path` existed (the test's start; not the folder's ctime, which every file made
    in it moves on): only processes started after it, less a second for the clocks' rounding, are looked at."""
    needle = str(tmp_path)
    born_after = None if since is None else boot_ticks(since - 1.0)
    left: list[tuple[int, str]] = []

    def gone() -> bool:
        left[:] = processes_mentioning(needle, born_after=born_after)
        return not left

    if holds_within(gone, seconds, interval=0.05):
        return []
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


def tracebacks_in_logs(root: Path) -> list[tuple[Path, str]]:
    """(log file, the lines around the first traceback) for every log below `root` that holds one."""
    hits: list[tuple[Path, str]] = []
    if not root.is_dir():
        return hits
    for path in root.rglob("*"):
        if not (path.name in LOG_NAMES or path.name.endswith(LOG_SUFFIXES)) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        at = text.find(TRACEBACK)
        if at != -1:
            start = text.rfind("\n", 0, max(0, at - 1))
            hits.append((path, text[start + 1 : at + 1500]))
    return hits


def leftover_threads(seconds: float = 10.0) -> list[threading.Thread]:
    """Threads besides the main one still alive after `seconds`."""
    main = threading.main_thread()
    left: list[threading.Thread] = []

    def gone() -> bool:
        left[:] = [t for t in threading.enumerate() if t is not main and t.is_alive()]
        return not left

    holds_within(gone, seconds, interval=0.05)
    return left
