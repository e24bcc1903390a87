"""Run the selected groups, each on fresh agent processes, and gather one record of everything.

Nothing a group or an agent does ends the run: a group's exceptions are findings (`conformance/core/outcome.py`),
a group that overruns its time limit fails the requirement it was at, and every agent is closed (stdin first,
then terminate, then kill) and its transcript checked whatever happened.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from ama_acp.client.errors import AgentExited, AgentStartError
from ama_conformance.core.agent import Agent, AgentFailure
from ama_conformance.core.config import RunConfig
from ama_conformance.core.homes import group_env
from ama_conformance.core.outcome import Blocked, Checks, Finding, Status, UnboundCheck, describe
from ama_conformance.core.transcript import analyse, validators
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS, outlived_stdin
from ama_conformance.groups.base import Group, GroupContext, ModelView
from ama_conformance.groups.catalog import GROUPS

# A transcript line in the record (and --report-json) is cut to this many characters, with a marker: a 1 GiB
# line is never kept or written whole.
RECORD_LINE = 64 * 1024


def clip(line: str, limit: int = RECORD_LINE) -> str:
    return line if len(line) <= limit else line[:limit] + f"… [clipped: {len(line) - limit} more characters]"


@dataclass
class AgentRecord:
    ended_by: str | None
    returncode: int | None
    transcript: list[dict[str, Any]]
    stderr: str
    dropped_lines: int = 0  # stdout lines that carried nothing, past those kept (ama_acp/client/connection.py)


@dataclass
class GroupRecord:
    name: str
    seconds: float
    stopped: str | None
    agents: list[AgentRecord] = field(default_factory=list)
    suite_error: str | None = None  # a bug of the suite (a check bound to an id its group does not declare)


@dataclass
class RunRecord:
    findings: list[Finding] = field(default_factory=list)
    groups: list[GroupRecord] = field(default_factory=list)
    init: dict[str, Any] = field(default_factory=dict)  # the first initialize result seen
    seconds: float = 0.0
    startup: str | None = None  # why the agent could not be initialized (then no group ran after it)


def selected(groups: list[Group], expr: str | None) -> list[Group]:
    """-k: a boolean expression of words (and, or, not, parentheses); a word matches a group whose name contains
    it or that decides the requirement id it names. A malformed expression is a ValueError."""
    if not expr:
        return groups
    tokens = re.findall(r"\(|\)|[^\s()]+", expr)
    return [g for g in groups if _Selection(tokens, g).value()]


class _Selection:
    """expr := term ('or' term)*; term := factor ('and' factor)*; factor := 'not' factor | '(' expr ')' | word."""

    def __init__(self, tokens: list[str], group: Group) -> None:
        self.tokens, self.group, self.at = tokens, group, 0

    def value(self) -> bool:
        result = self._expr()
        if self.at != len(self.tokens):
            raise ValueError(f"-k: unexpected {self.tokens[self.at]!r}")
        return result

    def _next(self) -> str:
        if self.at >= len(self.tokens):
            raise ValueError("-k: the expression ends too soon")
        self.at += 1
        return self.tokens[self.at - 1]

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _expr(self) -> bool:
        result = self._term()
        while self._peek() == "or":
            self._next()
            result = self._term() or result
        return result

    def _term(self) -> bool:
        result = self._factor()
        while self._peek() == "and":
            self._next()
            result = self._factor() and result
        return result

    def _factor(self) -> bool:
        tok = self._next()
        if tok == "not":
            return not self._factor()
        if tok == "(":
            result = self._expr()
            if self._next() != ")":
                raise ValueError("-k: a parenthesis is not closed")
            return result
        if tok in ("and", "or", ")"):
            raise ValueError(f"-k: unexpected {tok!r}")
        return tok in self.group.ids or tok.lower() in self.group.name.lower()


def agent_record(agent: Agent, started: float) -> AgentRecord:
    return AgentRecord(
        agent.conn.ended_by,
        agent.conn.returncode,
        [{"dir": e.direction, "t": round(e.time - started, 4), "line": clip(e.raw)} for e in agent.conn.transcript],
        agent.stderr,
        agent.conn.dropped_lines,
    )


STARTUP = "start-up"  # the group name the start-up probe's findings carry


async def startup_probe(config: RunConfig, env: dict[str, str]) -> tuple[Checks | None, GroupRecord, dict[str, Any]]:
    """Start the agent once and initialize it, before any group: an agent that stays silent, dies at start or
    refuses `initialize` is found in one request timeout, not once per group (each would wait out the same
    silence). On success the probe leaves no finding (the groups judge everything) and returns the initialize
    result — but for R7's failure, when the agent outlived its stdin: that close was the one that waited out the
    whole grace (core/config.py `ExitWatch`). On failure `config.startup` holds the reason and the findings say
    what it blocked."""
    started = time.monotonic()
    record = GroupRecord(STARTUP, 0.0, None)
    agent = Agent(config, group_env(config, env, STARTUP))
    try:
        with anyio.fail_after(config.timeouts.request + config.timeouts.exit + 10):  # a hung start, cut off
            try:
                await agent.start()
                await agent.initialize()
            except AgentStartError as exc:
                config.startup.record(str(exc), exited=True, details=lambda: (None, ""))
            except AgentFailure as exc:  # an error, or not an object: no session can be opened either
                config.startup.record(
                    f"initialize failed: {exc}", exited=False, details=lambda: (agent.conn.returncode, agent.stderr)
                )
            except (TimeoutError, AgentExited):
                pass  # Agent.initialize recorded it
            finally:
                await agent.shutdown()
    except TimeoutError:
        config.startup.record(
            "the agent did not start in time", exited=False, details=lambda: (agent.conn.returncode, agent.stderr)
        )
    record.seconds = round(time.monotonic() - started, 3)
    if config.startup.failure is None:
        if not config.exits.ignored_eof:
            return None, record, agent.init
        # Its close was the run's first, with the whole exit grace: R7's measure (later closes cut the grace short).
        record.agents.append(agent_record(agent, started))
        checks = Checks(STARTUP, (), TRANSCRIPT_IDS)
        checks.failed("R7", outlived_stdin(agent.conn.ended_by))
        return checks, record, agent.init
    record.agents.append(agent_record(agent, started))
    record.stopped = config.startup.failure
    checks = Checks(STARTUP, ("R36",), TRANSCRIPT_IDS)
    if config.startup.exited:  # a command that cannot run (a bad config, a missing runtime): no protocol verdict
        checks.untested("R36", config.startup.failure)
    else:  # a live process that does not answer initialize, or answers it with an error: R36 is broken
        checks.failed("R36", config.startup.failure)
    return checks, record, agent.init


def not_started(group: Group, reason: str) -> list[Finding]:
    """The findings of a group the runner did not start because the agent could not be initialized: each of
    its requirements (and the transcript checks, which had no transcript to read) NOT_TESTED with that reason."""
    return [Finding(rid, Status.NOT_TESTED, reason, STARTUP) for rid in dict.fromkeys((*group.ids, *TRANSCRIPT_IDS))]


async def run_group(
    group: Group, config: RunConfig, env: dict[str, str], model: ModelView | None
) -> tuple[Checks, GroupRecord, dict[str, Any]]:
    checks = Checks(group.name, group.ids, TRANSCRIPT_IDS)
    ctx = GroupContext(config, group_env(config, env, group.name), checks, own=group.ids, model=model)
    started = time.monotonic()
    stopped: Blocked | None = None
    suite_error: str | None = None
    checks.last = group.ids[0]
    try:
        with anyio.fail_after(config.timeouts.group):
            async with ctx.stack:
                try:
                    await group.run(ctx)
                except Blocked as exc:
                    stopped = exc
    except UnboundCheck as exc:  # the suite's own bug: not a finding about the agent
        suite_error = f"group {group.name}: {exc}"
        stopped = Blocked(checks.last, "the suite itself failed here (see the suite errors)")
    except TimeoutError:
        # A timeout is slowness, not a violation seen: the step at hand is untested, never failed.
        checks.untested(checks.last, f"the group ran out of time ({config.timeouts.group:.0f} s) at this step")
        stopped = Blocked(checks.last, "the group ran out of time")
    except Exception as exc:  # anything else is still a finding about the step at hand, never a crash of the run
        checks.failed(checks.last, describe(exc))
        stopped = Blocked(checks.last, describe(exc))
    record = GroupRecord(group.name, 0.0, None, suite_error=suite_error)
    init: dict[str, Any] = {}
    for agent in ctx.agents:  # all closed by now (the exit stack); a transcript outlives its connection
        analyse(agent, checks)
        init = init or agent.init
        record.agents.append(agent_record(agent, started))
    checks.close(stopped)
    record.seconds = round(time.monotonic() - started, 3)
    record.stopped = checks.stopped
    return checks, record, init


async def run(config: RunConfig, env: dict[str, str], model: ModelView | None = None) -> RunRecord:
    validators()  # a missing or tampered schema fails before any agent starts
    chosen = [g for g in selected(GROUPS, config.select) if g.profile in config.profiles]
    record = RunRecord()
    started = time.monotonic()
    if chosen:
        checks, group_record, init = await startup_probe(config, env)
        if checks is not None:  # the agent could not be initialized: its findings, and its transcript
            record.findings.extend(checks.findings)
            record.groups.append(group_record)
        record.init = init
        failure = config.startup.failure
        _tell(config, f"start-up: {group_record.seconds:.1f} s" + (f", {failure}" if failure else ""))
    # Each group's outcome in its place in `chosen`, whatever order they end in: the record (and so the report)
    # never depends on timing.
    done: list[tuple[list[Finding], GroupRecord | None, dict[str, Any]]] = [([], None, {})] * len(chosen)
    limiter = anyio.CapacityLimiter(max(1, config.jobs))

    async def one(at: int, group: Group) -> None:
        async with limiter:
            if config.startup.failure is not None:
                done[at] = (not_started(group, config.startup.failure), None, {})
                return
            checks, group_record, init = await run_group(group, config, env, model)
            done[at] = (checks.findings, group_record, init)
            _tell(config, _progress_line(sum(1 for d in done if d[1] is not None), len(chosen), checks, group_record))

    # One job: the limiter, first come first served, runs them one after the other in their order.
    async with anyio.create_task_group() as tg:
        for at, group in enumerate(chosen):
            tg.start_soon(one, at, group)
    for findings, ran, init in done:
        record.findings.extend(findings)
        if ran is not None:
            record.groups.append(ran)
        record.init = record.init or init
    record.seconds = round(time.monotonic() - started, 3)
    record.startup = config.startup.failure
    return record


def _tell(config: RunConfig, line: str) -> None:
    if config.progress is not None:
        config.progress(line)


def _progress_line(done: int, total: int, checks: Checks, group: GroupRecord) -> str:
    """`[3/25] cancel: 0.6 s, 5 pass, 1 not tested`: the findings about the group's own requirements, by status
    (the transcript checks' come with the verdict)."""
    counts = {status: 0 for status in Status}
    for finding in checks.findings:
        if finding.rid in checks.own:
            counts[finding.status] += 1
    said = ", ".join(f"{n} {status.value.lower().replace('_', ' ')}" for status, n in counts.items() if n)
    stopped = f"; {checks.stopped}" if checks.stopped else ""
    return f"[{done}/{total}] {group.name}: {group.seconds:.1f} s" + (f", {said}" if said else "") + stopped[:200]
