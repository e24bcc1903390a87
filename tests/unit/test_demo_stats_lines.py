"""`ama demo`'s stats lines (client/demo.py `stats_lines`): money as money, nested objects indented, a list of
objects one line each, and an empty list as a word rather than a blank after its name."""

from __future__ import annotations

from ama_acp.client.demo import stats_lines


def test_stats_lines_show_money_nesting_records_and_an_empty_list() -> None:
    lines = stats_lines(
        {
            "cost": {"amount": 0.0451, "currency": "USD"},
            "context": {"tier": "healthy"},
            "instructions": [{"path": "AGENTS.md", "tokens": 62}],
            "tasks": [],
        }
    )
    assert lines == [
        "  cost          $0.0451",
        "  context:",
        "    tier  healthy",
        "  instructions:",
        "    path AGENTS.md · tokens 62",
        "  tasks         none",
    ]
