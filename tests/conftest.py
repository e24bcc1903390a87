"""Shared pytest fixtures for ama's tests."""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

    from ama_conformance.schema.validate import WireValidator
    from tests.support.temp_leftovers import TempWatch

# Make `tests.support...` importable however pytest is invoked (`pytest`, `python -m pytest`, from any cwd).
_REPO_ROOT = str(Path(__file__).resolve().parent.parent)
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)


def _start_watching_the_temp_dir() -> TempWatch:
    """A temp dir of this process's own, for everything the tests put in "the temp dir", watched around each test
    (tests/support/temp_leftovers.py). First thing, before anything makes a temporary file."""
    from tests.support.temp_leftovers import TempWatch

    return TempWatch.start()


_temp_watch = _start_watching_the_temp_dir()


def _keep_rewritten_test_modules() -> None:
    """pytest's rewritten modules are kept in __pycache__ even where PYTHONDONTWRITEBYTECODE is set (without it every
    run and every xdist worker rewrote them all again: ~12 s of CPU of a 16 s collection). First thing, before
    hypothesis is imported below (tests/support/rewrite_cache.py)."""
    from tests.support import rewrite_cache

    rewrite_cache.keep_rewritten_modules()


_keep_rewritten_test_modules()


def _put_scripts_dir_first_on_path() -> None:
    """The test dependency `ripgrep` installs its `rg` binary into this interpreter's scripts directory
    (`.venv/bin`), which is not on PATH when the suite runs as `.venv/bin/python -m pytest` without an
    activated venv. Put that directory first, for this process and the ama subprocesses it starts, so the
    search tool's rg path is what the tests exercise. Done at import, before test modules read PATH."""
    scripts = sysconfig.get_path("scripts")
    if not scripts or not (Path(scripts) / "rg").is_file():
        return  # no bundled rg: the rg tests say they are skipped, nothing else changes
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != scripts]
    os.environ["PATH"] = os.pathsep.join([scripts, *parts])


_put_scripts_dir_first_on_path()


def _load_hypothesis_profile() -> None:
    """One hypothesis profile for the run, named by HYPOTHESIS_PROFILE (`ci` on CI: the full counts; `dev`
    elsewhere: a quarter of them). Loaded before any test module is imported, as their counts are read then
    (tests/support/hypothesis_profiles.py)."""
    from tests.support import hypothesis_profiles

    hypothesis_profiles.load()


_load_hypothesis_profile()


