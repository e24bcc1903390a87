"""The conformance suite against ama itself, as CI runs it: conformant, the usage profile all pass, under 60 s.

ama is pointed at the suite's own scripted model (`--model-env`), so the tool, permission, fs, terminal and MCP
groups really drive tools; the capability groups must pass (not skip) because ama advertises them all.

The full run is the suite's command line run in this process, ama launched in-process by the suite's embedding
seam (tests/support/conformance_inprocess.py); the subcommand test runs the shipped command as processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_conformance.requirements.registry import REGISTRY, Tier
from tests.support.conformance_inprocess import MODEL_ENV, SuiteRun, run_conformance
from tests.support.harness import Ama, clean_env

pytestmark = pytest.mark.slow  # whole suite runs: `-m "not slow"` leaves them out of a quick local run, CI runs them

ROOT = Path(__file__).resolve().parents[2]
# Requirements whose gate ama advertises or whose behaviour the scripted model makes ama show: each must PASS,
# so a group that silently stopped checking would fail this test.
MUST_PASS = (
    "R7", "R37", "R54", "R60", "R62", "R66", "R67", "R70", "R74", "R75", "R79", "R80", "R86", "R87", "R88", "R89",
    "R91", "R92", "R94", "R97.1", "R100", "R100.2", "R102", "R110", "R111", "R113", "R133", "R134", "R136.1",
)  # fmt: skip


def run_suite(tmp_path: Path, *args: str) -> tuple[SuiteRun, dict[str, Any]]:
    """`python -m ama_conformance ARGS --report-json … -- ama --mode acp …`, run in this process with ama launched
    in-process (tests/support/conformance_inprocess.py); the shipped command's process run is the test below."""
    ama = Ama(tmp_path)
    report = tmp_path / "report.json"
    run = run_conformance(
        [*args, "--report-json", str(report), "--", *ama.command()], clean_env(tmp_path), tmp_path / "agents"
    )
    return run, run.report


def test_ama_is_conformant_and_meets_its_usage_profile(tmp_path):
    out, report = run_suite(tmp_path, "--profile", "all", *MODEL_ENV)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    verdicts = {v["profile"]: v for v in report["verdicts"]}
    assert verdicts["acp"]["conformant"] and verdicts["usage"]["conformant"], verdicts
    status = {r["id"]: r for r in report["requirements"]}
    assert set(status) == {r.id for r in REGISTRY}
    deciding = {r.id for r in REGISTRY if r.tier.decides}
    bad = {rid: status[rid]["findings"] for rid in deciding if status[rid]["status"] in ("FAIL", "NOT_TESTED")}
    assert not bad
    assert [rid for rid in MUST_PASS if status[rid]["status"] != "PASS"] == []
    assert all(r["status"] == "PASS" for r in report["requirements"] if r["profile"] == "usage")
    assert report["seconds"] < 60, f"a full run took {report['seconds']} s"
    assert report["agent"]["agentInfo"]["name"] == "ama"
    # The report people read: the tiers, one line per requirement, and the verdicts.
    for tier in Tier:
        assert f"-- {tier.value} (" in out.stdout
    assert "ACP v1: CONFORMANT" in out.stdout and "usage profile (ama's context-meter contract): ALL PASS" in out.stdout
    assert out.stdout.count("\nPASS ") >= 60
    assert out.launcher.launched > 0  # ama ran in this process (a group's second live agent may be a process)


def test_ama_conformance_subcommand_lists_and_selects(tmp_path):
    """The shipped command line end to end, as processes: `ama conformance … -- ama --mode acp …` (the suite's
    own process and a real ama process per agent); and the in-process run of the same argv gives the same
    statuses (the run above and the other ama runs of the suite are in-process)."""
    listing = subprocess.run(
        [sys.executable, "-m", "ama_acp", "conformance", "--list"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert listing.returncode == 0
    assert all(f"\n{r.id} " in listing.stdout for r in REGISTRY)
    ama = Ama(tmp_path)
    report = tmp_path / "report.json"
    argv = ["-k", "versions or R53", "--report-json", str(report), "--", *ama.command()]
    out = subprocess.run(
        [sys.executable, "-m", "ama_acp", "conformance", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS     R37 " in out.stdout and "PASS     R53 " in out.stdout
    assert "R110" not in out.stdout  # the cancel group did not run
    assert "a partial run" in out.stdout
    processes = json.loads(report.read_text(encoding="utf-8"))
    status = {r["id"]: r["status"] for r in processes["requirements"]}
    # What only a process shows: ama exits on its own after stdin closes (R7), and its stdout (fd 1) carries
    # nothing but whole UTF-8 ACP messages (R1, R3, R4).
    assert {rid: status[rid] for rid in ("R1", "R3", "R4", "R7")} == dict.fromkeys(("R1", "R3", "R4", "R7"), "PASS")
    assert processes["agent"]["agentInfo"]["name"] == "ama"
    in_process = run_conformance(argv, clean_env(tmp_path), tmp_path / "agents")
    assert in_process.returncode == out.returncode and in_process.launcher.launched > 0
    assert {r["id"]: r["status"] for r in in_process.report["requirements"]} == status
    missing = subprocess.run(
        [sys.executable, "-m", "ama_acp", "conformance"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert missing.returncode == 2 and "after --" in missing.stderr
