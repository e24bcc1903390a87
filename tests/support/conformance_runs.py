"""`python -m ama_conformance ARGS` for the tests, without a fresh interpreter's start at each run.

A conformance run costs ~0.65 s of CPU, of which ~0.4 s is the start: importing the suite (~0.25 s) and building
its schema validators (~0.15 s). The tests of the suite run it ~60 times against fixture agents. Here each run is
still a process of its own — its own environment, working directory, stdout, stderr and exit status, exactly what
`subprocess.run([sys.executable, "-m", "conformance", *args], ...)` gives — but forked from a server process that
has imported the suite and built its validators once (multiprocessing's forkserver, started at the first run; the
server forks from a single thread, so a run starts as clean as a new interpreter, with the same modules in it).
The run itself is `ama_conformance.cli.main`, the command's own entry point (conformance/__main__.py), unchanged.

`run_forked(args, env=, cwd=, timeout=)` returns a `subprocess.CompletedProcess` with text stdout and stderr,
as `subprocess.run(..., capture_output=True, text=True)` does, and raises `subprocess.TimeoutExpired` (the run
killed) as it does. Where a test is about the process the suite starts as (none here), use subprocess itself.
Run pytest as `python -m pytest` (the project's command, and xdist's workers): under the `pytest` script each run
would import that script again first (multiprocessing's rule for a main module with a file), slower, the same.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "conformance" / "__main__.py")  # sys.argv[0] of `python -m ama_conformance`

_context: multiprocessing.context.ForkServerContext | None = None
# multiprocessing's Process objects are not made to be started and joined from several threads at once (a start
# polls the other children; two reads of one exit status race): every call on them is made under this lock, and
# a run's end is awaited outside it, on its sentinel, which only selects.
_lock = threading.Lock()


def _server() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tests.support.conformance_preload", __name__])
        _context = context
        atexit.register(_stop_server)
    return _context


def _stop_server() -> None:
    """At the test process's exit: end the server and wait for it (so its runs' CPU counts as this process's
    children's, as the CPU of `python -m ama_conformance` runs did)."""
    from multiprocessing import forkserver

    # A private call (there is no public one), so typeshed declares no such method: looked up, not assumed.
    stop = getattr(forkserver._forkserver, "_stop", None)
    if stop is None:  # a Python without it: the server ends with us
        sys.stderr.write("conformance_runs: the fork server was not stopped: this Python has no _stop\n")
        return
    try:
        stop()  # closes its pipe and waits for it
    except OSError as exc:  # a server already gone
        sys.stderr.write(f"conformance_runs: the fork server was not stopped cleanly: {exc!r}\n")


def _run(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """The run, in the forked process: as `python -m ama_conformance ARGS` with this env, cwd, stdout and stderr."""
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # found again from this environment (TMPDIR), as a new interpreter would
    sys.argv = [MAIN, *args]
    from ama_conformance.cli import main

    try:
        code = main(args)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    raise SystemExit(code)


def run_forked(
    args: list[str], *, env: dict[str, str], cwd: Path | str = ROOT, timeout: float
) -> subprocess.CompletedProcess[str]:
    with _lock:
        context = _server()
    with tempfile.TemporaryDirectory(prefix="conformance-run-") as tmp:
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        process = context.Process(target=_run, args=(list(args), dict(env), str(cwd), out, err), daemon=True)
        with _lock:
            process.start()
        ended = wait([process.sentinel], timeout)
        with _lock:
            if not ended:
                process.kill()
            process.join()
            code = process.exitcode
            process.close()
        if not ended:
            raise subprocess.TimeoutExpired([sys.executable, "-m", "conformance", *args], timeout)
        assert code is not None, "a joined process has an exit code"
        stdout, stderr = (Path(p).read_text(encoding="utf-8") if os.path.exists(p) else "" for p in (out, err))
    return subprocess.CompletedProcess([sys.executable, "-m", "conformance", *args], code, stdout, stderr)
