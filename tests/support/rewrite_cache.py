"""pytest's cache of rewritten modules, kept and filled ahead (used by tests/conftest.py only).

pytest rewrites the asserts of every test module (and conftest) it imports, and of its plugins' packages, and keeps
the result beside the module in `__pycache__` as a checked-hash pyc: a source edited later is rewritten again, so a
file written ahead is never stale. Rewriting is slow: ~27 ms of CPU a test module, 5.8 s for the suite's 215, against
0.55 s to compile the same files plainly. Two things go wrong without this module:

- where PYTHONDONTWRITEBYTECODE is set (this project's machine, many container images) nothing is ever kept, so every
  run, and every xdist worker, rewrites all of them again;
- in a fresh clone, the xdist workers start together and each rewrites all of them, side by side: three workers
  spent ~17 s of CPU where ~6 would do.

Both are optimisations through pytest's internals: if those change, each says so on stderr and the run goes on
rewriting as pytest does by itself.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path
from typing import Any


def keep_rewritten_modules() -> None:
    """Turn bytecode writing back on for this process (the ama subprocesses keep the variable; the files are
    git-ignored), and write the modules pytest rewrote before conftest ran (the plugins it loads at start, the
    conftest itself) once now, so that the next process, a worker or the next run, reads them. Called first thing
    in conftest, before hypothesis is imported."""
    if not sys.dont_write_bytecode:
        return
    sys.dont_write_bytecode = False
    try:
        from _pytest.assertion import rewrite

        hook = next(f for f in sys.meta_path if isinstance(f, rewrite.AssertionRewritingHook))
        for path in list(hook._rewritten_names.values()):
            _write_rewritten(path, hook.config, rewrite)
    except Exception as exc:  # an optimisation only: said, and the run goes on without it
        sys.stderr.write(
            f"conftest: the plugins' rewritten modules were not cached ({exc!r}); each run rewrites them\n"
        )


def rewrite_test_modules_ahead(config: Any, root: Path, cores: int) -> None:
    """In the controller of an xdist run, before its workers start: rewrite every test module under `root` whose
    rewritten pyc is missing, split over `cores` forked processes, so that each worker reads the cache instead of
    rewriting the suite itself. Costs nothing when the cache is warm (a stat a file)."""
    try:
        from _pytest.assertion import rewrite

        patterns = [*config.getini("python_files"), "conftest.py"]
        todo = [
            path
            for path in sorted(root.rglob("*.py"))
            if "__pycache__" not in path.parts
            and any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns)
            and not pyc_of(path).exists()
        ]
    except Exception as exc:  # an optimisation only, as above
        sys.stderr.write(f"conftest: test modules not rewritten ahead ({exc!r}); each worker rewrites them\n")
        return
    if not hasattr(os, "fork"):  # no fork (Windows): this process rewrites them all
        cores = 1
    shares = [todo[i::cores] for i in range(max(1, min(cores, len(todo))))]
    children = []
    for share in shares[1:]:
        pid = os.fork()
        if pid == 0:  # the child: its share, then out without running any of the parent's exit handlers
            code = 0
            try:
                for path in share:
                    _write_rewritten(path, config, rewrite)
            except BaseException:  # a worker rewrites whatever is missing; nothing to report here
                code = 1
            finally:
                os._exit(code)
        children.append(pid)
    try:
        for path in shares[0]:
            _write_rewritten(path, config, rewrite)
    except Exception as exc:  # an optimisation only, as above
        sys.stderr.write(f"conftest: test modules not rewritten ahead ({exc!r}); each worker rewrites them\n")
    finally:
        for pid in children:
            os.waitpid(pid, 0)


def pyc_of(path: Path) -> Path:
    """Where pytest keeps the rewritten `path` (and reads it from)."""
    from _pytest.assertion import rewrite

    return rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)


def _write_rewritten(path: Path, config: Any, rewrite: Any) -> None:
    """Rewrite one module and write its pyc where pytest looks for it (atomically, as pytest does: a concurrent
    worker reads either nothing or the whole file). A module that does not parse is left to pytest, which reports
    it where it belongs, in the collection."""
    pyc = pyc_of(path)
    if pyc.exists() or not rewrite.try_makedirs(pyc.parent):
        return
    try:
        source_hash, code = rewrite._rewrite_test(path, config)
    except SyntaxError:
        return
    rewrite._write_pyc(config.stash[rewrite.assertstate_key], code, source_hash, pyc)
