"""tests/support/temp_leftovers.py: the test process's own temp dir, and what a test leaves in it. A name that
appears during a test and is still there at the end is reported with that test; one removed by then, or owned by
a process that removes it at exit, or a library's cache, is not; this process's temp dir is the watched one."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

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
