"""`conformance/record.py` without running anything: a report becomes its row, the table is rewritten between its
markers only, and the command line refuses what it cannot do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ama_conformance import record
from ama_conformance.record import BEGIN, END, PublicAgent, row_of

AGENT = PublicAgent("some-agent", ("some-agent", "--acp"))


def _report(verdict: str, fails: dict[str, str], version: str | None = "1.2.3") -> dict[str, Any]:
    return {
        "agent": {"agentInfo": {"name": "x", "version": version} if version else None},
        "verdicts": [{"profile": "acp", "verdict": verdict, "conformant": verdict == "CONFORMANT"}],
        "requirements": [{"id": rid, "tier": tier, "profile": "acp", "status": "FAIL"} for rid, tier in fails.items()]
        + [{"id": "E1", "tier": "MANDATORY", "profile": "usage", "status": "FAIL"}],  # another profile: left out
    }


def test_a_report_becomes_its_row():
    row = row_of(AGENT, 1, _report("NOT CONFORMANT", {"R7": "MANDATORY", "R74": "CAPABILITY", "R83": "ADVISORY"}), "D")
    assert (row.version, row.date, row.verdict, row.failures, row.advisory) == (
        "1.2.3",
        "D",
        "NOT CONFORMANT",
        "R7, R74",
        "R83",
    )
    assert row.line().startswith("| some-agent | 1.2.3 | D | NOT CONFORMANT | R7, R74 | R83 | ")
    clean = row_of(AGENT, 0, _report("NO VIOLATION FOUND", {}, version=None), "D")
    assert (clean.version, clean.verdict, clean.failures, clean.advisory) == ("unknown", "NO VIOLATION FOUND", "—", "—")
    assert row_of(AGENT, 2, _report("NO VIOLATION FOUND", {}), "D").verdict == "could not start"
    assert row_of(AGENT, -1, {}, "D").verdict == "not run (timed out)"


def test_only_the_table_between_the_markers_is_rewritten():
    doc = f"intro | not a row\n{BEGIN}\n{record.HEADER[0]}\n{record.HEADER[1]}\n| a | 1 |\n{END}\n| b | after |\n"
    assert record.read_rows(doc) == ["| a | 1 |"]
    out = record.write_rows(doc, ["| a | 2 |", "| c | 3 |"])
    assert out.startswith("intro | not a row\n") and out.endswith(f"{END}\n| b | after |\n")
    assert record.read_rows(out) == ["| a | 2 |", "| c | 3 |"]


def test_the_command_line_refuses_an_unknown_agent_and_a_page_without_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert record.main(["--only", "no-such-agent"]) == 2
    assert "no-such-agent" in capsys.readouterr().err
    page = tmp_path / "page.md"
    page.write_text("no table here\n", encoding="utf-8")
    # the page is read before any agent is looked up or started: nothing runs
    assert record.main(["--only", "opencode", "--doc", str(page), "--dry-run"]) == 2
    assert "no record table" in capsys.readouterr().err
