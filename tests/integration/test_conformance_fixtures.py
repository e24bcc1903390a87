"""The suite tells a conforming agent from broken ones: the conforming fixture agent is conformant, and each
fixture that breaks one rule is not conformant, failing exactly that requirement and no other."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.acp_fixtures import BREAKS, agent_command
from tests.support.harness import clean_env

# The slowest part of the suite (fifteen whole suite runs of fresh agent processes): `-m "not slow"` leaves it out
# of a quick local run; the default run and CI include it. Under xdist the file stays on one worker (the suite
# runs with --dist loadfile), so the `runs` fixture below is not started again by a second worker.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# The rule each break breaks: the only requirement its run may FAIL.
RULE = {
    "fs-unoffered": "R131",
    "terminal-unoffered": "R132",
    "reused-id": "R18",
    "answers-cancel": "R13",
    "root-field": "R26",
    "early-update": "R115",
    "late-chunk": "R105",
    "relative-path": "R30",
    "no-release": "R133",
    "echo-version": "R37",
    "stdout-banner": "R4",
    "ignore-eof": "R7",
    "crash-on-prompt": "R103",
    "boolean-option": "R96",
}
# What a break may leave untested besides: the checks that need what it breaks (a crashed turn cannot be
# cancelled; a path the client refuses cannot show which directory it named).
MAY_BLOCK = {"crash-on-prompt": None, "relative-path": {"R54"}}


def _run(name: str, tmp: Path) -> tuple[int, str, dict]:
    tmp.mkdir(parents=True, exist_ok=True)
    report = tmp / "report.json"
    # The fixture that ignores EOF is terminated when the exit grace runs out, at each of its ~22 processes: a
    # test-sized grace (the suite's own option; R7 fails at any grace, as the fixture never exits on its own).
    extra = ["--exit-timeout", "0.2"] if name == "ignore-eof" else []
    breaks = () if name == "conforming" else (name,)
    out = subprocess.run(
        [sys.executable, "-m", "conformance", *extra, "--report-json", str(report), "--", *agent_command(*breaks)],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(tmp),
        cwd=ROOT,
    )
    return out.returncode, out.stdout, json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every fixture run once, two at a time (each is a whole suite run of fresh agent processes)."""
    names = ["conforming", *RULE]
    base = tmp_path_factory.mktemp("fixture-runs")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(lambda n: _run(n, base / n), names)
        return dict(zip(names, results, strict=True))


def _status(report: dict, status: str) -> set[str]:
    return {r["id"] for r in report["requirements"] if r["status"] == status and r["profile"] == "acp"}


def test_every_break_has_its_rule():
    assert set(RULE) == set(BREAKS)


def test_the_conforming_fixture_is_conformant(runs):
    code, stdout, report = runs["conforming"]
    assert code == 0, stdout[-3000:]
    assert "ACP v1: CONFORMANT" in stdout
    assert _status(report, "FAIL") == set() and _status(report, "NOT_TESTED") == set()


@pytest.mark.parametrize("name", sorted(RULE))
def test_each_broken_fixture_fails_exactly_its_rule(runs, name):
    code, stdout, report = runs[name]
    rule = RULE[name]
    assert code == 1, stdout[-3000:]
    assert _status(report, "FAIL") == {rule}, stdout[-3000:]
    allowed = MAY_BLOCK.get(name, set())
    if allowed is not None:
        assert _status(report, "NOT_TESTED") <= allowed
    verdict = next(v for v in report["verdicts"] if v["profile"] == "acp")
    assert not verdict["conformant"] and rule in verdict["failed"]
    assert f"NOT CONFORMANT — failed {rule}" in stdout
    # The JSON record keeps the transcript and stderr of each group where the rule failed.
    failing = {
        f["group"] for r in report["requirements"] if r["id"] == rule for f in r["findings"] if f["status"] == "FAIL"
    }
    groups = [g for g in report["groups"] if g["name"] in failing]
    assert groups and all("transcript" in a and "stderr" in a for g in groups for a in g["agents"])
