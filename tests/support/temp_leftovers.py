"""What the tests leave in the temp dir: a folder of the test process's own, watched around every test.

tests/conftest.py points TMPDIR (and `tempfile`) at a new folder inside the machine's temp dir before anything
else runs, so whatever a test, ama in the test process, or a process the test starts with the test process's
environment puts in "the temp dir" lands there. After each test the names that appeared during it are noted with
the test's id; at the end of the run whatever is still there is a leftover, reported with the test it appeared
in (a killed run's `TemporaryDirectory`, a module-level `mkdtemp`, a library's cache in /tmp). The folder is
removed when the process exits, so a reported leftover does not pile up in /tmp.

pytest's own `tmp_path` folders stay where they were (PYTEST_DEBUG_TEMPROOT, pytest's name for its root), kept
for a look after a failure as pytest keeps them. multiprocessing's own folder (`pymp-*`, its forkserver's socket)
lives as long as the process and is removed by multiprocessing at exit, and an xdist worker's folder (inside the
controller's) is checked by that worker and removed at its exit: neither is a leftover; nor is tiktoken's cache.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_PREFIX = "ama-tests-"
_OWNED_BY_A_PROCESS = ("pymp-", _PREFIX)  # removed at exit by the process that made them, after the run's end
# A library's cache, kept on purpose from run to run: tiktoken's checked copy of its encoding file (docs/context.md).
_CACHES = ("data-gym-cache",)


class TempWatch:
    """The test process's temp dir, and which test made each name that appeared in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made_by: dict[str, str] = {}
        self._before: set[str] = set()

    @classmethod
    def start(cls) -> TempWatch:
        """Make the folder (inside the temp dir in force now: under pytest-xdist a worker's is inside the
        controller's), point TMPDIR and `tempfile` at it, and remove it at this process's exit."""
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
        root = Path(tempfile.mkdtemp(prefix=_PREFIX))
        os.environ["TMPDIR"] = str(root)
        tempfile.tempdir = None  # found again from TMPDIR at the next call
        # Registered now, before multiprocessing or anything else registers its own: atexit runs last-in first-out,
        # so this runs after their clean-ups.
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        return cls(root)

    def _names(self) -> set[str]:
        try:
            return set(os.listdir(self.root))
        except OSError:
            return set()

    def before_test(self) -> None:
        self._before = self._names()

    def after_test(self, nodeid: str) -> None:
        for name in self._names() - self._before:
            self._made_by.setdefault(name, nodeid)

    def leftovers(self) -> list[str]:
        """What is still in the folder, each with the test it appeared in ("outside any test": collection, a
        module's import, a fixture's teardown after the last test)."""
        return [
            f"{self.root / name} (from {self._made_by.get(name, 'outside any test')})"
            for name in sorted(self._names())
            if not name.startswith(_OWNED_BY_A_PROCESS) and name not in _CACHES
        ]
