"""The report: each requirement with its whole text and what was seen, counts and a verdict per profile, and the
JSON record.

A profile's verdict is one of three:

- CONFORMANT: every deciding requirement (MANDATORY, and CAPABILITY where its gate is in) was tested and passed;
- NO VIOLATION FOUND: nothing failed, but some deciding requirements could not be tested — each named with the
  reason that blocked it (a sign-in, the agent's own model that never called a tool, a turn too short to cancel);
- NOT CONFORMANT: a deciding requirement failed.

The first two exit 0 and the third 1; `--strict` makes an untested deciding requirement exit 1 too (the official
ACP test kit likewise reports what it could not exercise apart from its verdict). ADVISORY and INFORMATIONAL
requirements are reported and never decide; an INFORMATIONAL one is an observation, never a FAIL. The usage
profile has a verdict of its own and never touches the ACP one.
"""

from __future__ import annotations

import enum
import json
import re
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any

from ama_acp.textsafe import one_line
from ama_conformance.core.outcome import Finding, Status, overall
from ama_conformance.core.runner import STARTUP, GroupRecord, RunRecord
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS
from ama_conformance.groups.catalog import GROUPS
from ama_conformance.requirements.registry import REGISTRY, Profile, Requirement, Tier

_LABEL = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.SKIPPED: "SKIP", Status.NOT_TESTED: "UNTESTED"}
_COUNTED = {Status.PASS: "pass", Status.FAIL: "fail", Status.SKIPPED: "skipped", Status.NOT_TESTED: "not tested"}
WIDTH = 110  # the text report's lines are wrapped to this many characters
_INDENT = " " * 17  # under the requirement's text: the label (9) and the id (8) columns
_DETAIL_CHARS = 600  # one detail in the text report (the JSON record keeps it whole)
_DETAILS_SHOWN = 6  # distinct details of one requirement in the text report
_IDS_NAMED = 8  # untested ids named on a cause's line; more are counted (the JSON record lists them all)
NO_CHECK = "no check reached it"
_STOPPED = re.compile(r"stopped at (\S+): ")  # the reason Checks.close gives the ids a blocked group left


class Kind(enum.Enum):
    CONFORMANT = "CONFORMANT"
    NO_VIOLATION = "NO VIOLATION FOUND"
    NOT_CONFORMANT = "NOT CONFORMANT"
    COULD_NOT_START = "COULD NOT START"  # the command exited before answering initialize: no protocol verdict


@dataclass(frozen=True)
class Outcome:
    req: Requirement
    status: Status
    findings: list[Finding]

    @property
    def details(self) -> list[str]:
        """What the findings saw, each distinct detail once, in the order first seen."""
        return list(dict.fromkeys(f.detail for f in self.findings if f.detail))

    @property
    def detail(self) -> str:
        return "; ".join(self.details)

    @property
    def label(self) -> str:
        if self.req.tier is Tier.INFORMATIONAL and self.status is Status.PASS:
            return "INFO"
        return _LABEL[self.status]

    @property
    def cause(self) -> str:
        """Why an untested requirement was not tested: the first reason a check gave, or that none reached it."""
        return next((f.detail for f in self.findings if f.status is Status.NOT_TESTED and f.detail), NO_CHECK)


@dataclass(frozen=True)
class Verdict:
    profile: Profile
    failed: list[str]
    untested: list[str]
    counts: dict[str, int]
    causes: dict[str, list[str]] = field(default_factory=dict)  # reason -> the untested deciding ids it blocked
    startup: str | None = None  # why the agent could not start, when its command exited before initialize

    @property
    def kind(self) -> Kind:
        if self.startup is not None:
            return Kind.COULD_NOT_START
        if self.failed:
            return Kind.NOT_CONFORMANT
        return Kind.NO_VIOLATION if self.untested else Kind.CONFORMANT

    @property
    def conformant(self) -> bool:
        return self.kind is Kind.CONFORMANT

    def exit_code(self, strict: bool = False) -> int:
        """1 for a failure (or, with --strict, a deciding requirement left untested), else 0; 2 for an agent that
        could not start (a command that cannot run, like one not found: no verdict on the protocol)."""
        if self.kind is Kind.COULD_NOT_START:
            return 2
        return 1 if self.failed or (strict and self.untested) else 0

    @property
    def name(self) -> str:
        if self.profile is Profile.ACP:
            return self.kind.value
        return {
            Kind.CONFORMANT: "ALL PASS",
            Kind.NO_VIOLATION: "NO VIOLATION FOUND",
            Kind.NOT_CONFORMANT: "NOT MET",
            Kind.COULD_NOT_START: Kind.COULD_NOT_START.value,
        }[self.kind]

    @property
    def line(self) -> str:
        """The verdict in one line: the failed ids, and how many deciding ids went untested (the reasons follow
        on `lines`)."""
        title = "ACP v1" if self.profile is Profile.ACP else "usage profile (ama's context-meter contract)"
        counts = ", ".join(f"{n} {_COUNTED[Status[k]]}" for k, n in self.counts.items() if n)
        parts = []
        if self.startup is not None:
            return f"{title}: {self.name} — {self.startup} ({counts})"
        if self.failed:
            parts.append("failed " + ", ".join(self.failed))
        if len(self.causes) == 1:
            reason, ids = next(iter(self.causes.items()))
            parts.append(f"not tested {_named(ids)}: {reason}")
        elif self.causes:
            parts.append(f"{len(self.untested)} not tested, for {len(self.causes)} reasons:")
        said = f" — {'; '.join(parts)}" if parts else ""
        return f"{title}: {self.name}{said} ({counts})"

    @property
    def lines(self) -> list[str]:
        """The verdict line and, when untested ids have more than one reason, one line per reason under it."""
        out = [self.line]
        if len(self.causes) > 1:
            out += [f"  not tested {_named(ids)}: {reason}" for reason, ids in self.causes.items()]
        return out


