"""The MUST / MUST NOT rules of ACP v1 that no client can observe, each with the reason: together with the
registry (conformance/requirements.py) they cover every MUST of the digest, which a meta-test checks."""

from __future__ import annotations

UNOBSERVABLE: dict[str, str] = {
    "R2": "which streams the agent uses is how the suite talks to it at all: every check observes it",
    "R10": "custom transports: the suite speaks stdio only",
    "R27": "what the agent assumes about `_meta` values is internal",
    "R28": "custom requests the agent sends are checked for a response id by R11/R12; what it offers is its own",
    "R35": "a rule for clients (call gated methods only when advertised), which this suite's client follows",
    "R63": "a rule for clients (send absolute additional roots); the agent side is R65",
    "R64": "not re-activating stored roots is internal to the agent's root enforcement",
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
}
