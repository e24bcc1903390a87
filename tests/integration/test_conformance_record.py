"""`python -m ama_conformance.record` with a small table of stand-ins for the public agents (none is installed here):
ama, the conforming fixture agent, one that dies at start and one that is not installed. Each installed one is run
and its row rewritten; the one not installed is skipped with a note and its row from an earlier run is kept."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ama_conformance import record
from ama_conformance.record import BEGIN, END, PublicAgent
from tests.support.acp_fixtures import agent_command
from tests.support.harness import Ama

pytestmark = pytest.mark.slow  # three short suite runs (-k versions), each of fresh agent processes

ROOT = Path(__file__).resolve().parents[2]
STARTUP_AGENT = ROOT / "tests" / "support" / "acp_fixtures" / "startup_agent.py"
KEPT = "| ghost-agent | 9.9 | 2026-12-01 | NOT CONFORMANT | R7 | — | by hand, 2026-12-01 |"
OLD_FIXTURE = "| fixture | 0.0 | 2026-12-01 | NOT CONFORMANT | R37 | — | by hand, 2026-12-01 |"


def test_the_record_reruns_installed_agents_and_keeps_the_rows_of_absent_ones(tmp_path):
    doc = tmp_path / "conformance.md"
    doc.write_text(
        f"# page\n\nbefore\n\n{BEGIN}\n{record.HEADER[0]}\n{record.HEADER[1]}\n{KEPT}\n{OLD_FIXTURE}\n{END}\n\nafter\n"
    )
    fast = ("-k", "versions")
    agents = [
        PublicAgent("ama", tuple(Ama(tmp_path).command()), fast),
        PublicAgent("fixture", tuple(agent_command()), fast),
        PublicAgent("dies", (sys.executable, str(STARTUP_AGENT), "--die", "3"), fast),
        PublicAgent("ghost-agent", ("acp-no-such-agent-installed-x7",), fast),
    ]
    notes: list[str] = []
    rows = record.record(agents, doc, today="2026-12-02", out=notes.append)
    by_name = {r.agent: r for r in rows}
    assert set(by_name) == {"ama", "fixture", "dies"}
    assert by_name["ama"].verdict == "CONFORMANT" and by_name["ama"].failures == "—"
    assert by_name["fixture"].verdict == "CONFORMANT" and by_name["fixture"].version != "unknown"
    assert by_name["dies"].verdict == "could not start"
    assert any("ghost-agent: skipped" in n and "not installed" in n and "kept" in n for n in notes)
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# page\n\nbefore\n\n") and text.endswith(f"{END}\n\nafter\n")
    table = record.read_rows(text)
    assert KEPT in table and OLD_FIXTURE not in table  # the absent agent's row kept, the rerun one replaced
    assert [record._name(line) for line in table] == ["ghost-agent", "fixture", "ama", "dies"]
    fixture_row = next(line for line in table if line.startswith("| fixture |"))
    assert (
        "| 2026-12-02 | CONFORMANT |" in fixture_row and "`python -m ama_conformance.record`, 2026-12-02" in fixture_row
    )


def test_the_published_table_is_there_with_its_markers_and_every_public_agent():
    text = record.DOC.read_text(encoding="utf-8")
    names = {record._name(line) for line in record.read_rows(text)}
    assert names >= {a.name for a in record.PUBLIC_AGENTS} - {"ama"}
    assert all(line.count("|") == len(record.HEADER[0].split("|")) - 1 for line in record.read_rows(text))
