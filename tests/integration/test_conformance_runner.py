"""The runner against agents that once cost a suite run its verdict or its time (issue 43), each a whole suite
run with the default options: one that saves a setting a group switches to its home and then refuses sessions
(each group's fresh home keeps it conformant), one whose model never answers (the run ends within a bound, what
needs a completed turn NOT_TESTED for one reason); and what the runner shows and keeps: a progress line per
group, the same record whether groups run one at a time or two at once."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_fixtures import agent_command, launch_command
from tests.support.conformance_runs import run_forked
from tests.support.harness import clean_env

pytestmark = pytest.mark.slow  # whole suite runs of fresh agent processes

ROOT = Path(__file__).resolve().parents[2]
STALL = "no prompt turn could complete: within 10 s of session/prompt the agent sent nothing"


def _suite(tmp: Path, agent: list[str], *args: str) -> tuple[int, str, str, dict[str, Any], float]:
    """A suite run with HOME in `tmp` (what the agent would share without the fresh homes): exit code, stdout,
    stderr, the JSON report, the wall time."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    report = tmp / "report.json"
    started = time.monotonic()
    out = run_forked(
        [*args, "--report-json", str(report), "--", *agent],
        timeout=300,
        env=clean_env(tmp, {"HOME": str(home)}),
        cwd=ROOT,
    )
    wall = time.monotonic() - started
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return out.returncode, out.stdout, out.stderr, data, wall


def _status(report: dict[str, Any], status: str) -> set[str]:
    return {r["id"] for r in report["requirements"] if r["status"] == status and r["profile"] == "acp"}


def test_an_agent_that_saves_what_a_group_switches_cannot_reach_the_next_group(tmp_path):
    """(conformance/core/homes.py) The config groups switch a mode; the agent saves it under HOME and, started
    again with it there, refuses every session/new. Each group's fresh home: conformant. The shared home
    (--keep-home) shows what the fresh homes prevent: the groups after the switch cannot open a session."""
    agent = launch_command("stateful_agent", "--saves-settings")
    code, stdout, _, report, _ = _suite(tmp_path / "fresh", agent)
    assert code == 0, stdout[-3000:]
    assert "ACP v1: CONFORMANT" in stdout
    assert _status(report, "FAIL") == set() and _status(report, "NOT_TESTED") == set()
    assert not (tmp_path / "fresh" / "home" / ".fixture-agent").exists()  # the person's HOME untouched

    code, stdout, _, report, _ = _suite(tmp_path / "shared", agent, "--keep-home")
    assert code == 1, stdout[-3000:]
    assert "R33" in _status(report, "FAIL")
    assert (tmp_path / "shared" / "home" / ".fixture-agent" / "settings.json").exists()

    # --home-copy seeds each fresh home from the person's: with the saved setting copied in, the agent refuses
    # sessions from the first group on, and the person's own file is left as it was.
    seeded = tmp_path / "shared" / "home" / ".fixture-agent" / "settings.json"
    saved = seeded.read_text(encoding="utf-8")
    code, stdout, _, report, _ = _suite(tmp_path / "shared", agent, "-k", "sessions", "--home-copy", ".fixture-agent")
    assert code == 1 and "R33" in _status(report, "FAIL"), stdout[-3000:]
    assert "missing API key" in stdout and seeded.read_text(encoding="utf-8") == saved


def test_an_agent_whose_model_never_answers_is_judged_in_seconds(tmp_path):
    """(conformance/core/agent.py Agent.finish, config.py TurnWatch) Its turns send nothing: the first waits the stall
    timeout (10 s by default; 3 s here, the same code, to keep the suite short), every later one a second, and
    everything that needs a completed turn is NOT_TESTED with the one reason; no group waits out the 120 s prompt
    timeout (a run took 17 minutes, and failed R103)."""
    command = launch_command("stateful_agent", "--model-hangs")
    code, stdout, _, report, wall = _suite(tmp_path, command, "--stall-timeout", "3")
    assert wall < 60, f"the run took {wall:.0f} s"
    stall = STALL.replace("within 10 s", "within 3 s")
    assert code == 0, stdout[-3000:]
    assert "ACP v1: NO VIOLATION FOUND" in stdout and re.search(rf"\(\d+ in all\): {re.escape(stall)}", stdout)
    assert _status(report, "FAIL") == set()
    untested = {r["id"]: r for r in report["requirements"] if r["status"] == "NOT_TESTED"}
    assert {"R103", "R45", "R110", "R111", "R54", "R102", "R53.1"} <= set(untested)
    verdict = next(v for v in report["verdicts"] if v["profile"] == "acp")
    reasons = verdict["notTestedBecause"]
    stalled = [r for r in reasons if r["reason"].startswith(stall)]
    assert len(stalled) == 1 and "R103" in stalled[0]["ids"]
    # What needs no completed turn is still judged: the agent's answers to mode and config changes during a turn.
    assert {"R91", "R94", "R97.1", "R88", "R89"} <= _status(report, "PASS")


def test_a_line_per_group_shows_progress_and_two_groups_at_once_keep_the_record(tmp_path):
    """--progress: a line on stderr as each group ends (without it and without a terminal, none). --jobs 2 runs two
    groups at once: the same statuses, the groups recorded in the same order."""
    code, _, stderr, serial, _ = _suite(tmp_path / "serial", agent_command(), "--progress")
    assert code == 0
    lines = [line for line in stderr.splitlines() if line.startswith("ama conformance: [")]
    names = [g["name"] for g in serial["groups"]]
    assert len(lines) == len(names) and lines[0].startswith(f"ama conformance: [1/{len(names)}] ")
    assert "ama conformance: start-up: " in stderr
    code, _, stderr, both, _ = _suite(tmp_path / "jobs", agent_command(), "--jobs", "2")
    assert code == 0 and "ama conformance: [" not in stderr
    assert [g["name"] for g in both["groups"]] == names
    assert {r["id"]: r["status"] for r in both["requirements"]} == {
        r["id"]: r["status"] for r in serial["requirements"]
    }
