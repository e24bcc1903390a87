"""The requirements the subagents group (conformance/groups/subagents.py) decides, as plain rows that
`requirements.py` turns into registry entries (plain, like coverage_requirements.py, so this module imports nothing
of the registry's).

They come from the pinned UNSTABLE schema (`SubagentUpdate`, `StateUpdate`, `clientCapabilities.subagents`), which
the requirements digest does not number; each is a part (`.1`) of the digest item it narrows: R116 (only the update
kinds a client opted in to), R115 (updates name a session the client knows), R123 (work a turn started ends in a
final status before the turn ends). The `used:delegation` gate: an agent whose model never handed a task to a
sub-agent had nothing to announce, so the requirement is SKIPPED, never passed.

Each row: (id, tier name, section, text, gate).
"""

from __future__ import annotations

Row = tuple[str, str, str, str, str | None]

SUBAGENTS: tuple[Row, ...] = (
    (
        "R116.1",
        "CAPABILITY",
        "unstable schema: SubagentCapabilities, SubagentUpdate",
        """A `subagent_update` goes only to a client that advertised `clientCapabilities.subagents` ("the client
        must advertise this capability before the agent sends subagent updates"): an agent that delegates for a
        client without it announces no child session (updates under an id the client never got are R115's).""",
        "used:delegation",
    ),
    (
        "R115.1",
        "CAPABILITY",
        "unstable schema: SubagentUpdate",
        """To a client that advertised `clientCapabilities.subagents`, every `session/update` naming a session the
        client did not create comes after a `subagent_update`, on a session the client knows, that announces that
        id: the announcement "MUST be sent before any live child traffic", so no child update precedes it.""",
        "used:delegation",
    ),
    (
        "R123.1",
        "ADVISORY",
        "unstable schema: SubagentUpdate, StateUpdate (derived)",
        """A child announced `running` during a turn is given another state (`idle`, `requires_action` or `unknown`)
        by a later `subagent_update` before the parent's `session/prompt` response, so the client does not show it
        at work after the turn that ran it ended (the schema allows background children: a SHOULD, reported
        only).""",
        "used:delegation",
    ),
)
