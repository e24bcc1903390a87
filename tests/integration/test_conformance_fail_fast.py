"""The suite on agents that cannot be driven: it ends fast, says why, leaves nothing running, and starts the agent
in a clean environment when asked (`conformance/core/runner.py` startup_probe, `conformance/process_group.py`,
`--env-clean`). The silent agent with default options (a 30 s wait by design) is tested in
test_conformance_fixtures.py, where its run goes on in the background while the fixture matrix runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ama_conformance.core.homes import XDG_DIRS
from ama_conformance.requirements.registry import BY_ID
from tests.support.conformance_runs import run_forked
from tests.support.harness import clean_env
from tests.support.leaks import processes_mentioning
from tests.support.waiting import holds_within

ROOT = Path(__file__).resolve().parents[2]
STARTUP_AGENT = ROOT / "tests" / "support" / "acp_fixtures" / "startup_agent.py"


def run_suite(
    tmp: Path, agent: list[str], *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], float]:
    report = tmp / "report.json"
    started = time.monotonic()
    # `python -m ama_conformance`, forked from a server that has imported the suite (tests/support/conformance_runs.py).
    out = run_forked(
        [*args, "--report-json", str(report), "--", *agent], timeout=timeout, env=env or clean_env(tmp), cwd=ROOT
    )
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return out, data, time.monotonic() - started


def _statuses(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["requirements"]}


def test_an_agent_that_falls_silent_after_the_start_up_stops_the_groups_after_it(tmp_path):
    """The start-up probe's agent answers; the next process (the first group's) is silent: that group's
    `initialize` times out once, and no group after it starts (each would wait out the same silence)."""
    flag = tmp_path / "answered-once"
    agent = [sys.executable, str(STARTUP_AGENT), "--answer-once", str(flag), "--silent"]
    out, report, wall = run_suite(tmp_path, agent, "--timeout", "1", "--exit-timeout", "1")
    assert flag.exists()
    ran = [g["name"] for g in report["groups"]]
    assert len(ran) == 1 and ran != ["start-up"], ran  # the probe succeeded (no record); only the first group ran
    reason = "the agent did not answer initialize within 1 s"
    status = _statuses(report)
    assert all(f["detail"] == reason for rid in ("R37", "R60", "R103") for f in status[rid]["findings"])
    assert f"The agent could not be initialized: {reason}." in out.stdout
    assert wall < 20


def test_an_agent_that_refuses_initialize_fails_r36_once_and_nothing_else_runs(tmp_path):
    out, report, wall = run_suite(tmp_path, [sys.executable, str(STARTUP_AGENT), "--refuse"])
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr
    status = _statuses(report)
    assert status["R36"]["status"] == "FAIL"
    assert "initialize answered error -32603" in status["R36"]["findings"][0]["detail"]
    assert [g["name"] for g in report["groups"]] == ["start-up"]
    assert not [rid for rid, r in status.items() if rid != "R36" and r["status"] in ("PASS", "FAIL")]
    assert wall < 20


def test_an_agent_that_dies_at_start_shows_its_stderr_tail_and_exit_code(tmp_path):
    out, report, wall = run_suite(tmp_path, [sys.executable, str(STARTUP_AGENT), "--die", "3"])
    assert wall < 20
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr  # a command that could not run: no verdict
    text = out.stdout
    assert "The agent could not be initialized: the agent exited before answering initialize (exit code 3)." in text
    assert "\nexit code: 3\n" in text
    assert "its stderr (last 20 lines):" in text
    assert "  | startup-agent: fatal: no config file (the last line)" in text
    assert "line 12 " in text and "line 11 " not in text  # the last 20 of 31 lines
    assert "\x1b" not in text and "\x07" not in text and "line 30 ^[[31mred^[[0m^G" in text  # controls made safe
    status = _statuses(report)
    assert status["R36"]["status"] == "NOT_TESTED"  # a command that cannot run is no protocol violation
    assert not [rid for rid, r in status.items() if r["status"] in ("PASS", "FAIL")]


def test_whatever_the_agent_started_is_ended_with_it(tmp_path):
    """The agent starts a child that would outlive it (its own pipes closed, in the agent's process group): when
    the suite closes the agent, the child is ended too."""
    marker = str(tmp_path / "grandchild-marker")
    agent = [sys.executable, str(STARTUP_AGENT), "--silent", "--grandchild", marker]
    out, report, _ = run_suite(tmp_path, agent, "--timeout", "1", "--exit-timeout", "1")
    agent_record = report["groups"][0]["agents"][0]
    assert agent_record.get("ended_by", agent_record.get("endedBy")) == "eof", agent_record  # it exited by itself
    assert holds_within(lambda: not processes_mentioning(marker), 3.0), processes_mentioning(marker)


def test_env_clean_keeps_the_suites_environment_from_the_agent(tmp_path):
    env = clean_env(tmp_path, {"ACP_SUITE_ONLY_VARIABLE": "leaks-if-seen", "LC_ALL": "C.UTF-8"})
    dumps = {}
    for name, extra in (("inherited", []), ("clean", ["--env-clean", "--env", "GIVEN=by-env"])):
        dump = tmp_path / f"{name}.json"
        agent = [sys.executable, str(STARTUP_AGENT), "--env-dump", str(dump), "--die", "0"]
        out, _, _ = run_suite(tmp_path, agent, *extra, env=env)
        assert out.returncode == 2, out.stdout[-2000:] + out.stderr
        dumps[name] = json.loads(dump.read_text(encoding="utf-8"))
    assert dumps["inherited"]["ACP_SUITE_ONLY_VARIABLE"] == "leaks-if-seen"  # the default: inherited
    clean = dumps["clean"]
    assert "ACP_SUITE_ONLY_VARIABLE" not in clean
    assert clean["GIVEN"] == "by-env" and clean["PATH"] == env["PATH"] and clean["LC_ALL"] == "C.UTF-8"
    assert {k for k in clean if not k.startswith("LC_")} <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "TERM",
        "LANG",
        "LANGUAGE",
        "GIVEN",
        *XDG_DIRS,  # each group's fresh home (conformance/core/homes.py), not the suite's
    }
    assert clean["HOME"] != env.get("HOME") and clean["HOME"].endswith("/homes/start-up")
    assert all(clean[var].startswith(clean["HOME"] + "/") for var in XDG_DIRS)
    assert os.environ.get("ACP_SUITE_ONLY_VARIABLE") is None  # the test did not set it for itself


@pytest.mark.slow  # three fresh agent processes and two bounded waits (about 8 s)
def test_an_agent_that_never_starts_mcp_servers_on_load_or_resume_fails_r69_and_r75_1_fast(tmp_path):
    """A session reopened with an MCP server in `mcpServers` must start it (R69 on load, R75.1 on resume); an
    agent that ignores them fails both, and the bounded waits keep that to seconds."""
    agent = [sys.executable, str(ROOT / "tests" / "support" / "acp_fixtures" / "mcp_deaf_agent.py")]
    out, report, wall = run_suite(tmp_path, agent, "-k", "mcp-reopen", "--timeout", "1")
    status = _statuses(report)
    assert status["R69"]["status"] == "FAIL" and status["R75.1"]["status"] == "FAIL", out.stdout[-3000:]
    assert "not started" in status["R69"]["findings"][0]["detail"]
    assert BY_ID["R69"].gate == "loadSession" and BY_ID["R75.1"].gate == "sessionCapabilities.resume"
    assert out.returncode == 1
    assert wall < 20  # the bounded waits: --timeout 1 here, at most 10 s by default (mcp_sessions.MCP_START_WAIT)
