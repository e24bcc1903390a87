"""Findings and verdicts of the conformance suite (conformance/outcome.py, conformance/report.py): how a check's
exception becomes a finding of exactly one requirement, how a requirement's status follows from its findings,
which statuses decide a profile's verdict, and the text report built from them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.outcome import Blocked, Checks, Finding, Status, UnboundCheck, describe, overall
from conformance.report import Outcome, outcomes, text, verdict
from conformance.requirements import BY_ID, REGISTRY, Profile, Requirement, Tier
from conformance.runner import RunRecord
from tests.support.hypothesis_profiles import examples


def ids_of(checks: Checks, status: Status) -> list[str]:
    return [f.rid for f in checks.findings if f.status is status]


# --- Checks ---------------------------------------------------------------------------------------------------


def test_at_turns_an_exception_into_a_fail_of_that_id_and_blocks() -> None:
    c = Checks("g", ("R36", "R41"))
    with pytest.raises(Blocked) as info, c.at("R36"):
        raise RuntimeError("the agent said nothing")
    assert info.value.rid == "R36"
    assert "RuntimeError" in info.value.detail and "the agent said nothing" in info.value.detail
    assert c.findings == [Finding("R36", Status.FAIL, info.value.detail, "g")]
    assert c.current is None and c.last == "R36"


def test_at_without_an_exception_reports_nothing_of_its_own() -> None:
    c = Checks("g", ("R36",))
    with c.at("R36"):
        c.passed("R36", "fine")
    assert c.findings == [Finding("R36", Status.PASS, "fine", "g")]


def test_a_blocked_step_inside_at_is_not_blamed_twice() -> None:
    """A needs() that fails inside an at() blocks on the needed id; the enclosing id gets no FAIL."""
    c = Checks("g", ("R66",))
    with pytest.raises(Blocked) as info, c.at("R66"), c.needs("R103"):
        raise TimeoutError("no answer")
    assert info.value.rid == "R103"
    assert c.findings == []


def test_nested_at_fails_the_innermost_id_only() -> None:
    c = Checks("g", ("R1", "R2"))
    with pytest.raises(Blocked), c.at("R1"), c.at("R2"):
        raise ValueError("x")
    assert ids_of(c, Status.FAIL) == ["R2"]
    assert c.current is None


def test_needs_blocks_without_a_fail() -> None:
    c = Checks("g", ("R66", "R67"))
    with pytest.raises(Blocked) as info, c.needs("R103"):
        raise OSError("pipe closed")
    assert info.value.rid == "R103" and "pipe closed" in info.value.detail
    assert c.findings == []


def test_at_and_needs_leave_base_exceptions_alone() -> None:
    """Cancellation (anyio's, a KeyboardInterrupt) is not a finding: it must pass through untouched."""
    c = Checks("g", ("R1",))
    with pytest.raises(KeyboardInterrupt), c.at("R1"):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt), c.needs("R1"):
        raise KeyboardInterrupt
    assert c.findings == []


@pytest.mark.parametrize("report", ["check", "passed", "failed", "skip", "untested"])
def test_reporting_an_undeclared_id_raises_unbound_check(report: str) -> None:
    c = Checks("g", ("R36",), ("R4",))
    args: tuple[object, ...] = ("X999", True, "d") if report == "check" else ("X999", "d")
    with pytest.raises(UnboundCheck, match="X999"):
        getattr(c, report)(*args)
    assert c.findings == []


def test_an_undeclared_id_inside_at_is_unbound_not_a_finding() -> None:
    """A step failing under an id the group never declared is the suite's bug: UnboundCheck, not Blocked."""
    c = Checks("g", ("R36",))
    with pytest.raises(UnboundCheck), c.at("X999"):
        raise RuntimeError("boom")
    assert c.findings == []


def test_shared_ids_may_be_reported() -> None:
    c = Checks("g", ("R36",), ("R4", "R36"))
    assert c.ids == ("R36", "R4")
    assert c.check("R4", False, "bad line") is False
    assert c.check("R36", True, "ok") is True
    assert [(f.rid, f.status) for f in c.findings] == [("R4", Status.FAIL), ("R36", Status.PASS)]
    assert c.reported("R4") and not c.reported("R1")