def _compile_ama_once() -> None:
    """Most tests start `ama --mode acp` as a subprocess. Where PYTHONDONTWRITEBYTECODE is set (this project's
    machine, many container images) no process ever writes ama's compiled modules, so each of those hundreds
    of processes compiles ~90 modules again: ~150 ms a start. Compile them once here (compileall writes
    regardless of that variable; the files are git-ignored, and a source edited later is recompiled by
    Python as usual). Where the variable is not set, the first process would have written them anyway."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    import compileall

    compileall.compile_dir(str(Path(_REPO_ROOT) / "ama_acp"), quiet=2)


_compile_ama_once()


# Workers for a run of the whole suite (pytest-xdist): one more than the cores this process may use. Many tests
# spend part of their time waiting (on ama processes, model servers, pipes, a timeout under test), and a third
# worker on a 2-core machine runs while the others wait: at CI's counts 191 s on two workers, 153 s on three, 147 s
# on four, the same tests passing (docs/performance.md).
def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


CORES = _cores()
WORKERS = max(2, CORES + 1)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, int | pytest.ExitCode, int | pytest.ExitCode]:
    """The whole suite (`python -m pytest`, no paths named: the README's command and CI's) runs on WORKERS
    pytest-xdist workers; a run of chosen files or tests stays in one process, where starting workers would cost
    more than it saves, and so does a run with --pdb (which needs one process). `-n N` chooses for any run
    (`-n 0`: serial), and `-p no:xdist` turns the plugin off.
    Either way the tests of one file share a worker (`--dist loadfile`, decided by the controller alone), so a
    module fixture that starts many processes (the conformance matrix, the fuzzers' worlds) runs once."""
    if config.pluginmanager.has_plugin("xdist") and not hasattr(config, "workerinput"):
        whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
        if config.option.numprocesses is None and whole_suite and not config.getoption("usepdb"):
            config.option.numprocesses = WORKERS
        if config.option.numprocesses and config.getoption("assertmode") == "rewrite":
            # The workers collect side by side; the test modules they would each rewrite are rewritten here once.
            from tests.support import rewrite_cache

            rewrite_cache.rewrite_test_modules_ahead(config, Path(_REPO_ROOT) / "tests", CORES)
        if config.option.numprocesses and config.option.dist == "no":
            config.option.dist = "loadfile"
            # Hand files out in collection order (longest first, pytest_collection_modifyitems below), not
            # xdist's default of the files with the most tests first, which put the one-test seam fuzzer last.
            config.option.loadscopereorder = False
    return (yield)


# The files that take longest, first: under `--dist loadfile` a worker takes whole files in collection order, so a
# long file collected last runs alone at the end while the other worker idles (the seam fuzzer at CI's counts
# did: minutes of one busy core). Many short unit files at the end fill the gaps instead.
_LONG_FIRST = ("tests/fuzz/test_seams.py", "tests/fuzz/", "tests/integration/")


def _long_first(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    path = item.path.as_posix()
    return next((i + 1 for i, part in enumerate(_LONG_FIRST) if f"/{part}" in path), len(_LONG_FIRST) + 1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first (above). A stable sort: the tests of one file keep their order and stay together, and every
    worker computes the same order from the same collection, which pytest-xdist requires."""
    items.sort(key=_long_first)


@pytest.fixture(scope="session")
def acp_validator() -> WireValidator:
    """A WireValidator over the pinned official ACP schema (fails the test, saying how to get the schema)."""
    from ama_conformance.schema.validate import SchemaUnavailable, load_validator

    try:
        return load_validator()
    except SchemaUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def anyio_backend() -> str:
    """ama runs on asyncio; anyio's pytest plugin runs `@pytest.mark.anyio` tests on it."""
    return "asyncio"


class _TracebackRecords(logging.Handler):
    """Collects every record ama logs in this process with an exception attached (in-process tests: the
    peer, the loop, tools). The subprocess tests are covered by their log files instead."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


_in_process = _TracebackRecords()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "allow_traceback: the test makes ama log a traceback on purpose (an injected bug)"
    )
    logging.getLogger("ama_acp").addHandler(_in_process)


@pytest.fixture(autouse=True)
def _no_unexpected_exception_in_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """An exception ama logs with its traceback inside the test process fails the test, as in a log file."""
    _in_process.records.clear()
    yield
    if request.node.get_closest_marker("allow_traceback") is not None:
        return
    found = list(_in_process.records)
    _in_process.records.clear()
    if found:
        lines = [
            f"{r.name}: {r.getMessage()} ({r.exc_info[0].__name__ if r.exc_info and r.exc_info[0] else '?'})"
            for r in found
        ]
        pytest.fail("unexpected exception logged in the test process:\n" + "\n".join(lines), pytrace=False)


@pytest.fixture(autouse=True)
def _leaves_nothing_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test that has a tmp_path: no process that names it is still alive (ama, its commands and
    their setsid children included), and no log ama wrote there holds a traceback (an exception that
    nobody handled)."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    from tests.support import leaks

    since = time.time()  # before the folder exists: no process started earlier can name it
    tmp_path: Path = request.getfixturevalue("tmp_path")  # taken now, so it is torn down after this check
    yield
    problems: list[str] = []
    left = leaks.leftover_processes(tmp_path, since=since)
    if left:
        problems.append("processes left running (killed now): " + "; ".join(f"{pid} {cmd}" for pid, cmd in left))
    if request.node.get_closest_marker("allow_traceback") is None:
        for path, excerpt in leaks.tracebacks_in_logs(tmp_path):
            problems.append(f"unexpected exception logged in {path}:\n{excerpt}")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(autouse=True)
def _in_process_raw_amas_end_with_their_test() -> Iterator[None]:
    """A test that failed before closing its in-process RawAma (tests/support/raw.py) would leave it holding the
    environment and the one in-process slot: it is ended here, before the leftover-process check above runs
    (declared after it, so torn down first). Those of a wider fixture (started before this test) are kept."""
    raw = sys.modules.get("tests.support.raw")
    before = raw.live_in_process() if raw is not None else set()
    yield
    raw = sys.modules.get("tests.support.raw")
    if raw is not None:
        raw.close_leftovers(before)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """Which test made what appeared in the temp dir: its setup, call and teardown (module and session fixtures
    torn down after the last test of their scope count as that test's)."""
    _temp_watch.before_test()
    try:
        return (yield)
    finally:
        _temp_watch.after_test(item.nodeid)


_left_on_workers: dict[str, list[str]] = {"threads": [], "temp": []}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    """No test may leave a thread running (after a grace period) or anything in the temp dir: fail the run if one
    does. Under pytest-xdist each worker checks its own process and hands what it found to the controller, which
    fails the run (a worker's exit status does not become the run's)."""
    from tests.support import leaks

    left = {
        "threads": [f"{t.name} (daemon={t.daemon})" for t in leaks.leftover_threads()],
        "temp": _temp_watch.leftovers(),
    }
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["ama_left"] = left
        return
    for kind, what in (("threads left running", "threads"), ("left in the temp dir", "temp")):
        names = left[what] + _left_on_workers[what]
        if names:
            writer = session.config.get_terminal_writer()
            writer.line()  # off the progress line
            writer.line(f"{kind} after the tests: {', '.join(names)}", red=True)
            session.exitstatus = 1


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: WorkerController, error: object | None) -> None:
    """pytest-xdist, in the controller: a worker finished; keep what it found left behind."""
    left = getattr(node, "workeroutput", {}).get("ama_left", {})
    for what, names in left.items():
        _left_on_workers[what].extend(f"{name} on worker {node.gateway.id}" for name in names)
