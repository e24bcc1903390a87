"""The requirement registry: every requirement the suite checks, as data.

Each requirement has a stable id, a tier, the capability that gates it (if any), the profile it belongs to,
its text in this project's own words and the part of the specification it comes from. The ACP profile holds the
ACP v1 requirements an agent must meet that a client can observe (ids R<n>, numbered as in the ACP v1 agent
requirements digest ama was built against; `docs/conformance.md` is their index in this repository). The usage
profile holds ama's context-meter contract (E, D, P, U ids, see docs/rules.md): reported apart, it never decides
ACP conformance.

Tiers (after the official ACP test kit's model; the verdicts they make are conformance/core/report.py's): MANDATORY, a
MUST / MUST NOT; CAPABILITY, the same where the agent advertised (or, for `used:` gates, used) what gates it, else
SKIPPED; ADVISORY, a SHOULD or an expectation derived from JSON-RPC, reported only; INFORMATIONAL, the spec is
silent: the suite records what the agent does, an observation and never a FAIL.

Gates name a capability path in the `initialize` result (`loadSession`, `sessionCapabilities.resume`, …), a
session-setup result field (`modes`, `configOptions`), an advertised auth method (`authMethods.agent`), or an
observed behaviour (`used:terminal`: the agent created a terminal; `used:permission`: it asked permission).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ama_conformance.requirements.coverage import COVERAGE  # the coverage groups' ids (plain rows)
from ama_conformance.requirements.mcp import MCP_REOPEN  # the mcp-reopen group's ids (plain rows)
from ama_conformance.requirements.subagents import SUBAGENTS  # the subagents group's ids (plain rows)
from ama_conformance.requirements.wire_more import WIRE_MORE  # R26.1 and R101 (plain rows)


class Tier(enum.Enum):
    MANDATORY = "MANDATORY"
    CAPABILITY = "CAPABILITY"
    ADVISORY = "ADVISORY"
    INFORMATIONAL = "INFORMATIONAL"

    @property
    def decides(self) -> bool:
        """Whether a failure of this tier makes the profile's verdict negative."""
        return self in (Tier.MANDATORY, Tier.CAPABILITY)


class Profile(enum.Enum):
    ACP = "acp"
    USAGE = "usage"


@dataclass(frozen=True)
class Requirement:
    id: str
    tier: Tier
    text: str
    section: str  # where in the specification (ACP v1 docs page § part, or the schema definition) it comes from
    gate: str | None = None
    profile: Profile = Profile.ACP


M, C, A, INFO, U = Tier.MANDATORY, Tier.CAPABILITY, Tier.ADVISORY, Tier.INFORMATIONAL, Profile.USAGE


def _r(
    rid: str, tier: Tier, section: str, text: str, gate: str | None = None, profile: Profile = Profile.ACP
) -> Requirement:
    return Requirement(rid, tier, " ".join(text.split()), section, gate, profile)