def test_close_marks_only_the_groups_own_unreported_ids_not_tested_with_the_stop_reason() -> None:
    c = Checks("g", ("R66", "R67", "R70"), ("R4", "R105"))
    c.passed("R66")
    c.skip("R67", "not advertised")
    c.close(Blocked("R103", "the turn never ended"))
    assert c.stopped == "stopped at R103: the turn never ended"
    untested = [f for f in c.findings if f.status is Status.NOT_TESTED]
    assert [(f.rid, f.detail) for f in untested] == [("R70", "stopped at R103: the turn never ended")]
    assert not c.reported("R4") and not c.reported("R105")  # transcript ids stay silent


def test_close_without_a_stop_says_no_check_reached_it() -> None:
    c = Checks("g", ("R1", "R2"))
    c.failed("R1", "bad")
    c.close(None)
    assert c.stopped is None
    assert [(f.rid, f.status, f.detail) for f in c.findings] == [
        ("R1", Status.FAIL, "bad"),
        ("R2", Status.NOT_TESTED, "no check of this group reached it"),
    ]


def test_describe_names_the_exception_type_and_is_bounded() -> None:
    assert describe(ValueError("")) == "ValueError"
    assert describe(ValueError("bad value")) == "ValueError: bad value"
    assert describe(TimeoutError("TimeoutError after 3 s")) == "TimeoutError after 3 s"
    assert len(describe(RuntimeError("x" * 10_000))) == 2000


# --- overall ----------------------------------------------------------------------------------------------------


def req(rid: str, tier: Tier = Tier.MANDATORY, gate: str | None = None, profile: Profile = Profile.ACP) -> Requirement:
    return Requirement(rid, tier, f"text of {rid}", "section", gate, profile)


def f(rid: str, status: Status, detail: str = "", group: str = "g") -> Finding:
    return Finding(rid, status, detail, group)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([Status.PASS, Status.FAIL, Status.NOT_TESTED, Status.SKIPPED], Status.FAIL),
        ([Status.SKIPPED, Status.NOT_TESTED, Status.PASS], Status.PASS),
        ([Status.SKIPPED, Status.NOT_TESTED], Status.NOT_TESTED),
        ([Status.SKIPPED, Status.SKIPPED], Status.SKIPPED),
    ],
)
def test_overall_precedence(statuses: list[Status], expected: Status) -> None:
    found = [f("R1", s, str(i)) for i, s in enumerate(statuses)] + [f("R2", Status.FAIL)]
    status, mine = overall(req("R1"), found)
    assert status is expected
    assert mine and all(x.rid == "R1" and x.status is expected for x in mine)


@given(st.lists(st.sampled_from(list(Status)), min_size=1, max_size=8))
@settings(max_examples=examples(200), deadline=None)
def test_overall_is_the_highest_status_found(statuses: list[Status]) -> None:
    order = [Status.FAIL, Status.PASS, Status.NOT_TESTED, Status.SKIPPED]
    status, mine = overall(req("R1"), [f("R1", s) for s in statuses])
    assert status is min(statuses, key=order.index)
    assert len(mine) == statuses.count(status)


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        ("used:terminal", Status.SKIPPED),
        ("used:permission", Status.SKIPPED),
        ("loadSession", Status.NOT_TESTED),
        (None, Status.NOT_TESTED),
    ],
)
def test_overall_without_any_finding(gate: str | None, expected: Status) -> None:
    assert overall(req("R1", Tier.CAPABILITY, gate), [f("R2", Status.PASS)]) == (expected, [])


# --- verdicts ---------------------------------------------------------------------------------------------------


def outcome(
    rid: str, tier: Tier, status: Status, profile: Profile = Profile.ACP, gate: str | None = None, detail: str = ""
) -> Outcome:
    return Outcome(req(rid, tier, gate, profile), status, [f(rid, status, detail)])


