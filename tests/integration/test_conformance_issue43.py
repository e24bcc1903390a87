"""The suite's verdicts on what public agents did that it once misjudged or let through (issue 43), each
reproduced by a fixture without the agent: a sign-in that needs a browser and hangs (never a failure of the agent,
"sign-in could not complete"), `models` at the root of a session result (defined by a published schema: ADVISORY
R26.1, not R26), a turn that answers after the prompt timeout (NOT_TESTED, not an R103 failure), one session's
title sent under another's id (R101), and an agent that cannot start and says why on stdout (COULD NOT START, its
banner shown). Each runs the groups that matter (`-k`), so each takes seconds."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_fixtures import launch_command
from tests.support.conformance_runs import run_forked
from tests.support.harness import clean_env

pytestmark = pytest.mark.slow  # whole suite runs (of a few groups each)

ROOT = Path(__file__).resolve().parents[2]
STARTUP_AGENT = ROOT / "tests" / "support" / "acp_fixtures" / "startup_agent.py"


def run(tmp: Path, agent: list[str], *options: str) -> tuple[int, str, dict[str, Any]]:
    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    out = run_forked([*options, "--report-json", str(report), "--", *agent], timeout=300, env=clean_env(tmp), cwd=ROOT)
    return out.returncode, out.stdout, json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}


def fixture(*quirks: str) -> list[str]:
    return launch_command("fixture_agent", *(f"--quirk={q}" for q in quirks))


def statuses(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["requirements"]}


def details(report: dict[str, Any], rid: str) -> str:
    return " ".join(f["detail"] for f in statuses(report)[rid]["findings"])


def failed(report: dict[str, Any]) -> set[str]:
    return {rid for rid, r in statuses(report).items() if r["status"] == "FAIL"}


def acp(report: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in report["verdicts"] if v["profile"] == "acp")


def test_a_sign_in_that_needs_a_browser_is_not_tried_and_fails_nothing(tmp_path: Path) -> None:
    """gemini-cli's case: session/new wants sign-in, the one method opens a browser. The suite does not try it
    (it would hang): what needed a session is untested, with that reason, and nothing is the agent's failure."""
    code, stdout, report = run(
        tmp_path, fixture("auth-hangs"), "-k", "sessions or auth or mcp or coverage-auth", "--timeout", "3"
    )
    status = statuses(report)
    assert not failed(report), stdout[-3000:]
    for rid in ("R33", "R60", "R48", "R49"):
        assert status[rid]["status"] == "NOT_TESTED", (rid, status[rid])
    assert "need a browser or a person" in details(report, "R33")
    assert "sign-in could not complete" in details(report, "R48")
    assert code == 0 and acp(report)["verdict"] == "NO VIOLATION FOUND", stdout[-3000:]


def test_a_sign_in_that_hangs_when_asked_for_is_untested_not_failed(tmp_path: Path) -> None:
    """Named with --auth-method, the browser method is tried; its authenticate never answers: "sign-in could not
    complete", NOT_TESTED, and what depended on it with it — never R33, R48 or R60 failures."""
    code, stdout, report = run(
        tmp_path, fixture("auth-hangs"), "-k", "sessions or auth or mcp", "--timeout", "2",
        "--auth-method", "oauth-personal",
    )  # fmt: skip
    status = statuses(report)
    assert not failed(report), stdout[-3000:]
    said = "sign-in could not complete: authenticate 'oauth-personal' got no answer within 2 s"
    for rid in ("R33", "R48", "R60"):
        assert status[rid]["status"] == "NOT_TESTED" and said in details(report, rid), (rid, status[rid])
    assert code == 0, stdout[-3000:]


