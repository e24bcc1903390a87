"""tests/support/temp_leftovers.py: the test process's own temp dir, and what a test leaves in it. A name that
appears during a test and is still there at the end is reported with that test; one removed by then, or owned by
a process that removes it at exit, or a library's cache, is not; this process's temp dir is the watched one; and a
run whose test leaves a folder fails, naming the test, serially and under pytest-xdist."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.temp_leftovers import TempWatch


def test_a_name_left_by_a_test_is_reported_with_that_test(tmp_path: Path) -> None:
    watch = TempWatch(tmp_path)
    (tmp_path / "before-any-test").mkdir()
    watch.before_test()
    (tmp_path / "made-by-a").mkdir()
    watch.after_test("test_a")
    watch.before_test()
    (tmp_path / "made-by-b").write_text("x")
    (tmp_path / "made-by-a").rmdir()  # b removed what a left: nothing of a's is left at the end
    watch.after_test("test_b")
    assert watch.leftovers() == [
        f"{tmp_path / 'before-any-test'} (from outside any test)",
        f"{tmp_path / 'made-by-b'} (from test_b)",
    ]


def test_a_name_made_again_by_a_later_test_keeps_its_first_test(tmp_path: Path) -> None:
    watch = TempWatch(tmp_path)
    for test in ("test_a", "test_b"):
        watch.before_test()
        (tmp_path / "cache").mkdir(exist_ok=True)
        watch.after_test(test)
    assert watch.leftovers() == [f"{tmp_path / 'cache'} (from test_a)"]


def test_what_its_owner_removes_at_exit_and_a_librarys_cache_are_not_leftovers(tmp_path: Path) -> None:
    watch = TempWatch(tmp_path)
    watch.before_test()
    for name in ("pymp-abc123", "ama-tests-worker", "data-gym-cache"):
        (tmp_path / name).mkdir()
    watch.after_test("test_a")
    assert watch.leftovers() == []


def test_this_process_writes_its_temporary_files_into_its_own_folder(tmp_path: Path) -> None:
    own = Path(tempfile.gettempdir())
    assert own.name.startswith("ama-tests-") and os.environ["TMPDIR"] == str(own)
    assert not tmp_path.is_relative_to(own)  # pytest's folders stay where they were, kept for a look
    # A process started with this environment finds the same temp dir.
    child = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert child.stdout.strip() == str(own)


def test_the_folder_goes_away_with_its_process(tmp_path: Path) -> None:
    code = (
        "import sys, tempfile; sys.path.insert(0, sys.argv[1])\n"
        "from tests.support.temp_leftovers import TempWatch\n"
        "watch = TempWatch.start()\n"
        "open(tempfile.mkstemp()[1], 'w').close()\n"
        "print(watch.root, watch.leftovers()[0].startswith(str(watch.root)))\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("PYTEST_DEBUG_TEMPROOT")
    out = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True, env=env, timeout=60
    )
    folder, left_reported = out.stdout.split()
    assert Path(folder).parent == tmp_path and left_reported == "True"  # the file made was a leftover, named
    assert not Path(folder).exists() and list(tmp_path.iterdir()) == []  # removed at exit, leftovers and all


PLANTED_IN = (
    "tests/unit/test_temp_leftovers.py::test_what_its_owner_removes_at_exit_and_a_librarys_cache_are_not_leftovers"
)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_whose_test_leaves_a_folder_fails_and_names_the_test(workers: str) -> None:
    """The whole check, in a run of its own: serially, and under pytest-xdist, where the worker hands what it found
    to the controller. The run passes its test and still fails."""
    root = Path(__file__).resolve().parents[2]
    plugins = ["-p", "tests.support.temp_plant", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", workers, *plugins, PLANTED_IN],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout
    report = next(line for line in run.stdout.splitlines() if line.startswith("left in the temp dir after the tests:"))
    assert "/planted-" in report and f"(from {PLANTED_IN})" in report
    assert (" on worker gw" in report) == (workers == "2")  # whichever worker ran it
