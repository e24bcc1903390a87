"""The coverage groups (conformance/groups/coverage_*.py) tell a conforming agent from broken ones: against the
coverage fixture (tests/support/acp_fixtures/coverage_agent.py) every coverage requirement passes; each of its
one-rule breaks fails exactly that requirement; and ama, driven by the suite's scripted model, passes each one it
gives a chance to judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ama_conformance.requirements.coverage import COVERAGE
from tests.support.acp_fixtures import launch_command
from tests.support.acp_fixtures.coverage_agent import BREAKS
from tests.support.conformance_inprocess import MODEL_ENV, run_conformance
from tests.support.conformance_runs import run_forked
from tests.support.harness import Ama, clean_env

pytestmark = pytest.mark.slow  # fifteen suite runs (of coverage groups only): left out by `-m "not slow"`

ROOT = Path(__file__).resolve().parents[2]
# The coverage groups' own ids, plus R11 (its string ids are judged by the coverage-wire group).
OWN = {row[0] for row in COVERAGE} | {"R11"}
RULE = {
    "stringly-id": "R11",
    "zero-line": "R30.1",
    "error-on-client-error": "R143",
    "stray-cancel-request": "R24",
    "auth-sticks": "R49",
    "logout-noop": "R51",
    "shared-history": "R53.1",
    "reused-message-id": "R117",
    "replay-no-tools": "R66.1",
    "replay-dup-message-id": "R68",
    "partial-config-update": "R128",
    "sticky-roots": "R64",
    "loose-roots-on-load": "R65.1",
    "reordered-roots": "R84",
    "empty-last-page": "R82",
    "stale-title": "R85",
    "stale-mode-option": "R98",
}
# A connection that never signs in leaves every other coverage check blocked (untested), as it should.
MAY_BLOCK = {"auth-sticks": OWN}


def _suite(tmp: Path, command: list[str], *options: str, select: str = "coverage") -> tuple[int, dict[str, Any]]:
    report = tmp / "report.json"
    out = subprocess.run(
        [sys.executable, "-m", "conformance", "-k", select, *options, "--report-json", str(report), "--", *command],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(tmp),
        cwd=ROOT,
    )
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return out.returncode, json.loads(report.read_text(encoding="utf-8"))


def _fixture(name: str, tmp: Path) -> tuple[int, dict[str, Any]]:
    tmp.mkdir(parents=True, exist_ok=True)
    breaks = [] if name == "conforming" else [f"--break={name}"]
    # A break runs the group that decides its rule (`-k R64` selects it), and the transcript checks. The run is
    # `python -m ama_conformance` forked from a server that has imported the suite (tests/support/conformance_runs.py).
    command = launch_command("coverage_agent", "--store", str(tmp / "store"), *breaks)
    report = tmp / "report.json"
    out = run_forked(
        ["-k", RULE.get(name, "coverage"), "--report-json", str(report), "--", *command],
        timeout=300,
        env=clean_env(tmp),
        cwd=ROOT,
    )
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return out.returncode, json.loads(report.read_text(encoding="utf-8"))


def _status(report: dict[str, Any]) -> dict[str, str]:
    return {r["id"]: r["status"] for r in report["requirements"]}


def _details(report: dict[str, Any], rid: str) -> list[str]:
    return [f["detail"] for r in report["requirements"] if r["id"] == rid for f in r["findings"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, dict[str, Any]]]:
    names = ["conforming", *RULE]
    base = tmp_path_factory.mktemp("coverage-runs")
    # As many at once as the fixture matrix (test_conformance_fixtures.py RUNS_AT_ONCE says why): three alone, two
    # under xdist. Serially, on the shared 2-core machine (noisy): 9.5-13.9 s two at a time, 6.5-11.7 s three.
    with ThreadPoolExecutor(max_workers=2 if os.environ.get("PYTEST_XDIST_WORKER") else 3) as pool:
        return dict(zip(names, pool.map(lambda n: _fixture(n, base / n), names), strict=True))


def test_every_break_has_its_rule() -> None:
    assert set(RULE) == set(BREAKS)
    assert set(RULE.values()) == OWN  # and every coverage requirement has a break that fails it


def test_the_conforming_coverage_fixture_passes_every_coverage_check(
    runs: dict[str, tuple[int, dict[str, Any]]],
) -> None:
    code, report = runs["conforming"]
    status = _status(report)
    assert {rid: status[rid] for rid in OWN if status[rid] != "PASS"} == {}
    assert code == 0 and not [rid for rid, s in status.items() if s == "FAIL"]


@pytest.mark.parametrize("name", sorted(RULE))
def test_each_coverage_break_fails_exactly_its_rule(runs: dict[str, tuple[int, dict[str, Any]]], name: str) -> None:
    _, report = runs[name]
    status = _status(report)
    assert {rid for rid, s in status.items() if s == "FAIL"} == {RULE[name]}, report["requirements"]
    blocked = {rid for rid in OWN if status.get(rid) == "NOT_TESTED"}
    assert blocked <= MAY_BLOCK.get(name, set())


def _suite_in_process(
    tmp: Path, command: list[str], *options: str, select: str = "coverage"
) -> tuple[int, dict[str, Any]]:
    """`_suite` run in this process, ama launched in-process (tests/support/conformance_inprocess.py)."""
    report = tmp / "report.json"
    argv = ["-k", select, *options, "--report-json", str(report), "--", *command]
    run = run_conformance(argv, clean_env(tmp), tmp / "agents")
    assert report.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return run.returncode, run.report


def test_ama_passes_the_coverage_checks_it_gives_a_chance(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    code, report = _suite_in_process(tmp_path, ama.command(), *MODEL_ENV)
    status = _status(report)
    assert code == 0, {rid: _details(report, rid) for rid, s in status.items() if s in ("FAIL", "NOT_TESTED")}
    # What ama does, each judged: string ids, line numbers, a failed client read, sign-in, separate histories,
    # additional roots (listed, validated, not brought back), message ids live and replayed, the replay of tool
    # calls, complete config updates.
    must_pass = {
        "R11",
        "R30.1",
        "R143",
        "R49",
        "R53.1",
        "R64",
        "R65.1",
        "R66.1",
        "R68",
        "R84",
        "R85",
        "R98",
        "R117",
        "R128",
    }
    assert {rid: status[rid] for rid in must_pass if status[rid] != "PASS"} == {}
    # What ama never does, so nothing is judged: it has no logout, withdraws none of its requests at a cancel (it
    # sends `$/cancel_request` only when a request of its own times out), and lists a few sessions on one page.
    assert status["R51"] == "SKIPPED" and status["R24"] == "SKIPPED" and status["R82"] == "SKIPPED"
