"""The suite's verdicts against agents that do what the spec allows in ways it once misjudged, and against agents
that break a rule it once let through (issue 26). Each is the fixture agent with one switch, run on the groups
that matter (`-k`), so each run takes seconds.

Allowed, so never a FAIL: usage sent with a load's replay, before its response; no usage meter at all; an
`authenticate` that answers an error (a sign-in the suite cannot give: NOT_TESTED, NO VIOLATION FOUND, exit 0 —
exit 1 with --strict); a cancelled prompt answered just after the `session/close` response; a prompt answered with
an error (the agent's model out of reach: untested behind R103, one reason named). Not allowed, so always a FAIL:
an error to the prompt a close cancelled, however soon (R88); a chunk of a cancelled turn after its response, on
every run (R105).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_fixtures import launch_command
from tests.support.conformance_runs import run_forked
from tests.support.harness import clean_env

pytestmark = pytest.mark.slow  # whole suite runs (of a few groups each)

ROOT = Path(__file__).resolve().parents[2]


def run(tmp: Path, select: str, *switches: str, options: tuple[str, ...] = ()) -> tuple[int, str, dict[str, Any]]:
    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    out = run_forked(
        [*options, "-k", select, "--report-json", str(report), "--", *launch_command("fixture_agent", *switches)],
        timeout=300,
        env=clean_env(tmp),
        cwd=ROOT,
    )
    return out.returncode, out.stdout, json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}


def statuses(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["requirements"]}


def details(report: dict[str, Any], rid: str) -> str:
    return " ".join(f["detail"] for f in statuses(report)[rid]["findings"])


def acp(report: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in report["verdicts"] if v["profile"] == "acp")


def failed(report: dict[str, Any]) -> set[str]:
    return {rid for rid, r in statuses(report).items() if r["status"] == "FAIL"}


@pytest.mark.parametrize("order", ["before", "after"])
def test_usage_with_the_replay_before_the_load_response_counts(tmp_path: Path, order: str) -> None:
    """R71/R77: the meter sent between the replay and the response (as mistral-vibe does) is the session's usage
    after the load, as much as one sent after the response."""
    code, stdout, report = run(
        tmp_path, "load or resume", "--persist", str(tmp_path / "store"), "--models", "options-first",
        "--load-usage", order,
    )  # fmt: skip
    status = statuses(report)
    assert status["R71"]["status"] == "PASS" and status["R77"]["status"] == "PASS", stdout[-3000:]
    assert status["R66"]["status"] == "PASS" and status["R74"]["status"] == "PASS"
    assert code == 0 and acp(report)["verdict"] == "CONFORMANT", stdout[-3000:]


def test_an_agent_without_a_meter_is_not_held_to_restoring_one(tmp_path: Path) -> None:
    """R71/R77 apply "if data exists": an agent that never sends usage_update has none to restore."""
    code, stdout, report = run(tmp_path, "load or resume", "--persist", str(tmp_path / "store"))
    status = statuses(report)
    assert status["R71"]["status"] == "SKIPPED" and status["R77"]["status"] == "SKIPPED", stdout[-3000:]
    assert "no usage_update" in details(report, "R71")
    assert code == 0 and failed(report) == set()


def test_an_authenticate_error_is_untested_and_no_violation_found(tmp_path: Path) -> None:
    """R48: ACP defines only authenticate's success; an error means a sign-in the suite cannot give. The verdict is
    NO VIOLATION FOUND, naming R48 with the agent's reason; exit 0, and 1 with --strict."""
    code, stdout, report = run(tmp_path, "auth", "--auth", "error")
    status = statuses(report)
    assert status["R48"]["status"] == "NOT_TESTED" and "Sign-in needs a browser" in details(report, "R48")
    assert status["R47"]["status"] == "PASS"
    assert code == 0 and failed(report) == set(), stdout[-3000:]
    verdict = acp(report)
    assert verdict["verdict"] == "NO VIOLATION FOUND" and not verdict["conformant"]
    assert verdict["notTested"] == ["R48"]
    assert [c["ids"] for c in verdict["notTestedBecause"]] == [["R48"]]
    line = next(x for x in stdout.splitlines() if x.startswith("ACP v1:"))
    assert line.startswith("ACP v1: NO VIOLATION FOUND — not tested R48: authenticate 'fixture-login' answered")
    strict, _, _ = run(tmp_path, "auth", "--auth", "error", options=("--strict",))
    assert strict == 1
    ok, stdout, report = run(tmp_path, "auth", "--auth", "ok", options=("--strict",))
    assert ok == 0 and statuses(report)["R48"]["status"] == "PASS" and acp(report)["verdict"] == "CONFORMANT"


def test_a_cancelled_prompt_answered_just_after_the_close_response_passes(tmp_path: Path) -> None:
    """R88: the spec asks that a close cancels the running prompt (`cancelled`); it orders the two responses
    nowhere (claude-agent-acp and opencode answer the close first)."""
    code, stdout, report = run(tmp_path, "close", "--close-answers-first")
    assert statuses(report)["R88"]["status"] == "PASS", stdout[-3000:]
    assert "ended 'cancelled', after the close response" in details(report, "R88")
    assert code == 0 and acp(report)["verdict"] == "CONFORMANT"


def test_an_error_to_the_prompt_a_close_cancelled_fails_however_soon_it_comes(tmp_path: Path) -> None:
    """R88: an error is never the outcome of a cancelled prompt — not excused as a race, even within a second of
    the close (mistral-vibe answers -32603)."""
    code, stdout, report = run(tmp_path, "close", "--close-error")
    assert failed(report) == {"R88"}, stdout[-3000:]
    assert "answered an error" in details(report, "R88") and "-32603" in details(report, "R88")
    assert code == 1 and "NOT CONFORMANT — failed R88" in stdout


def test_a_chunk_after_a_cancelled_turns_response_fails_r105_on_every_run(tmp_path: Path) -> None:
    """R105 (R112's case): the suite waits for the agent to fall quiet after a cancelled turn's response before it
    sends anything else, so a late chunk is caught every time, not only when it beats the next prompt."""
    for _ in range(2):
        code, stdout, report = run(tmp_path, "cancel and not permission", "--late-after-cancel", "0.2")
        assert failed(report) == {"R105"}, stdout[-3000:]
        assert "after the cancel" in details(report, "R105")
        assert code == 1


def test_a_prompt_the_agent_cannot_run_is_untested_behind_r103_for_one_reason(tmp_path: Path) -> None:
    """A prompt answered with an error (the agent's model out of reach) is no protocol violation: R103 and every
    requirement that needs a turn are NOT_TESTED, and the verdict names that one reason."""
    code, stdout, report = run(tmp_path, "prompt or cancel or close", "--prompt-error")
    status = statuses(report)
    assert failed(report) == set(), stdout[-3000:]
    assert status["R103"]["status"] == "NOT_TESTED" and status["R110"]["status"] == "NOT_TESTED"
    verdict = acp(report)
    assert verdict["verdict"] == "NO VIOLATION FOUND" and code == 0
    (cause,) = verdict["notTestedBecause"]
    assert "cannot be reached" in cause["reason"] and {"R103", "R110", "R88"} <= set(cause["ids"])
    assert "cannot be reached" in next(x for x in stdout.splitlines() if x.startswith("ACP v1:"))
