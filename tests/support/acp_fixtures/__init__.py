"""ACP agents with known behaviour, for testing the conformance suite: `fixture_agent.py` conforms, and each of
its `--break NAME` switches (`BREAKS`) breaks exactly one rule. The agent is a standalone stdlib script; this
package only says where it is and how to start it."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.acp_fixtures.fixture_agent import BREAKS

AGENT_SCRIPT = Path(__file__).resolve().with_name("fixture_agent.py")
LAUNCH = AGENT_SCRIPT.with_name("launch.py")

__all__ = ["AGENT_SCRIPT", "BREAKS", "agent_command", "launch_command"]


def launch_command(agent: str, *args: str, python: str = sys.executable) -> list[str]:
    """The command line that starts `agent` (`fixture_agent` or `coverage_agent`) with `args`, the fast way:
    from its compiled module, without `site` (launch.py says why; ~40 ms of CPU less a start)."""
    return [python, "-S", str(LAUNCH), agent, *args]


def agent_command(*breaks: str, python: str = sys.executable) -> list[str]:
    """The command line that starts the fixture agent with these breaks (unknown names make it exit 2)."""
    return launch_command("fixture_agent", *(f"--break={name}" for name in breaks), python=python)
