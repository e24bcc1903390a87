"""The ids of the ACP v1 digest that no check judges, each with the reason: a MUST no client can observe, a rule
for clients, background (INFO), a freedom (MAY) that leaves nothing to fail, a rule another id already checks —
or, said as such, one no check has been written for yet. Together with the registry (conformance/requirements/registry.py)
they cover every id of the digest: tests/unit/test_conformance_coverage_ids.py computes what is left and keeps it
empty, and tests/unit/test_conformance_registry.py checks every MUST."""

from __future__ import annotations

UNOBSERVABLE: dict[str, str] = {
    "R2": "which streams the agent uses is how the suite talks to it at all: every check observes it",
    "R10": "custom transports: the suite speaks stdio only",
    "R27": "what the agent assumes about `_meta` values is internal",
    "R28": "custom requests the agent sends are checked for a response id by R11/R12; what it offers is its own",
    "R35": "a rule for clients (call gated methods only when advertised), which this suite's client follows",
    "R63": "a rule for clients (send absolute additional roots); the agent side is R65",
    "R95": "`currentValue` is required by the schema: R4 checks every config option payload",
    "R124": "a plan's completeness is the agent's own knowledge; the shape is checked by R4",
    "R139": "which data is a secret is the agent's judgement; this suite advertises no elicitation (R138)",
    "R140": "binding elicitations to a user happens inside the agent",
    "R141": "elicitation is not advertised by this suite (R138), so no response of it reaches the agent",
    "R142": "URL-mode elicitation is not advertised by this suite (R138)",
    "R147": "diff and location paths are checked under R30",
    "R108": "the same rule as R13 for `session/cancel`, checked there",
    "R112": "checked under R105 (nothing of a turn after its response), the cancel case included",
    "R39": "absent client capabilities mean unsupported: the suite's no-capability group sends no clientCapabilities at all, so R131/R132 check it",
    # --- the rest of the digest (issue 26): background, freedoms, rules for clients, rules checked elsewhere --
    "R9": "INFO: how a reader treats \\r\\n, blank lines and a BOM is the client's; the digest asks tests not to depend on it",
    "R19": "a MAY (supporting `$/cancel_request` at all); what an agent that does must do is R20's and R22's check",
    "R21": "a MAY (abort the work, flush notifications first); the one response it must still send is R20's check",
    "R23": "SHOULD, about the agent's own internal cancellation (timeouts, limits, shutdown): no client can cause it",
    "R25": "R20's check accepts exactly these two answers (`cancelled` or -32800) to a `$/cancel_request` on a prompt",
    "R29": "camelCase keys and snake_case tags are the schema's spelling: R4 and R26 refuse any other",
    "R31": "INFO: how capabilities read (presence, null, defaults); the suite reads them so (`Agent.advertised`)",
    "R32": "INFO: the reference SDK's lenient decoding, not a wire requirement",
    "R34": "each advertised capability's own requirements (R48, R50, R66-R89, R91-R97.1, R100-R100.2) check its method",
    "R38": "a rule for clients (disconnect on a version they cannot use)",
    "R40": "SHOULD: the suite tries two combinations of client capabilities (all offered; none, tools-unoffered), "
    "not every one",
    "R43": "SHOULD, about what a terminal auth method runs outside ACP; the suite sets no auth.terminal (R42)",
    "R46": "SHOULD build MCP over HTTP: a recommendation; what an agent does with an unadvertised transport is R61",
    "R52": "INFO: what happens to running sessions at logout is implementation-defined",
    "R55": "SHOULD: a tool's own file access is invisible to a client; the suite confines what it serves (H1)",
    "R57": "a MAY (session/new may want sign-in); the suite signs in when asked, and R49 checks what follows",
    "R58": "a MAY (return modes, config options); what is returned is R91-R97.1's, R96's and R128's check",
    "R59": "a MAY; that such updates follow the session/new response is R115's check",
    "R73": "INFO, draft-only (notices are unstable); R116 keeps unstable kinds from a client that did not opt in",
    "R76": "a MAY (initial state in the resume response); its shape is R4's check",
    "R78": "INFO: resume without load is allowed; the resume group runs on its own gate",
    "R90": "a MAY (an error for a closed or unknown session)",
    "R93": "a MAY (the agent changes mode itself); the mode a `current_mode_update` names is R127's check",
    "R99": "a MAY (the agent changes options itself); what it then sends is R128's check",
    "R104": "a MAY (any fitting stop reason); R103 checks the stop reason is one of the schema's",
    "R106": "INFO: slash commands are prompt text the agent reads itself",
    "R109": "SHOULD stop at once: how soon is the agent's; what a client sees of a cancel is R110, R113 and R105",
    "R118": "a chunk's one ContentBlock is R4's check; Markdown is the client's rendering",
    "R119": "INFO: echoing the prompt is optional; an echoed message's id is R117's check",
    "R121": "the same rule as R102 (a tool call reported before or while it runs), checked there",
    "R125": "SHOULD plan: no directive of the suite's model makes an agent plan, so whether it would is unknown; a "
    "plan's shape is R4's check",
    "R126": "a MAY (available_commands_update); its shape is R4's check, its timing R115's",
    "R129": "how a client applies a partial session_info_update is the client's; its shape is R4's and R26's",
    "R130": "INFO and should*: when a title is sent and how long it is",
    "R135": "INFO: how terminals behave is the client's (the suite's client implements it)",
    "R137": "the shape of elicitation/create: the suite advertises no elicitation, so R138 fails any such request",
    "R144": "INFO: the suite advertises no client `_` methods and answers any the agent calls -32601",
    "R145": "INFO: any block type in the agent's own output; each block's shape is R4's check",
    "R146": "INFO: advice to clients about embedding context",
    "R148": "INFO: rawInput and rawOutput take any JSON",
}


def markdown_table() -> str:
    """The list as the Markdown table docs/conformance.md carries (a test keeps the two equal), in id order."""
    rows = ["| id | why no check judges it |", "|---|---|"]
    for rid in sorted(UNOBSERVABLE, key=lambda r: int(r[1:])):
        rows.append(f"| {rid} | {UNOBSERVABLE[rid].replace('|', chr(92) + '|')} |")
    return "\n".join(rows) + "\n"
