"""Findings and verdicts of the conformance suite (conformance/core/outcome.py, conformance/core/report.py): how a check's
exception becomes a finding of exactly one requirement, how a requirement's status follows from its findings,
which statuses decide a profile's verdict, and the text report built from them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_conformance.core.outcome import Blocked, Checks, Finding, Status, UnboundCheck, describe, overall
from ama_conformance.core.report import WIDTH, Kind, Outcome, as_json, outcomes, text, verdict
from ama_conformance.core.runner import RunRecord
from ama_conformance.requirements.registry import BY_ID, REGISTRY, Profile, Requirement, Tier
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
    assert v.line.startswith("ACP v1: CONFORMANT (2 pass") and v.kind is Kind.CONFORMANT


@pytest.mark.parametrize("tier", [Tier.MANDATORY, Tier.CAPABILITY])
def test_an_untested_deciding_requirement_is_no_violation_found_and_exits_0_unless_strict(tier: Tier) -> None:
    v = verdict(
        Profile.ACP,
        [outcome("R1", Tier.MANDATORY, Status.PASS), outcome("R2", tier, Status.NOT_TESTED, detail="no model")],
    )
    assert v.kind is Kind.NO_VIOLATION and not v.conformant and v.untested == ["R2"] and v.failed == []
    assert v.exit_code() == 0 and v.exit_code(strict=True) == 1
    assert v.line.startswith("ACP v1: NO VIOLATION FOUND — not tested R2: no model (")


@pytest.mark.parametrize("tier", [Tier.MANDATORY, Tier.CAPABILITY])
def test_a_failed_deciding_requirement_is_not_conformant(tier: Tier) -> None:
    v = verdict(Profile.ACP, [outcome("R1", tier, Status.FAIL), outcome("R2", tier, Status.NOT_TESTED, detail="x")])
    assert v.kind is Kind.NOT_CONFORMANT and not v.conformant and v.failed == ["R1"]
    assert v.exit_code() == 1 and v.exit_code(strict=True) == 1
    assert v.line.startswith("ACP v1: NOT CONFORMANT — failed R1; not tested R2: x (")


def test_conformant_exits_0_strict_or_not() -> None:
    v = verdict(Profile.ACP, [outcome("R1", Tier.MANDATORY, Status.PASS), outcome("R2", Tier.ADVISORY, Status.FAIL)])
    assert v.kind is Kind.CONFORMANT and v.exit_code() == 0 and v.exit_code(strict=True) == 0


def test_untested_ids_are_grouped_under_the_one_reason_that_blocked_them() -> None:
    """The verdict names the cause, not a list of 30 ids (made-up ids T200–T229, which name no rule): one reason goes on the verdict line itself; several
    each get a line under it with the ids they blocked (named up to a few, then counted)."""
    signin = "stopped at R33: session/new needs sign-in (give --auth-method, or configure the agent)"
    many = [outcome(f"T{n}", Tier.MANDATORY, Status.NOT_TESTED, detail=signin) for n in range(200, 230)]
    one = verdict(Profile.ACP, [outcome("R1", Tier.MANDATORY, Status.PASS), *many])
    assert one.causes == {signin: [f"T{n}" for n in range(200, 230)]}
    assert one.lines == [one.line]
    assert f": {signin}" in one.line and "T200, T201" in one.line and "(30 in all)" in one.line
    assert "T229" not in one.line
    model = outcome("R54", Tier.MANDATORY, Status.NOT_TESTED, detail="the model called no tool: run with --model-env")
    unreached = Outcome(req("R55"), Status.NOT_TESTED, [])
    two = verdict(Profile.ACP, [*many, model, unreached])
    assert "32 not tested, for 3 reasons:" in two.line
    assert two.lines[1:] == [
        f"  not tested T200, T201, T202, T203, T204, T205, T206, T207, … (30 in all): {signin}",
        "  not tested R54: the model called no tool: run with --model-env",
        "  not tested R55: no check reached it",
    ]


def test_the_usage_profile_has_its_own_words() -> None:
    met = verdict(Profile.USAGE, [outcome("E1", Tier.MANDATORY, Status.PASS, Profile.USAGE)])
    untested = verdict(Profile.USAGE, [outcome("E1", Tier.MANDATORY, Status.NOT_TESTED, Profile.USAGE, detail="d")])
    assert met.line.startswith("usage profile (ama's context-meter contract): ALL PASS")
    assert untested.line.startswith("usage profile (ama's context-meter contract): NO VIOLATION FOUND")


def test_an_informational_requirement_is_an_observation_whatever_its_checks_said() -> None:
    """R44/R8 when the agent is silent or dies: what was seen is recorded, never a FAIL."""
    informational = req("R44", Tier.INFORMATIONAL)
    status, mine = overall(informational, [f("R44", Status.FAIL, "no answer"), f("R44", Status.PASS, "a result")])
    assert status is Status.PASS and [x.detail for x in mine] == ["no answer", "a result"]
    o = Outcome(informational, status, mine)
    assert o.label == "INFO"
    assert overall(informational, [f("R44", Status.NOT_TESTED, "blocked")])[0] is Status.NOT_TESTED
    record = RunRecord(findings=[f("R8", Status.FAIL, "the agent died on a batch")])
    results = outcomes(record, (Profile.ACP,))
    row = next(o for o in results if o.req.id == "R8")
    assert row.status is Status.PASS and row.label == "INFO"
    data = as_json(record, results, [verdict(Profile.ACP, results)], ["agent"])
    shown = next(r for r in data["requirements"] if r["id"] == "R8")
    assert shown["label"] == "INFO" and [x["status"] for x in shown["findings"]] == ["PASS"]
    assert "FAIL     R8 " not in text(results, [verdict(Profile.ACP, results)], 0.0, partial=False)


def test_the_json_verdict_carries_the_verdict_and_its_reasons() -> None:
    results = [
        outcome("R1", Tier.MANDATORY, Status.PASS),
        outcome("R54", Tier.MANDATORY, Status.NOT_TESTED, detail="no tool ran"),
    ]
    data = as_json(RunRecord(), results, [verdict(Profile.ACP, results)], ["agent"])
    (v,) = data["verdicts"]
    assert v["verdict"] == "NO VIOLATION FOUND" and v["conformant"] is False
    assert v["notTested"] == ["R54"] and v["notTestedBecause"] == [{"reason": "no tool ran", "ids": ["R54"]}]


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
    assert o.details == ["a", "b", "c", "d"] and o.detail == "a; b; c; d"  # each distinct detail once
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
    assert rows["R3"].startswith("FAIL") and "a line with a raw newline" in report
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
    # Every one went untested for the same reason (no check reached it): named once, the ids counted.
    assert untested and f"not tested {untested[0]}, " in acp_line and f"({len(untested)} in all): no check" in acp_line
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
    from ama_conformance.core.outcome import SignInNeeded

    c = Checks("g", ("R33",))
    with pytest.raises(Blocked), c.at("R33"):
        raise SignInNeeded("session/new needs sign-in; authenticate 'x' answered -32000: run setup")
    assert [(f.rid, f.status) for f in c.findings] == [("R33", Status.NOT_TESTED)]
    assert "--auth-method" in c.findings[0].detail


def test_the_text_report_shows_the_whole_requirement_text_wrapped_and_each_detail_once() -> None:
    long_req = BY_ID["R7"]  # a text of several hundred characters
    details = ["the same note", "the same note", "another " + "word " * 80]
    o = Outcome(long_req, Status.FAIL, [f("R7", Status.FAIL, d, group=g) for d, g in zip(details, "abc", strict=True)])
    report = text([o], [verdict(Profile.ACP, [o])], 0.0, partial=False)
    lines = report.splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("FAIL     R7 "))
    block: list[str] = []
    for line in lines[start:]:
        if block and not line.startswith(" " * 17):
            break
        block.append(line)
    words = " ".join(line[17:].strip() for line in block)
    assert long_req.text in words  # the whole text, not cut
    assert words.count("the same note") == 1 and "word word" in words


def test_ids_blocked_behind_an_untested_requirement_share_its_reason() -> None:
    """A group stopped at R33, when R33 itself could not be tested (a sign-in), is blocked for R33's reason: one
    reason on the verdict line, not one per group."""
    signin = "SignInNeeded: session/new needs sign-in (give --auth-method, or configure the agent)"
    results = [
        outcome("R33", Tier.MANDATORY, Status.NOT_TESTED, detail=signin),
        outcome("R53", Tier.MANDATORY, Status.NOT_TESTED, detail="stopped at R33: SignInNeeded: needs sign-in"),
        outcome("R110", Tier.MANDATORY, Status.NOT_TESTED, detail="stopped at R103: the turn could not run"),
        outcome("R103", Tier.MANDATORY, Status.NOT_TESTED, detail="stopped at R33: another wording of it"),
        outcome("R66", Tier.CAPABILITY, Status.NOT_TESTED, detail="stopped at R36: no answer"),
        outcome("R36", Tier.MANDATORY, Status.FAIL, detail="no answer"),
    ]
    v = verdict(Profile.ACP, results)
    assert v.causes == {signin: ["R33", "R53", "R110", "R103"], "stopped at R36: no answer": ["R66"]}
    loop = [
        outcome("R1", Tier.MANDATORY, Status.NOT_TESTED, detail="stopped at R2: a"),
        outcome("R2", Tier.MANDATORY, Status.NOT_TESTED, detail="stopped at R1: b"),
    ]
    assert sorted(verdict(Profile.ACP, loop).untested) == ["R1", "R2"]  # a cycle ends, it does not recurse


def test_a_partial_run_leaves_out_transcript_checks_with_nothing_to_judge() -> None:
    """With -k, a transcript rule no selected group gave anything to judge is left out, not shown untested; one a
    selected group owns (R131 of tools-unoffered) stays, with its reason."""
    findings = [
        f("R13", Status.NOT_TESTED, "the client sent this agent no notification", group="versions"),
        f("R4", Status.PASS, group="versions"),
        f("R37", Status.PASS, group="versions"),
        f("R131", Status.NOT_TESTED, "no tool ran", group="tools-unoffered"),
    ]
    ran = {"R37", "R13", "R4", "R131", "R132"}
    ids = [o.req.id for o in outcomes(RunRecord(findings=findings), (Profile.ACP,), ran)]
    assert "R13" not in ids and "R132" not in ids
    assert {"R4", "R37", "R131"} <= set(ids)
    whole = [o.req.id for o in outcomes(RunRecord(findings=findings), (Profile.ACP,))]
    assert "R13" in whole and "R132" in whole