def test_models_at_the_root_is_advisory_naming_the_schema_that_defines_it(tmp_path: Path) -> None:
    code, stdout, report = run(tmp_path, fixture("models-root"), "-k", "sessions")
    status = statuses(report)
    assert status["R26"]["status"] == "PASS", stdout[-3000:]
    assert status["R26.1"]["status"] == "FAIL" and status["R26.1"]["tier"] == "ADVISORY"
    assert "the session/new result carries models, defined at its root by the unstable schema of " in details(
        report, "R26.1"
    )
    assert "@agentclientprotocol/sdk 0.17.0" in details(report, "R26.1")
    assert code == 0 and acp(report)["verdict"] == "CONFORMANT", stdout[-3000:]


def test_a_turn_that_outlives_the_prompt_timeout_is_untested_not_failed(tmp_path: Path) -> None:
    code, stdout, report = run(tmp_path, fixture("late-turn"), "-k", "prompt", "--prompt-timeout", "1")
    status = statuses(report)
    assert status["R103"]["status"] == "NOT_TESTED", stdout[-3000:]
    assert details(report, "R103") == "the turn did not complete within 1 s"
    assert not failed(report), stdout[-3000:]
    assert code == 0 and acp(report)["verdict"] == "NO VIOLATION FOUND"
    assert "R103: the turn did not complete within 1 s (" in stdout  # the verdict line names the one reason


def test_an_update_under_another_sessions_id_fails_r101(tmp_path: Path) -> None:
    """fast-agent's case: one session's title sent under the other's id."""
    code, stdout, report = run(tmp_path, fixture("misroute-title"), "-k", "coverage-history")
    assert failed(report) == {"R101"}, stdout[-3000:]
    assert "carries 'history-marker-one-4e1f', the words of session" in details(report, "R101")
    assert code == 1


def test_updates_under_their_own_session_pass_r101(tmp_path: Path) -> None:
    code, stdout, report = run(tmp_path, fixture(), "-k", "coverage-history")
    assert statuses(report)["R101"]["status"] == "PASS", stdout[-3000:]
    assert code == 0, stdout[-3000:]


def test_an_agent_that_cannot_start_is_its_own_verdict_with_its_stdout_banner(tmp_path: Path) -> None:
    agent = [sys.executable, str(STARTUP_AGENT), "--banner", "Error: --model is required", "--die", "2"]
    code, stdout, report = run(tmp_path, agent)
    assert code == 2, stdout[-3000:]
    reason = "the agent exited before answering initialize (exit code 2)"
    assert f"ACP v1: COULD NOT START — {reason} (" in stdout
    assert "NO VIOLATION FOUND" not in stdout
    assert "its stdout before any answer (2 lines that are not JSON):" in stdout
    assert "  | Error: --model is required\n" in stdout
    verdict = acp(report)
    assert verdict["verdict"] == "COULD NOT START" and verdict["couldNotStart"] == reason
    assert report["startup"]["banner"] == ["Error: --model is required", "see --help for the options"]
    assert report["startup"]["exited"] is True and report["startup"]["returncode"] == 2


def test_a_sign_in_that_succeeds_but_does_not_satisfy_the_agent_is_untested_not_failed(tmp_path: Path) -> None:
    """gemini-cli's API-key method with no key in its environment: `authenticate` answers `{}`, and session/new
    still answers auth_required. A sign-in the suite cannot give: what needed a session is untested with the
    agent's message — never R33 or R60 failures (the 2026-12-07 record had both)."""
    agent = launch_command("fixture_agent", "--auth=ok", "--quirk=key-missing")
    code, stdout, report = run(tmp_path, agent, "-k", "sessions or mcp", "--timeout", "3")
    status = statuses(report)
    assert not failed(report), stdout[-3000:]
    for rid in ("R33", "R60"):
        assert status[rid]["status"] == "NOT_TESTED", (rid, status[rid])
        assert "still needs sign-in after authenticate" in details(report, rid), (rid, status[rid])
        assert "API key is missing" in details(report, rid), (rid, status[rid])
    assert code == 0 and acp(report)["verdict"] == "NO VIOLATION FOUND", stdout[-3000:]