def test_all_passed_is_conformant() -> None:
    v = verdict(Profile.ACP, [outcome("R1", Tier.MANDATORY, Status.PASS), outcome("R2", Tier.ADVISORY, Status.PASS)])
    assert v.conformant and v.failed == [] and v.untested == []
    assert v.counts == {"PASS": 2, "FAIL": 0, "SKIPPED": 0, "NOT_TESTED": 0}
    assert v.line.startswith("ACP v1: CONFORMANT (2 pass")


@pytest.mark.parametrize("tier", [Tier.MANDATORY, Tier.CAPABILITY])
def test_an_untested_deciding_requirement_is_not_conformant(tier: Tier) -> None:
    v = verdict(Profile.ACP, [outcome("R1", Tier.MANDATORY, Status.PASS), outcome("R2", tier, Status.NOT_TESTED)])
    assert not v.conformant and v.untested == ["R2"] and v.failed == []


@pytest.mark.parametrize("tier", [Tier.MANDATORY, Tier.CAPABILITY])
def test_a_failed_deciding_requirement_is_not_conformant(tier: Tier) -> None:
    v = verdict(Profile.ACP, [outcome("R1", tier, Status.FAIL)])
    assert not v.conformant and v.failed == ["R1"]


def test_a_skipped_capability_is_conformant() -> None:
    v = verdict(
        Profile.ACP, [outcome("R1", Tier.MANDATORY, Status.PASS), outcome("R66", Tier.CAPABILITY, Status.SKIPPED)]
    )
    assert v.conformant


@pytest.mark.parametrize("tier", [Tier.ADVISORY, Tier.INFORMATIONAL])
@pytest.mark.parametrize("status", [Status.FAIL, Status.NOT_TESTED])
def test_advisory_and_informational_results_never_decide(tier: Tier, status: Status) -> None:
    v = verdict(Profile.ACP, [outcome("R1", Tier.MANDATORY, Status.PASS), outcome("R14", tier, status)])
    assert v.conformant and v.failed == [] and v.untested == []


def test_usage_findings_never_change_the_acp_verdict() -> None:
    results = [
        outcome("R1", Tier.MANDATORY, Status.PASS),
        outcome("E1", Tier.MANDATORY, Status.FAIL, Profile.USAGE),
        outcome("E4", Tier.MANDATORY, Status.NOT_TESTED, Profile.USAGE),
    ]
    acp = verdict(Profile.ACP, results)
    assert acp.conformant and acp.counts["FAIL"] == 0
    usage = verdict(Profile.USAGE, results)
    assert not usage.conformant and usage.failed == ["E1"] and usage.untested == ["E4"]
    assert usage.line.startswith("usage profile (ama's context-meter contract): NOT MET")


def test_outcomes_over_the_registry_follow_the_findings() -> None:
    record = RunRecord(findings=[f("R1", Status.PASS), f("R3", Status.FAIL, "a line with a raw newline")])
    results = outcomes(record, (Profile.ACP,))
    assert [o.req.id for o in results] == [r.id for r in REGISTRY if r.profile is Profile.ACP]
    by_id = {o.req.id: o for o in results}
    assert by_id["R1"].status is Status.PASS
    assert by_id["R3"].status is Status.FAIL and by_id["R3"].detail == "a line with a raw newline"
    assert by_id["R133"].status is Status.SKIPPED  # used:terminal, never used
    assert by_id["R36"].status is Status.NOT_TESTED
    partial = outcomes(record, (Profile.ACP, Profile.USAGE), ran={"R1", "E1"})
    assert [o.req.id for o in partial] == ["R1", "E1"]


def test_outcome_detail_and_label() -> None:
    o = Outcome(BY_ID["R8"], Status.PASS, [f("R8", Status.PASS, d) for d in ("a", "b", "a", "c", "d", "")])
    assert o.label == "INFO"  # an informational requirement is observed, not passed
    assert o.detail == "a; b (+2 more)"
    assert Outcome(BY_ID["R1"], Status.NOT_TESTED, []).label == "UNTESTED"
    assert Outcome(BY_ID["R1"], Status.SKIPPED, []).label == "SKIP"


