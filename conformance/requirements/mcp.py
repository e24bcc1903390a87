"""The requirements the *mcp-reopen* group (conformance/groups/mcp_sessions.py) decides, as plain rows that
`requirements.py` turns into registry entries (the same form as `coverage_requirements.py`).

R69 and R75 of the digest say that a load and a resume restore the session *and connect to the MCP servers in the
request*; R75's other half (the resumed session takes a prompt) is R75 itself, so the MCP half is R75.1. Like R70
and R75, neither carries an RFC keyword in the digest; like them, they bind an agent that advertises the method
(CAPABILITY): a reopened session whose tools are gone is not the session the client asked for.
"""

from __future__ import annotations

Row = tuple[str, str, str, str, str | None]

MCP_REOPEN: tuple[Row, ...] = (
    (
        "R69",
        "CAPABILITY",
        "session setup § loading sessions",
        """`session/load` connects to the MCP servers its request names: the stdio server the suite gives is
        started and spoken to, by the load or at the latest by the first prompt after it.""",
        "loadSession",
    ),
    (
        "R75.1",
        "CAPABILITY",
        "session setup § resuming sessions",
        """`session/resume` reconnects to the MCP servers its request names: the stdio server the suite gives is
        started and spoken to, by the resume or at the latest by the first prompt after it.""",
        "sessionCapabilities.resume",
    ),
)
