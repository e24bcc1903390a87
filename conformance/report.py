"""The report: one line per requirement grouped by tier, counts and a verdict per profile, and the JSON record.

A profile's verdict is CONFORMANT when every MANDATORY requirement passed and every CAPABILITY requirement passed
or was skipped for want of its gate; a FAIL, or a deciding requirement no check could reach (NOT_TESTED), makes it
NOT CONFORMANT. ADVISORY and INFORMATIONAL requirements are reported and never decide. The usage profile has a
verdict of its own and never touches the ACP one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ama_acp.textsafe import one_line
from conformance.outcome import Finding, Status, overall
from conformance.requirements import REGISTRY, Profile, Requirement, Tier
from conformance.runner import RunRecord

_LABEL = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.SKIPPED: "SKIP", Status.NOT_TESTED: "UNTESTED"}


@dataclass(frozen=True)
class Outcome:
    req: Requirement
    status: Status
    findings: list[Finding]

    @property
    def detail(self) -> str:
        details = [f.detail for f in self.findings if f.detail]
        unique = list(dict.fromkeys(details))
        return "; ".join(unique[:2]) + (f" (+{len(unique) - 2} more)" if len(unique) > 2 else "")

    @property
    def label(self) -> str:
        if self.req.tier is Tier.INFORMATIONAL and self.status is Status.PASS:
            return "INFO"
        return _LABEL[self.status]


@dataclass(frozen=True)
class Verdict:
    profile: Profile
    conformant: bool
    failed: list[str]
    untested: list[str]
    counts: dict[str, int]

    @property
    def line(self) -> str:
        name = "ACP v1" if self.profile is Profile.ACP else "usage profile (ama's context-meter contract)"
        counts = ", ".join(f"{n} {k.lower()}" for k, n in self.counts.items() if n)
        if self.conformant:
            return f"{name}: {'CONFORMANT' if self.profile is Profile.ACP else 'ALL PASS'} ({counts})"
        parts = []
        if self.failed:
            parts.append("failed " + ", ".join(self.failed))
        if self.untested:
            parts.append("not tested " + ", ".join(self.untested))
        return (
            f"{name}: {'NOT CONFORMANT' if self.profile is Profile.ACP else 'NOT MET'} — {'; '.join(parts)} ({counts})"
        )


def outcomes(record: RunRecord, profiles: tuple[Profile, ...], ran: set[str] | None = None) -> list[Outcome]:
    """Each requirement of the profiles run (of the selected groups' ids when `ran` is given)."""
    out = []
    for req in REGISTRY:
        if req.profile not in profiles or (ran is not None and req.id not in ran):
            continue
        status, findings = overall(req, record.findings)
        out.append(Outcome(req, status, findings))
    return out


def verdict(profile: Profile, results: list[Outcome]) -> Verdict:
    mine = [o for o in results if o.req.profile is profile]
    deciding = [o for o in mine if o.req.tier.decides]
    failed = [o.req.id for o in deciding if o.status is Status.FAIL]
    untested = [o.req.id for o in deciding if o.status is Status.NOT_TESTED]
    counts = {s.name: sum(1 for o in mine if o.status is s) for s in Status}
    return Verdict(profile, not failed and not untested, failed, untested, counts)


def text(results: list[Outcome], verdicts: list[Verdict], seconds: float, partial: bool) -> str:
    lines: list[str] = []
    for profile in (Profile.ACP, Profile.USAGE):
        mine = [o for o in results if o.req.profile is profile]
        if not mine:
            continue
        lines.append("")
        lines.append(
            "== ACP v1 ==" if profile is Profile.ACP else "== usage profile (reported apart; never decides ACP) =="
        )
        for tier in Tier:
            rows = [o for o in mine if o.req.tier is tier]
            if not rows:
                continue
            counts = ", ".join(
                f"{sum(1 for o in rows if o.status is s)} {s.name.lower()}"
                for s in Status
                if any(o.status is s for o in rows)
            )
            lines.append(f"-- {tier.value} ({len(rows)}: {counts})")
            for o in rows:
                gate = f" [{o.req.gate}]" if o.req.gate else ""
                detail = f" — {o.detail}" if o.detail else ""
                lines.append(f"{o.label:<9}{o.req.id:<8}{o.req.text[:110]}{gate}{detail[:300]}")
    lines.append("")
    for v in verdicts:
        lines.append(v.line)
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
        "verdicts": [
            {
                "profile": v.profile.value,
                "conformant": v.conformant,
                "failed": v.failed,
                "notTested": v.untested,
                "counts": v.counts,
            }
            for v in verdicts
        ],
        "requirements": [
            {
                "id": o.req.id,
                "tier": o.req.tier.value,
                "profile": o.req.profile.value,
                "gate": o.req.gate,
                "section": o.req.section,
                "text": o.req.text,
                "status": o.status.value,
                "findings": [{"group": f.group, "status": f.status.value, "detail": f.detail} for f in o.findings],
            }
            for o in results
        ],
        "groups": [
            {
                "name": g.name,
                "seconds": g.seconds,
                "stopped": g.stopped,
                "agents": [
                    asdict(a) if g.name in failing_groups else {"endedBy": a.ended_by, "returncode": a.returncode}
                    for a in g.agents
                ],
            }
            for g in record.groups
        ],
        "seconds": record.seconds,
    }
