"""Findings and statuses: what one check concluded, and how a requirement's status follows from its findings.

A group reports findings only for the requirement ids it declared (`Checks` refuses others: a check bound to no
id, or to the wrong one, is a bug of the suite, found by its meta-test and at run time). An exception inside
`checks.at(rid)` is a FAIL of `rid`, the requirement at hand; an exception inside `checks.needs(rid)` — a step
another requirement covers, such as completing a prompt before testing its replay — leaves the group's other
requirements NOT_TESTED, naming `rid`, so one defect is blamed on exactly one requirement.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ama_conformance.requirements.registry import BY_ID, Requirement, Tier


class Status(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIPPED = "SKIPPED"
    NOT_TESTED = "NOT_TESTED"


@dataclass(frozen=True)
class Finding:
    rid: str
    status: Status
    detail: str
    group: str


class UnboundCheck(Exception):
    """A check reported an id its group did not declare: a bug in the suite, never the agent's fault."""


class SignInNeeded(Exception):
    """The agent wants a sign-in (`auth_required`) that the suite cannot give it: the requirement at hand is
    untested, not failed (ACP lets an agent require authentication before sessions)."""


class TurnTimedOut(TimeoutError):
    """A prompt turn that did not complete within --prompt-timeout. The turn may still end (one public agent's
    answered after 278 s): slowness is not a violation the suite can see, so what needed the turn is untested."""


def timed_out(exc: TimeoutError) -> str:
    """A timeout's reason: its own words (a turn's), else that no answer came in time (anyio's carry none)."""
    text = str(exc).strip()
    return text if text else "no answer came within the time limit"


class Blocked(Exception):
    """A step the rest of a group depends on failed; `rid` is the requirement that covers that step."""

    def __init__(self, rid: str, detail: str) -> None:
        super().__init__(detail)
        self.rid = rid
        self.detail = detail


def describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ not in text:
        text = f"{type(exc).__name__}: {text}"
    return text[:2000]


class Checks:
    """The findings of one group. `at(rid)` / `needs(rid)` scope the steps; see the module docstring."""

    def __init__(self, group: str, ids: Iterable[str], shared: Iterable[str] = ()) -> None:
        """`ids`: the group's own requirements (each one ends with a finding); `shared`: ids it may also report
        (the transcript checks'), which stay silent where they found nothing to judge."""
        self.group = group
        self.own = tuple(ids)
        self.ids = self.own + tuple(r for r in shared if r not in self.own)
        self.findings: list[Finding] = []
        self.current: str | None = None
        self.last: str = self.ids[0] if self.ids else ""  # the requirement at hand most recently (for a timeout)
        self.stopped: str | None = None  # why the group stopped early, if it did

    def _add(self, rid: str, status: Status, detail: str) -> None:
        if rid not in self.ids:
            raise UnboundCheck(f"group {self.group!r} reported {rid!r}, which it does not declare")
        self.findings.append(Finding(rid, status, detail, self.group))

    def check(self, rid: str, ok: bool, detail: str) -> bool:
        self._add(rid, Status.PASS if ok else Status.FAIL, detail)
        return ok

    def passed(self, rid: str, detail: str = "") -> None:
        self._add(rid, Status.PASS, detail)

    def failed(self, rid: str, detail: str) -> None:
        self._add(rid, Status.FAIL, detail)

    def skip(self, rid: str, reason: str) -> None:
        self._add(rid, Status.SKIPPED, reason)

    def untested(self, rid: str, reason: str) -> None:
        self._add(rid, Status.NOT_TESTED, reason)

    def reported(self, rid: str) -> bool:
        return any(f.rid == rid for f in self.findings)

    @contextmanager
    def at(self, rid: str) -> Iterator[None]:
        """Steps whose failure is `rid`'s: an exception here is recorded as a FAIL of `rid` and re-raised as
        Blocked, which ends the group."""
        previous, self.current = self.current, rid
        self.last = rid
        try:
            yield
        except (Blocked, UnboundCheck):
            raise  # UnboundCheck is the suite's bug, never the agent's: the runner reports it as such
        except Exception as exc:
            if isinstance(exc, SignInNeeded):  # a sign-in the suite cannot give: untested, not failed
                self.untested(rid, describe(exc) + " (give --auth-method, or configure the agent)")
                raise Blocked(rid, describe(exc)) from exc
            if isinstance(exc, TimeoutError):  # slow is not wrong: what the wait was for could not be seen
                self.untested(rid, timed_out(exc))
                raise Blocked(rid, timed_out(exc)) from exc
            self.failed(rid, describe(exc))
            raise Blocked(rid, describe(exc)) from exc
        finally:
            self.current = previous

    @contextmanager
    def needs(self, rid: str) -> Iterator[None]:
        """A step that `rid` covers elsewhere: an exception here ends the group without a FAIL of its own."""
        try:
            yield
        except (Blocked, UnboundCheck):
            raise
        except TimeoutError as exc:
            raise Blocked(rid, timed_out(exc)) from exc
        except Exception as exc:
            raise Blocked(rid, describe(exc)) from exc

    def close(self, stopped: Blocked | None) -> None:
        """Every declared id no check reached becomes NOT_TESTED, saying why."""
        if stopped is not None:
            self.stopped = f"stopped at {stopped.rid}: {stopped.detail}"
        for rid in self.own:
            if not self.reported(rid):
                reason = self.stopped or "no check of this group reached it"
                self._add(rid, Status.NOT_TESTED, reason)


def overall(req: Requirement, findings: list[Finding]) -> tuple[Status, list[Finding]]:
    """A requirement's status from all its findings: any FAIL fails it; else any PASS passes it; else NOT_TESTED
    if anything was left untested; else SKIPPED. No finding at all: SKIPPED for a `used:` gate (the agent never
    did what the requirement is about), NOT_TESTED otherwise.

    An INFORMATIONAL requirement is never failed: the spec is silent, so whatever its checks met — an error, no
    answer, the agent gone — is an observation, reported as one (PASS, shown INFO) with everything it saw."""
    mine = [f for f in findings if f.rid == req.id]
    if req.tier is Tier.INFORMATIONAL:
        seen = [f for f in mine if f.status in (Status.PASS, Status.FAIL)]
        if seen:
            return Status.PASS, seen
    return _decided(req, mine)


def _decided(req: Requirement, mine: list[Finding]) -> tuple[Status, list[Finding]]:
    """The first of FAIL, PASS, NOT_TESTED and SKIPPED that `mine` holds, with its findings (none: see `overall`)."""
    for status in (Status.FAIL, Status.PASS, Status.NOT_TESTED, Status.SKIPPED):
        decided = [f for f in mine if f.status is status]
        if decided:
            return status, decided
    if req.gate is not None and req.gate.startswith("used:"):
        return Status.SKIPPED, []
    return Status.NOT_TESTED, []


def known(rid: str) -> Requirement:
    return BY_ID[rid]
