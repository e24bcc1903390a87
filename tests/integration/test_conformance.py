"""The conformance suite against ama itself, as CI runs it: conformant, the usage profile all pass, under 60 s.

ama is pointed at the suite's own scripted model (`--model-env`), so the tool, permission, fs, terminal and MCP
groups really drive tools; the capability groups must pass (not skip) because ama advertises them all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.requirements import REGISTRY, Tier
from tests.support.harness import Ama, clean_env

pytestmark = pytest.mark.slow  # whole suite runs: `-m "not slow"` leaves them out of a quick local run, CI runs them

ROOT = Path(__file__).resolve().parents[2]
MODEL_ENV = [
    "--model-env",
    "OPENAI_BASE_URL={openai}",
    "--model-env",
    "OPENAI_API_KEY=sk-acp-conformance-0000",
    "--model-env",
    "AMA_MODEL=openai/gpt-4.1",
]
# Requirements whose gate ama advertises or whose behaviour the scripted model makes ama show: each must PASS,
# so a group that silently stopped checking would fail this test.
MUST_PASS = (
    "R7", "R37", "R54", "R60", "R62", "R66", "R67", "R70", "R74", "R75", "R79", "R80", "R86", "R87", "R88", "R89",
    "R91", "R92", "R94", "R97.1", "R100", "R100.2", "R102", "R110", "R111", "R113", "R133", "R134", "R136.1",
)  # fmt: skip


def run_suite(tmp_path: Path, *args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess[str], dict]:
    ama = Ama(tmp_path)
    report = tmp_path / "report.json"
    out = subprocess.run(
        [sys.executable, "-m", "conformance", *args, "--report-json", str(report), "--", *ama.command()],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(tmp_path),
        cwd=ROOT,
    )
    return out, json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}


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


def test_ama_conformance_subcommand_lists_and_selects(tmp_path):
    listing = subprocess.run(
        [sys.executable, "-m", "ama_acp", "conformance", "--list"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert listing.returncode == 0
    assert all(f"\n{r.id} " in listing.stdout for r in REGISTRY)
    ama = Ama(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "ama_acp", "conformance", "-k", "versions or R53", "--", *ama.command()],
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
    missing = subprocess.run(
        [sys.executable, "-m", "ama_acp", "conformance"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert missing.returncode == 2 and "after --" in missing.stderr
