"""tests/support/leaks.py, the check run after every test with a tmp_path: a process the test left is found
(its command line, its working directory or its environment naming the folder), one started before the folder
existed is not looked at, and a process that is ending is not a leak."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import leaks

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@contextmanager
def sleeping(
    *extra: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A process that sleeps a minute, killed at the end whatever the test found."""
    proc = subprocess.Popen([*SLEEPER, *extra], cwd=cwd, env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("how", ["cwd", "env", "argv"])
def test_a_process_naming_the_folder_is_found_and_killed(tmp_path: Path, how: str) -> None:
    kwargs: dict[str, Any] = {}  # subprocess.Popen's keyword arguments
    extra: list[str] = []
    if how == "cwd":
        kwargs["cwd"] = tmp_path
    elif how == "env":
        kwargs["env"] = {**os.environ, "SOME_DIR": str(tmp_path)}
    else:
        extra.append(str(tmp_path))
    since = time.time()
    with sleeping(*extra, **kwargs) as proc:
        found = leaks.leftover_processes(tmp_path, seconds=0.2, since=since)
        assert [pid for pid, _ in found] == [proc.pid]
        assert proc.wait(timeout=10) == -9  # killed, so the run goes on


def test_a_process_started_before_the_folder_existed_is_not_looked_at(tmp_path: Path) -> None:
    with sleeping(cwd=tmp_path) as before:
        started = _started(before.pid)
        assert abs(leaks.boot_ticks(started) - _start_ticks(before.pid)) <= 1  # the same clock, in ticks
        mentioning = [pid for pid, _ in leaks.processes_mentioning(str(tmp_path), born_after=_start_ticks(before.pid))]
        assert before.pid in mentioning  # born at that tick: looked at
        later = leaks.boot_ticks(started + 2.0)  # a folder born two seconds after the process
        assert before.pid not in [pid for pid, _ in leaks.processes_mentioning(str(tmp_path), born_after=later)]


def test_the_check_after_a_test_leaves_a_process_older_than_the_test_alone(tmp_path: Path) -> None:
    with sleeping(cwd=tmp_path) as older:
        since = _started(older.pid) + 2.0  # as if the test had begun two seconds after it
        assert leaks.leftover_processes(tmp_path, seconds=0.2, since=since) == []
        assert older.poll() is None  # not looked at, so not killed
        assert [pid for pid, _ in leaks.leftover_processes(tmp_path, seconds=0.2)] == [older.pid]


def test_a_process_that_ends_within_the_grace_is_not_a_leak(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"], cwd=tmp_path)
    try:
        assert leaks.leftover_processes(tmp_path, seconds=10) == []
    finally:
        proc.wait()


def _start_ticks(pid: int) -> int:
    return int(leaks.stat_fields(pid)[leaks.STARTTIME])


def _started(pid: int) -> float:
    """A process's start as a wall-clock time."""
    up = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - up + _start_ticks(pid) / leaks.CLK_TCK
