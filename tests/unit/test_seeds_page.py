"""docs/seeds.md names, for each seed row, the tests that show what ama does (`file::function`), or says "not
shown by a test". This checks the page against the repository: every test it names exists, and no row of its
tables leaves the column empty — so the page cannot claim a row that no test shows."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "seeds.md"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
NONE = "not shown by a test"


def _row_tables(text: str) -> list[list[str]]:
    """The rows (each the line) of every table whose header's last column is "shown by"."""
    tables: list[list[str]] = []
    current: list[str] = []
    taking = False
    for line in text.splitlines():
        if not line.startswith("|"):
            if current:
                tables.append(current)
            current, taking = [], False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not current and not taking:
            taking = cells[-1] == "shown by"
            if not taking:
                continue
        elif set("".join(cells)) <= set("-: "):
            continue
        else:
            current.append(line)
    if current:
        tables.append(current)
    return tables


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def missing_tests(text: str) -> list[str]:
    """The `file::function` names of `text` that are not a module-level function of that file."""
    missing: list[str] = []
    seen: dict[str, set[str]] = {}
    for file, name in TEST_REF.findall(text):
        path = ROOT / file
        if file not in seen:
            seen[file] = _functions(path) if path.is_file() else set()
        if name not in seen[file]:
            missing.append(f"{file}::{name}")
    return missing


def rows_without_evidence(text: str) -> list[str]:
    """Table rows whose last cell names no test and does not say that none shows the row."""
    out: list[str] = []
    for table in _row_tables(text):
        for line in table:
            last = line.strip().strip("|").split("|")[-1]
            if not TEST_REF.search(last) and NONE not in last:
                out.append(line[:80])
    return out


def test_every_test_the_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert len(TEST_REF.findall(text)) >= 30, "the page names hardly any tests: the pattern is broken"
    assert missing_tests(text) == []


def test_every_row_names_a_test_or_says_none_shows_it() -> None:
    text = PAGE.read_text(encoding="utf-8")
    rows = [line for table in _row_tables(text) for line in table]
    assert len(rows) >= 40, "the page's tables were not found"
    assert rows_without_evidence(text) == []


def test_the_checks_notice_a_wrong_name_and_an_empty_column() -> None:
    bad_name = "`tests/unit/test_seeds_page.py::test_no_such_test`"
    assert missing_tests(bad_name) == ["tests/unit/test_seeds_page.py::test_no_such_test"]
    assert missing_tests("`tests/unit/no_such_file.py::test_x`") == ["tests/unit/no_such_file.py::test_x"]
    assert missing_tests("`tests/unit/test_seeds_page.py::test_every_test_the_page_names_exists`") == []
    table = "| id | ama | shown by |\n|---|---|---|\n| x | does it | |\n| y | does it | not shown by a test |\n"
    assert rows_without_evidence(table) == ["| x | does it | |"]
