"""Every test group, in run order: importing this module imports each group's module, whose `@group` decorators
register it in `base.GROUPS`. The runner, the report and the run take the list from here; nothing that a group
imports may import this module (tests/unit/test_module_shape.py would find the circle)."""

from __future__ import annotations

from ama_conformance.groups import (  # noqa: F401  (each import registers its groups)
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
from ama_conformance.groups.base import GROUPS

__all__ = ["GROUPS"]
