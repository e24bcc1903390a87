"""The session budget's parts without a session (session/accounting/budget.py, config.py `[budget]`); the
whole over real pipes is tests/integration/test_budget_e2e.py."""

from __future__ import annotations

import pytest

from ama_acp.config import parse_config
from ama_acp.errors import ConfigError
from ama_acp.session.accounting.budget import Budget, parse_budget


@pytest.mark.parametrize(("value", "usd"), [("5", 5.0), ("0.25", 0.25), ("1e3", 1000.0), ("1_000", 1000.0)])
def test_a_positive_budget_is_taken(value: str, usd: float) -> None:
    cfg = parse_config(f"[budget]\nsession_usd = {value}\n", "cfg")
    assert cfg.budget.session_usd == usd and cfg.warnings == ()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[budget]\nsession_usd = -1\n", 2),
        ('model = "a/b"\n\n[budget]\nsession_usd = 0\n', 4),
        ("[budget]\nsession_usd = nan\n", 2),
        ("[budget]\nsession_usd = inf\n", 2),
        ('[budget]\nsession_usd = "5"\n', 2),
        ("[budget]\nsession_usd = true\n", 2),
        ("[budget]\nsession_usd = [5]\n", 2),
        ("budget.session_usd = -2\n", 1),
        ('model = "a/b"\nbudget = { session_usd = 0 }\n', 2),
    ],
)
def test_a_malformed_budget_is_reported_with_its_line_and_ignored(text: str, line: int) -> None:
    cfg = parse_config(text, "/home/p/config.toml")
    assert cfg.budget.session_usd is None  # ignored whole: no budget, not a half-applied one
    (warning,) = cfg.warnings
    assert warning.startswith(f"/home/p/config.toml (at line {line}): [budget] session_usd must be a positive"), warning
    assert "it is ignored" in warning


def test_the_rest_of_the_budget_table_is_checked_as_any_table() -> None:
    with pytest.raises(ConfigError, match="unknown field `session_eur`"):
        parse_config("[budget]\nsession_usd = 5\nsession_eur = 5\n", "cfg")


def test_a_file_cannot_write_the_warnings_itself() -> None:
    with pytest.raises(ConfigError, match="`warnings`"):
        parse_config('warnings = ["nothing"]\n', "cfg")


@pytest.mark.parametrize(
    ("text", "usd"),
    [
        ("5", 5.0),
        ("$2.50", 2.5),
        (" 0.01 ", 0.01),
        ("abc", None),
        ("-1", None),
        ("0", None),
        ("nan", None),
        ("inf", None),
        ("1e400", None),
        ("", None),
        ("9" * 50, None),
    ],
)
def test_the_commands_figure(text: str, usd: float | None) -> None:
    assert parse_budget(text) == usd


def test_the_notices_are_given_once_each() -> None:
    b = Budget(1.0)
    assert b.notes(0.79) == []
    ((severity, title, text),) = b.notes(0.8)
    assert (severity, title) == ("warning", "Budget nearly spent") and "$0.8000" in text and "$1.00" in text
    assert b.notes(0.9) == [] and not b.reached(0.9)
    assert b.reached(1.0)
    ((_, title, text),) = b.notes(None)
    assert title == "Budget not enforced" and "cannot be enforced" in text
    assert b.notes(None) == []
    assert not b.reached(None)  # an unknown cost never blocks


def test_a_cost_already_at_the_budget_gets_the_stop_not_the_80_percent_notice() -> None:
    b = Budget(1.0)
    assert b.notes(1.5) == [] and b.reached(1.5)
    assert "reached its budget of $1.00" in b.stop_reason(1.5)


def test_a_raised_budget_is_told_again_at_its_own_80_percent() -> None:
    b = Budget(1.0)
    assert b.notes(0.85)
    b.set(2.0)
    assert b.notes(0.85) == [] and not b.reached(1.0)
    assert b.notes(1.7)
    assert "set with /budget" in b.describe(1.7)


def test_no_budget_says_nothing_and_blocks_nothing() -> None:
    b = Budget(None)
    assert b.notes(None) == [] and b.notes(100.0) == [] and not b.reached(100.0)
    assert "**Budget:** none." in b.describe(None)