def _named(ids: list[str]) -> str:
    return ", ".join(ids[:_IDS_NAMED]) + (f", … ({len(ids)} in all)" if len(ids) > _IDS_NAMED else "")


def outcomes(record: RunRecord, profiles: tuple[Profile, ...], ran: set[str] | None = None) -> list[Outcome]:
    """Each requirement of the profiles run (of the selected groups' ids when `ran` is given). In such a partial
    run, a transcript check that judged nothing is left out rather than shown untested: the groups that give it
    something to judge were not selected."""
    owned = {g.name: set(g.ids) for g in GROUPS}
    out = []
    for req in REGISTRY:
        if req.profile not in profiles or (ran is not None and req.id not in ran):
            continue
        status, findings = overall(req, record.findings)
        if ran is not None and status is Status.NOT_TESTED and _shared_only(req.id, findings, owned):
            continue
        out.append(Outcome(req, status, findings))
    return out


def _shared_only(rid: str, findings: list[Finding], owned: dict[str, set[str]]) -> bool:
    """Whether `rid` is a transcript check that no group declaring it reported on."""
    return rid in TRANSCRIPT_IDS and not any(rid in owned.get(f.group, ()) for f in findings)


def verdict(profile: Profile, results: list[Outcome], startup: str | None = None) -> Verdict:
    """`startup`: why the agent could not start (its command exited before answering initialize), if so."""
    mine = [o for o in results if o.req.profile is profile]
    deciding = [o for o in mine if o.req.tier.decides]
    failed = [o.req.id for o in deciding if o.status is Status.FAIL]
    untested = [o for o in deciding if o.status is Status.NOT_TESTED]
    causes = _causes(untested, mine)
    return Verdict(profile, failed, [o.req.id for o in untested], _status_counts(mine), causes, startup)


BANNER_LINES = 20  # the lines of a start-up banner the report keeps


def startup_banner(record: RunRecord) -> list[str]:
    """What the agent wrote on stdout before it answered initialize that is not a JSON object (a banner, or its
    error said on stdout), from the start-up probe's transcript, which the record keeps when the probe failed:
    the first lines, each cut to 500 characters."""
    lines: list[str] = []
    for group in record.groups:
        if group.name != STARTUP:
            continue
        for agent in group.agents:
            lines += _before_answer(agent.transcript)
    return [line[:500] for line in lines[:BANNER_LINES]]


def _before_answer(transcript: list[dict[str, Any]]) -> list[str]:
    out = []
    for entry in transcript:
        if entry["dir"] != "in" or not entry["line"].strip():
            continue
        try:
            msg = json.loads(entry["line"])
        except ValueError:
            msg = None
        if isinstance(msg, dict):
            if "id" in msg and "method" not in msg:
                break  # initialize's answer: what follows is the protocol's
            continue
        out.append(entry["line"])
    return out


def _status_counts(rows: list[Outcome]) -> dict[str, int]:
    return {s.name: sum(1 for o in rows if o.status is s) for s in Status}


def _causes(untested: list[Outcome], mine: list[Outcome]) -> dict[str, list[str]]:
    """Each reason that left deciding requirements untested, and the ids it left so."""
    by_id = {o.req.id: o for o in mine}
    causes: dict[str, list[str]] = {}
    for o in untested:
        causes.setdefault(one_line(_root_cause(o, by_id, frozenset({o.req.id}))), []).append(o.req.id)
    return causes


def _root_cause(o: Outcome, by_id: dict[str, Outcome], seen: frozenset[str]) -> str:
    """The reason behind a chain of blocked steps: a group stopped at R103 that R103 itself could not be tested
    for is blocked for R103's own reason (one sign-in, one unreachable model: one reason)."""
    blocked = _STOPPED.match(o.cause)
    ahead = by_id.get(blocked.group(1)) if blocked else None
    if ahead is not None and ahead.status is Status.NOT_TESTED and ahead.req.id not in seen:
        return _root_cause(ahead, by_id, seen | {o.req.id})
    return o.cause


