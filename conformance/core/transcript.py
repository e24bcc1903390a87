"""The transcript checks run over one agent's whole wire (core/wire_checks.py), against the pinned schema's
validators, built once: after a group (the runner) and midway, for the usage profile's P3 (groups/usage.py).

Apart from the runner so that a group can call them without importing the runner, which imports every group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ama_conformance.core.agent import Agent
from ama_conformance.core.outcome import Checks
from ama_conformance.core.values import obj
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS, ClientView, TranscriptAnalyzer
from ama_conformance.schema.validate import WireValidator, load_validator, schema_path, stable_schema_path

if TYPE_CHECKING:
    from ama_conformance.groups.base import GroupContext

_validators: tuple[WireValidator, WireValidator] | None = None


def validators() -> tuple[WireValidator, WireValidator]:
    """(stable, unstable) validators over the pinned schema, built once."""
    global _validators
    if _validators is None:
        _validators = (load_validator(stable_schema_path()), load_validator(schema_path()))
    return _validators


def client_view(agent: Agent) -> ClientView:
    options = agent.conn.options
    caps = options.capabilities() if agent.capabilities_sent else {}
    session = obj(caps.get("session"))
    return ClientView(
        fs=agent.capabilities_sent and options.fs,
        terminal=agent.capabilities_sent and options.terminal,
        session_caps=session,
    )


def analyse(agent: Agent, checks: Checks) -> TranscriptAnalyzer:
    stable, unstable = validators()
    analyzer = TranscriptAnalyzer(stable, unstable, client_view(agent), checks)
    analyzer.run(
        list(agent.conn.transcript),
        list(agent.conn.violations),
        agent.conn.ended_by,
        agent.stderr,
        grace_note=agent.grace_note,
    )
    return analyzer


def schema_problems(ctx: GroupContext, agent: Agent) -> list[str]:
    """R4's findings on one agent's transcript so far (for the usage profile's P3)."""
    scratch = Checks(ctx.checks.group, (), TRANSCRIPT_IDS)
    stable, unstable = validators()
    analyzer = TranscriptAnalyzer(stable, unstable, client_view(agent), scratch)
    for entry in list(agent.conn.transcript):
        analyzer.feed(entry)
    return analyzer.problems.get("R4", [])