# --- the text report ----------------------------------------------------------------------------------------------

ROW = re.compile(r"^(PASS|FAIL|SKIP|UNTESTED|INFO) +(\S+)")


def test_text_report_has_one_line_per_requirement_grouped_by_tier_and_names_failed_and_untested() -> None:
    findings = [
        f("R1", Status.PASS),
        f("R3", Status.FAIL, "a line with a raw newline"),
        f("R14", Status.FAIL, "too long"),
        f("R8", Status.PASS, "a batch got an error"),
        f("E1", Status.FAIL, "no usage_update"),
    ]
    results = outcomes(RunRecord(findings=findings), (Profile.ACP, Profile.USAGE))
    verdicts = [verdict(p, results) for p in (Profile.ACP, Profile.USAGE)]
    report = text(results, verdicts, 12.34, partial=False)
    lines = report.splitlines()

    rows: dict[str, str] = {}
    tier: Tier | None = None
    profile: Profile | None = None
    for line in lines:
        if line.startswith("== "):
            profile = Profile.ACP if line.startswith("== ACP") else Profile.USAGE
            tier = None
        elif line.startswith("-- "):
            tier = Tier(line.split()[1])
        elif m := ROW.match(line):
            rid = m.group(2)
            assert rid not in rows, f"{rid} reported twice"
            rows[rid] = line
            assert tier is BY_ID[rid].tier and profile is BY_ID[rid].profile, line
    assert list(rows) == [
        o.req.id for o in sorted(results, key=lambda o: (o.req.profile.value != "acp", list(Tier).index(o.req.tier)))
    ]
    assert rows["R3"].startswith("FAIL") and "a line with a raw newline" in rows["R3"]
    assert rows["R8"].startswith("INFO")
    assert rows["R133"].startswith("SKIP") and "[used:terminal]" in rows["R133"]

    acp_line = next(line for line in lines if line.startswith("ACP v1:"))
    assert "NOT CONFORMANT" in acp_line
    failed_part = acp_line.split("failed ", 1)[1].split(";")[0]
    assert "R3" in failed_part and "R14" not in acp_line  # advisory failures never reach the verdict
    untested = [
        o.req.id
        for o in results
        if o.req.profile is Profile.ACP and o.req.tier.decides and o.status is Status.NOT_TESTED
    ]
    assert untested and all(re.search(rf"\b{re.escape(r)}\b", acp_line.split("not tested ", 1)[1]) for r in untested)
    assert any(line.startswith("usage profile") and "failed E1" in line for line in lines)
    assert lines[-1] == "finished in 12.3 s"
    assert "(a partial run" not in report
    assert "(a partial run" in text(results, verdicts, 1.0, partial=True)


def test_text_report_of_one_profile_only_has_that_section() -> None:
    results = outcomes(RunRecord(), (Profile.ACP,))
    report = text(results, [verdict(Profile.ACP, results)], 0.0, partial=False)
    assert "== ACP v1 ==" in report and "usage profile" not in report


def test_an_unbound_report_inside_at_is_not_blamed_on_the_agent() -> None:
    c = Checks("g", ("R36",))
    with pytest.raises(UnboundCheck), c.at("R36"):
        c.passed("X999", "a typo in the suite")
    with pytest.raises(UnboundCheck), c.needs("R103"):
        c.passed("X999", "a typo in the suite")
    assert c.findings == []


def test_a_sign_in_the_suite_cannot_give_is_untested_not_failed() -> None:
    from conformance.outcome import SignInNeeded

    c = Checks("g", ("R33",))
    with pytest.raises(Blocked), c.at("R33"):
        raise SignInNeeded("session/new needs sign-in; authenticate 'x' answered -32000: run setup")
    assert [(f.rid, f.status) for f in c.findings] == [("R33", Status.NOT_TESTED)]
    assert "--auth-method" in c.findings[0].detail