def _tier_word(tier: Tier, status: Status) -> str:
    """A status in a tier's count: an informational requirement's PASS is an observation."""
    return "observed" if tier is Tier.INFORMATIONAL and status is Status.PASS else _COUNTED[status]


def _wrapped(text: str, first: str) -> list[str]:
    """`text` (made one line first: an agent's words cannot start a line of their own) wrapped under `first`."""
    return textwrap.wrap(
        one_line(text),
        WIDTH,
        initial_indent=first,
        subsequent_indent=_INDENT,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _rows(o: Outcome) -> list[str]:
    gate = f"[{o.req.gate}] " if o.req.gate else ""
    lines = _wrapped(gate + o.req.text, f"{o.label:<9}{o.req.id:<8}")
    details = o.details
    for d in details[:_DETAILS_SHOWN]:
        shown = d if len(d) <= _DETAIL_CHARS else d[:_DETAIL_CHARS] + "…"
        lines += _wrapped(shown, _INDENT + "— ")
    if len(details) > _DETAILS_SHOWN:
        lines.append(f"{_INDENT}(+{len(details) - _DETAILS_SHOWN} more in --report-json)")
    return lines


def _profile_lines(profile: Profile, results: list[Outcome]) -> list[str]:
    """A profile's part of the text report: its heading, then each tier's heading and rows ([] if none ran)."""
    mine = [o for o in results if o.req.profile is profile]
    if not mine:
        return []
    lines = [
        "",
        "== ACP v1 ==" if profile is Profile.ACP else "== usage profile (reported apart; never decides ACP) ==",
    ]
    for tier in Tier:
        rows = [o for o in mine if o.req.tier is tier]
        if rows:
            lines.append(f"-- {tier.value} ({len(rows)}: {_tier_counts(tier, rows)})")
            for o in rows:
                lines += _rows(o)
    return lines


def _tier_counts(tier: Tier, rows: list[Outcome]) -> str:
    """How many rows of a tier have each status that occurs, e.g. `12 pass, 1 fail`."""
    return ", ".join(
        f"{sum(1 for o in rows if o.status is s)} {_tier_word(tier, s)}"
        for s in Status
        if any(o.status is s for o in rows)
    )


def text(results: list[Outcome], verdicts: list[Verdict], seconds: float, partial: bool) -> str:
    lines: list[str] = []
    for profile in (Profile.ACP, Profile.USAGE):
        lines += _profile_lines(profile, results)
    lines.append("")
    for v in verdicts:
        lines += v.lines
    if partial:
        lines.append("(a partial run, -k: the verdict covers the selected groups' requirements only)")
    lines.append(f"finished in {seconds:.1f} s")
    # A finding's detail quotes the agent (its name, its error messages, the lines it broke the protocol with):
    # every line of the report is one line, its controls made visible, whatever the agent put in them.
    return "\n".join(one_line(line) for line in lines) + "\n"


def as_json(record: RunRecord, results: list[Outcome], verdicts: list[Verdict], command: list[str]) -> dict[str, Any]:
    failing_groups = {f.group for o in results for f in o.findings if o.status in (Status.FAIL, Status.NOT_TESTED)}
    return {
        "agent": {
            "command": command,
            "agentInfo": record.init.get("agentInfo"),
            "protocolVersion": record.init.get("protocolVersion"),
            "agentCapabilities": record.init.get("agentCapabilities"),
            "authMethods": record.init.get("authMethods"),
        },
        "verdicts": [_verdict_json(v) for v in verdicts],
        "requirements": [_requirement_json(o) for o in results],
        "groups": [_group_json(g, whole=g.name in failing_groups) for g in record.groups],
        "seconds": record.seconds,
    }


def _verdict_json(v: Verdict) -> dict[str, Any]:
    return {
        "profile": v.profile.value,
        "verdict": v.name,
        "conformant": v.conformant,
        "failed": v.failed,
        "notTested": v.untested,
        "notTestedBecause": [{"reason": reason, "ids": ids} for reason, ids in v.causes.items()],
        "couldNotStart": v.startup,
        "counts": v.counts,
    }


def _requirement_json(o: Outcome) -> dict[str, Any]:
    # An informational requirement's findings are observations whatever their check said.
    observed = o.req.tier is Tier.INFORMATIONAL
    return {
        "id": o.req.id,
        "tier": o.req.tier.value,
        "profile": o.req.profile.value,
        "gate": o.req.gate,
        "section": o.req.section,
        "text": o.req.text,
        "status": o.status.value,
        "label": o.label,
        "findings": [
            {"group": f.group, "status": (o.status if observed else f.status).value, "detail": f.detail}
            for f in o.findings
        ],
    }


def _group_json(g: GroupRecord, *, whole: bool) -> dict[str, Any]:
    """A group's record, with its agents' whole records (stderr, transcript) where `whole`: for a group that
    reported on a requirement that failed or went untested."""
    return {
        "name": g.name,
        "seconds": g.seconds,
        "stopped": g.stopped,
        "agents": [asdict(a) if whole else {"endedBy": a.ended_by, "returncode": a.returncode} for a in g.agents],
    }