REGISTRY: tuple[Requirement, ...] = (
    # --- transport and JSON-RPC ---------------------------------------------------------------------------------
    _r("R1", M, "transports", "Every line the agent writes is UTF-8."),
    _r("R3", M, "transports § stdio", "A message fills exactly one line: no raw line break inside it."),
    _r(
        "R4",
        M,
        "transports § stdio; schema (per method)",
        """Nothing but ACP messages on stdout: every line is a JSON-RPC 2.0 object that matches the stable
        schema's definition for its method (requests and notifications by method, responses by the method of
        the request they answer, errors by `Error`).""",
    ),
    _r(
        "R5",
        INFO,
        "transports § stdio",
        "The agent may log to stderr; the suite records it and never counts it against the agent.",
    ),
    _r("R6", M, "schema: JSON-RPC envelope", 'Every message carries `"jsonrpc": "2.0"`.'),
    _r(
        "R7",
        M,
        "transports § stdio; overview (lifecycle)",
        """When the client closes the agent's stdin — the way a stdio connection ends — the agent exits on its
        own within the exit grace period, without writing anything but whole messages before it goes. (The
        digest derives this from the lifecycle; the suite holds it mandatory because an agent that outlives its
        stdin can never receive another message and is left for the editor to kill.)""",
    ),
    _r("R8", INFO, "transports", "What the agent does with a JSON-RPC batch (an array) on one line; v1 defines none."),
    _r("R11", M, "schema: RequestId", "A response carries its request's id unchanged, JSON type included."),
    _r(
        "R12",
        M,
        "overview § error handling; JSON-RPC 2.0",
        "Each request gets exactly one response, with `result` or `error` ({code: integer, message: string}), never both.",
    ),
    _r(
        "R13",
        M,
        "overview; prompt turn § cancellation",
        """A notification never gets a response: not `session/cancel`, not `$/cancel_request`, not a `_`
        extension notification, not an unknown one.""",
    ),
    _r("R14", A, "schema: Error.message", "An error's `message` is one short sentence."),
    _r("R15", A, "extensibility", "An unknown `_` extension request gets -32601 (method not found)."),
    _r("R16", A, "extensibility", "An unknown notification is ignored: no reply, and the agent goes on serving."),
    _r(
        "R17",
        A,
        "JSON-RPC 2.0 (derived)",
        "A line that is not JSON gets -32700 with id null, and the agent goes on serving.",
    ),
    _r("R17.1", A, "JSON-RPC 2.0 (derived)", "Well-formed JSON that is not a request object gets -32600."),
    _r("R17.2", A, "JSON-RPC 2.0 (derived)", "An unknown method (not `_`-prefixed) gets -32601."),
    _r("R17.3", A, "JSON-RPC 2.0 (derived)", "Params that break the method's schema get -32602."),
    _r(
        "R18",
        M,
        "JSON-RPC 2.0 (derived)",
        "A request the agent sends never reuses the id of another of its requests still awaiting an answer.",
    ),
    _r(
        "R20",
        M,
        "cancellation § $/cancel_request",
        """A request named by `$/cancel_request` while it runs still gets exactly one response: its result or a
        -32800 error.""",
    ),
    _r(
        "R22",
        A,
        "cancellation (RFD)",
        "A `$/cancel_request` for a request already answered changes nothing: no second response.",
    ),
    _r(
        "R26",
        M,
        "extensibility",
        "No custom fields at the root of a type the spec defines (results and params included); custom data goes in `_meta`.",
    ),
    _r(
        "R30",
        M,
        "overview § argument requirements",
        """Every file path the agent puts on the wire is absolute: fs/* and terminal/* params, tool-call
        locations and diffs.""",
    ),
    _r(
        "R33",
        M,
        "initialization § session capabilities",
        "`session/new`, `session/prompt` and `session/cancel` work on every agent.",
    ),
    # --- initialize ----------------------------------------------------------------------------------------------
    _r(
        "R36",
        M,
        "initialization",
        "`initialize` answers with an integer protocol version and the agent's capabilities.",
    ),
    _r(
        "R37",
        M,
        "initialization § version negotiation",
        """Version negotiation: a supported requested version is echoed; any other gets the newest version the
        agent supports, as a result, not an error (asked 0, 2 or 65535, a v1 agent answers 1).""",
    ),
    _r("R41", A, "initialization", "The agent names itself in `agentInfo` (name, version)."),
    _r(
        "R42",
        M,
        "schema: AuthMethodTerminal",
        "A `terminal` auth method is advertised only to a client that set `auth.terminal`.",
    ),
    _r(
        "R44",
        INFO,
        "initialization",
        "What the agent does with a request before `initialize`, and with a second `initialize`.",
    ),
    # --- authentication ------------------------------------------------------------------------------------------
    _r(
        "R47",
        A,
        "authentication (derived)",
        "`authenticate` with a method id the agent never advertised gets an error.",
        "authMethods.agent",
    ),
    _r(
        "R48",
        C,
        "authentication",
        """`authenticate` with an advertised agent method succeeds with an empty result. (An error answer means a
        sign-in the suite cannot give: the requirement is then untested, never failed.)""",
        "authMethods.agent",
    ),
    _r("R50", C, "authentication § logout", "An advertised `logout` works and answers `{}`.", "auth.logout"),
    # --- session setup -------------------------------------------------------------------------------------------
    _r("R53", M, "session setup", "Every `session/new` returns a session id no other session has."),
    _r(
        "R54",
        M,
        "session setup § working directory",
        """The session's `cwd` is its working directory whatever directory the agent process started in: a
        relative path the model names is resolved against it.""",
    ),
    _r(
        "R56",
        A,
        "session setup (derived)",
        "A relative `cwd` is rejected (-32602), by `session/new` and by `session/load`.",
    ),
    _r(
        "R60",
        M,
        "session setup § MCP servers",
        """Sessions accept stdio MCP servers: `session/new` with one succeeds, and the agent starts it and
        speaks MCP to it.""",
    ),
    _r(
        "R61",
        A,
        "session setup § MCP servers (derived)",
        "An MCP transport the agent did not advertise (http, sse) is refused or reported, never silently dropped.",
    ),
    _r("R62", A, "session setup § MCP servers", "The agent connects to every MCP server the client supplied."),
    _r(
        "R65",
        C,
        "session setup § additional roots (RFD)",
        "With `additionalDirectories` advertised, a relative or empty entry is rejected, not dropped.",
        "sessionCapabilities.additionalDirectories",
    ),
    # --- load / resume / list / delete / close -------------------------------------------------------------------
    _r(
        "R66",
        C,
        "session setup § loading sessions",
        """`session/load` replays the whole conversation as `session/update` notifications under the loaded id,
        in order: the user's message as `user_message_chunk` before the agent's reply as `agent_message_chunk`.""",
        "loadSession",
    ),
    _r(
        "R67",
        C,
        "session setup § loading sessions",
        "The `session/load` response comes after the last replayed notification.",
        "loadSession",
    ),
    _r(
        "R70",
        C,
        "session setup § loading sessions",
        "A loaded session takes a new prompt like a live one.",
        "loadSession",
    ),
    _r(
        "R71",
        A,
        "session usage (RFD)",
        """After a load, an agent that reports usage sends the session's current `usage_update` (with the replay
        or after the response); one that never reports usage is not held to it.""",
        "loadSession",
    ),
    _r(
        "R72",
        INFO,
        "session delete (derived)",
        "What `session/load` of an unknown session id answers (an error is expected).",
        "loadSession",
    ),
    _r(
        "R74",
        C,
        "session setup § resuming sessions",
        "`session/resume` restores a session without replaying its history, before or after its response.",
        "sessionCapabilities.resume",
    ),
    _r(
        "R75",
        C,
        "session setup § resuming sessions",
        "A resumed session takes a new prompt.",
        "sessionCapabilities.resume",
    ),
    _r(
        "R77",
        A,
        "session usage (RFD)",
        """After a resume, an agent that reports usage sends the session's current `usage_update`; one that never
        reports usage is not held to it.""",
        "sessionCapabilities.resume",
    ),
    _r(
        "R79",
        C,
        "session list",
        "`session/list` with empty params answers a list of sessions, the ones this run created among them.",
        "sessionCapabilities.list",
    ),
    _r(
        "R80",
        C,
        "session list",
        "A `session/list` that matches nothing answers `sessions: []`, never a missing or null field.",
        "sessionCapabilities.list",
    ),
    _r(
        "R81",
        A,
        "session list",
        "With a `cwd` filter, only sessions of that cwd come back.",
        "sessionCapabilities.list",
    ),
    _r("R83", A, "session list", "A cursor the agent never issued gets an error.", "sessionCapabilities.list"),
    _r(
        "R86",
        A,
        "session delete",
        "A deleted session is absent from later `session/list` results.",
        "sessionCapabilities.delete",
    ),
    _r(
        "R87",
        A,
        "session delete",
        "Deleting an unknown session succeeds silently with `{}`.",
        "sessionCapabilities.delete",
    ),
    _r(
        "R88",
        C,
        "session setup § closing sessions",
        """`session/close` cancels the session's work as `session/cancel` would: a running prompt answers
        `cancelled` (before or after the close response: the spec orders neither), never an error.""",
        "sessionCapabilities.close",
    ),
    _r("R89", C, "session setup § closing sessions", "`session/close` answers `{}`.", "sessionCapabilities.close"),
    # --- modes and config options --------------------------------------------------------------------------------
    _r("R91", C, "session modes", "`session/set_mode` to each advertised mode succeeds.", "modes"),
    _r("R91.1", A, "session modes (derived)", "`session/set_mode` to a mode never advertised gets an error.", "modes"),
    _r(
        "R92",
        C,
        "session modes",
        "`session/set_mode` sent while a turn runs is answered without waiting for the turn.",
        "modes",
    ),
    _r(
        "R94",
        C,
        "session config options",
        "`session/set_config_option` answers the complete list of options with their current values.",
        "configOptions",
    ),
    _r(
        "R96",
        M,
        "session config options § boolean",
        """No `type: "boolean"` option in any config-option payload unless the client advertised
        `session.configOptions.boolean`.""",
    ),
    _r(
        "R97",
        A,
        "session config options (derived)",
        "A value that is not one of the option's values gets an error.",
        "configOptions",
    ),
    _r(
        "R97.1",
        C,
        "session config options",
        "`session/set_config_option` sent while a turn runs is answered without waiting for the turn.",
        "configOptions",
    ),
    _r(
        "R127",
        C,
        "session modes; schema: CurrentModeUpdate",
        "`current_mode_update` names an advertised mode.",
        "modes",
    ),
    # --- prompt turn ---------------------------------------------------------------------------------------------
    _r(
        "R45",
        M,
        "initialization § prompt capabilities",
        "A prompt with a `resource_link` block is accepted whatever `promptCapabilities` says.",
    ),
    _r(
        "R100",
        C,
        "initialization § prompt capabilities",
        "A prompt with an `image` block is accepted when `promptCapabilities.image` is set.",
        "promptCapabilities.image",
    ),
    _r(
        "R100.1",
        C,
        "initialization § prompt capabilities",
        "A prompt with an `audio` block is accepted when `promptCapabilities.audio` is set.",
        "promptCapabilities.audio",
    ),
    _r(
        "R100.2",
        C,
        "initialization § prompt capabilities",
        "A prompt with an embedded `resource` block is accepted when `promptCapabilities.embeddedContext` is set.",
        "promptCapabilities.embeddedContext",
    ),
    _r(
        "R100.3",
        A,
        "initialization § prompt capabilities (derived)",
        "A block type the agent did not advertise gets -32602 or is handled gracefully; the agent goes on serving.",
    ),
    _r("R102", A, "tool calls", "A tool the model calls is reported as a `tool_call` update before or while it runs."),
    _r(
        "R103",
        M,
        "prompt turn § check for completion",
        "Every `session/prompt` gets a response with a stop reason once the turn ends.",
    ),
    _r(
        "R105",
        M,
        "prompt turn § check for completion; cancellation",
        """Every update of a turn (message and thought chunks, tool calls and their updates, plans) goes out
        before that turn's `session/prompt` response — the response ends the turn. The cancel case states it
        outright; for other turns it follows from R103.""",
    ),
    _r(
        "R107",
        INFO,
        "prompt turn",
        "What the agent does with a second `session/prompt` while a turn runs in the same session.",
    ),
    _r(
        "R110",
        M,
        "prompt turn § cancellation",
        'A turn cancelled with `session/cancel` ends with `stopReason: "cancelled"`.',
    ),
    _r("R111", M, "prompt turn § cancellation", "A cancelled turn never ends in a JSON-RPC error."),
    _r(
        "R113",
        C,
        "prompt turn § cancellation; tool calls § permission",
        """A turn cancelled while a permission request is open (the client answers it `cancelled`) ends
        `cancelled`, and the tool it asked about does not run.""",
        "used:permission",
    ),
    _r(
        "R114",
        A,
        "prompt turn (derived)",
        "A `session/cancel` for an unknown session or a session with no turn is ignored; the next prompt works.",
    ),
    _r(
        "R115",
        M,
        "session update (derived)",
        "`session/update` names a session the client knows: one a response gave it, or one being loaded or resumed.",
    ),
    _r(
        "R116",
        A,
        "session update (RFD)",
        "Only the update kinds of the stable schema go to a client that opted in to no others.",
    ),
    _r("R120", A, "tool calls", "Tool-call ids are unique within a session: a second `tool_call` never reuses one."),
    _r("R122", A, "tool calls (derived)", "A `tool_call_update` refers to a tool call already announced."),
    _r(
        "R123",
        A,
        "prompt turn § step 5",
        "Tool calls end in a final status (`completed` or `failed`) before the turn ends.",
    ),
    _r(
        "R131",
        M,
        "file system",
        "`fs/read_text_file` / `fs/write_text_file` are called only when the client advertised them.",
    ),
    _r("R132", M, "terminals", "No `terminal/*` call unless the client advertised `terminal`."),
    _r(
        "H1",
        A,
        "file system; terminals (the suite's own confinement)",
        """The agent asks for files and commands only inside the directories the suite created for the run: every
        fs/* path and every terminal's cwd (symlinks followed). ACP states no such rule, so a breach is reported,
        not held against conformance; the suite refuses the request whatever the verdict, as it runs agents it
        cannot trust.""",
    ),
    _r(
        "R133",
        C,
        "terminals § release",
        "Every terminal the agent creates is released with `terminal/release` once it is no longer needed, before the connection ends at the latest (the suite checks the whole transcript of each process).",
        "used:terminal",
    ),
    _r(
        "R134",
        A,
        "schema: Terminal",
        "A terminal is embedded in tool-call content before it is released.",
        "used:terminal",
    ),
    _r(
        "R136",
        A,
        "tool calls § permission (derived)",
        "The option ids of one permission request are unique.",
        "used:permission",
    ),
    _r(
        "R136.1",
        C,
        "tool calls § permission",
        "When the person rejects a permission request, the tool does not run.",
        "used:permission",
    ),
    _r(
        "R138",
        M,
        "elicitation",
        "No `elicitation/create` in a mode the client did not advertise (this suite advertises none).",
    ),
    # --- usage profile: ama's context-meter contract (never decides ACP conformance) -----------------------------
    _r(
        "E1",
        M,
        "ama context-usage § E1/E2",
        "A `usage_update` follows each model response of a turn, before the prompt response.",
        profile=U,
    ),
    _r(
        "E3",
        M,
        "ama context-usage § E3",
        "Changing the model option sends a `config_option_update` and then a `usage_update`.",
        "configOptions",
        U,
    ),
    _r(
        "E4",
        M,
        "ama context-usage § E4",
        "A `usage_update` follows `session/new` (after its response) and `session/load` (after the replay).",
        profile=U,
    ),
    _r(
        "D1",
        M,
        "ama context-usage § D1",
        "No two consecutive `usage_update`s of a session carry the same payload (except at a session open, D2).",
        profile=U,
    ),
    _r(
        "P1",
        M,
        "ama context-usage § P1",
        "`used` and `size` are non-negative integers, `size` positive; a cost is in USD.",
        profile=U,
    ),
    _r(
        "P3",
        M,
        "ama context-usage § P3",
        "Every message validates against the official ACP schema (R4's finding, counted for this profile).",
        profile=U,
    ),
    _r(
        "U10",
        M,
        "ama context-usage § U10",
        "A new session's first `usage_update` is not 0: it estimates what the first request will carry.",
        profile=U,
    ),
) + tuple(
    _r(rid, Tier(t), where, text, g) for rid, t, where, text, g in (*COVERAGE, *MCP_REOPEN, *SUBAGENTS, *WIRE_MORE)
)

BY_ID: dict[str, Requirement] = {r.id: r for r in REGISTRY}


def markdown_table() -> str:
    """The registry as the Markdown table docs/conformance.md carries (a test keeps the two equal)."""
    rows = ["| id | tier | profile | gate | requirement | from |", "|---|---|---|---|---|---|"]
    for r in REGISTRY:
        text = r.text.replace("|", "\\|")
        rows.append(f"| {r.id} | {r.tier.value} | {r.profile.value} | {r.gate or '—'} | {text} | {r.section} |")
    return "\n".join(rows) + "\n"
