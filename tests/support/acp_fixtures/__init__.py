"""ACP agents with known behaviour, for testing the conformance suite: `fixture_agent.py` conforms, and each of
its `--break NAME` switches (`BREAKS`) breaks exactly one rule. The agent is a standalone stdlib script; this
package only says where it is and how to start it."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.acp_fixtures.fixture_agent import BREAKS

AGENT_SCRIPT = Path(__file__).resolve().with_name("fixture_agent.py")

__all__ = ["AGENT_SCRIPT", "BREAKS", "agent_command"]


def agent_command(*breaks: str, python: str = sys.executable) -> list[str]:
    """The command line that starts the fixture agent with these breaks (unknown names make it exit 2)."""
    return [python, str(AGENT_SCRIPT), *(f"--break={name}" for name in breaks)]
