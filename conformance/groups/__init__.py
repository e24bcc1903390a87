"""The test groups. Importing this package registers every one of them in `base.GROUPS`, in run order."""

from ama_conformance.groups import (
    coverage_auth,
    coverage_config,
    coverage_history,
    coverage_listing,
    coverage_wire,
    lifecycle,
    mcp_sessions,
    options,
    persistence,
    subagents,
    tools,
    turns,
    usage,
)

__all__ = [
    "coverage_auth",
    "coverage_config",
    "coverage_history",
    "coverage_listing",
    "coverage_wire",
    "lifecycle",
    "mcp_sessions",
    "options",
    "persistence",
    "subagents",
    "tools",
    "turns",
    "usage",
]
