"""tests/support/conformance_runs.py's `run_forked` is `python -m ama_conformance`: the same exit status, stdout, stderr
and report as the command run as a subprocess, the run's own environment and working directory, and a run that
outlives its timeout killed with `subprocess.TimeoutExpired`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.acp_fixtures import agent_command
from tests.support.conformance_runs import ROOT, run_forked
from tests.support.harness import clean_env

pytestmark = pytest.mark.slow  # suite runs (short ones)

STARTUP_AGENT = ROOT / "tests" / "support" / "acp_fixtures" / "startup_agent.py"


def _without_timing(stdout: str) -> str:
    return "\n".join(line for line in stdout.splitlines() if not line.startswith("finished in "))


@pytest.mark.parametrize("breaks", [(), ("echo-version",)], ids=["conforming", "broken"])
def test_a_forked_run_is_the_command(tmp_path: Path, breaks: tuple[str, ...]) -> None:
    reports = {name: tmp_path / f"{name}.json" for name in ("process", "forked")}
    args = {
        name: ["-k", "versions", "--report-json", str(r), "--", *agent_command(*breaks)] for name, r in reports.items()
    }
    env = clean_env(tmp_path, {"ACP_RUNS_MARKER": "x"})
    process = subprocess.run(
        [sys.executable, "-m", "conformance", *args["process"]],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    forked = run_forked(args["forked"], env=env, cwd=ROOT, timeout=120)
    assert forked.returncode == process.returncode == (1 if breaks else 0), forked.stdout[-3000:] + forked.stderr
    assert _without_timing(forked.stdout.replace(str(reports["forked"]), "R")) == _without_timing(
        process.stdout.replace(str(reports["process"]), "R")
    )
    assert forked.stderr == process.stderr
    statuses = [
        {r["id"]: r["status"] for r in json.loads(report.read_text(encoding="utf-8"))["requirements"]}
        for report in reports.values()
    ]
    assert statuses[0] == statuses[1]


def test_a_forked_run_has_its_own_environment_and_working_directory(tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    env = clean_env(tmp_path, {"ACP_RUNS_MARKER": "only-in-the-run"})
    agent = [sys.executable, str(STARTUP_AGENT), "--env-dump", str(dump), "--die", "0"]
    out = run_forked(["--report-json", "run.json", "--", *agent], env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr  # an agent that exits at start: no verdict
    assert json.loads(dump.read_text(encoding="utf-8"))["ACP_RUNS_MARKER"] == "only-in-the-run"
    assert (tmp_path / "run.json").exists()  # a relative path is the run's working directory's
    assert "ACP_RUNS_MARKER" not in os.environ and Path.cwd() != tmp_path  # the test process's own are untouched


def test_a_forked_run_past_its_timeout_is_killed(tmp_path: Path) -> None:
    agent = [sys.executable, str(STARTUP_AGENT), "--silent"]  # never answers: the suite waits out --timeout 30
    # A killed run cannot remove its temporary folder: it goes to this test's folder, not the temp dir (where the
    # run's end would find it left: tests/support/temp_leftovers.py).
    env = clean_env(tmp_path, {"TMPDIR": str(tmp_path)})
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_forked(["--", *agent], env=env, cwd=ROOT, timeout=1.0)
    assert time.monotonic() - started < 10
