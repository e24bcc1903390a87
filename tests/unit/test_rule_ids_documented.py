"""Every rule id that the code, tests or conformance suite cite has a row in docs/rules.md.

This test reads only the repository. The shared specs may be absent, and the repository must stand on its own.
A range such as `X1–X5` cites every id in it. Lint codes that look like rule ids are excluded by the explicit list
below.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("ama_acp", "tests", "conformance")
SUFFIXES = {".py", ".json", ".jsonl", ".toml", ".yaml", ".yml", ".txt", ".md", ".cfg", ".ini"}
RULES = ROOT / "docs" / "rules.md"
# The conformance suite's registry, as docs/conformance.md carries it, defines the ACP ids the suite checks.
REGISTRY_DOC = ROOT / "docs" / "conformance.md"

ID = re.compile(r"\b([RUEDPS])([0-9]{1,3})\b")
RANGE = re.compile(r"\b([RUEDPS])([0-9]{1,3})\s*[–-]\s*\1([0-9]{1,3})\b")
# A defined id: the first cell of a table row, e.g. "| R37 | MUST | ...".
ROW = re.compile(r"^\|\s*([RUEDPS][0-9]{1,3})\s*\|", re.MULTILINE)

# Linter codes (ruff/pycodestyle, pydocstyle, bandit) that match the id pattern but are not our rules.
LINT_CODES = frozenset({"E401", "E402", "E501", "E711", "E712", "E722", "E731", "E741", "D100", "D103", "S101"})


def _sources() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return files


def cited_ids(text: str) -> set[str]:
    ids = {letter + number for letter, number in ID.findall(text)}
    for letter, first, last in RANGE.findall(text):
        if int(first) < int(last) <= int(first) + 50:
            ids.update(f"{letter}{n}" for n in range(int(first), int(last) + 1))
    return ids - LINT_CODES


def citations() -> dict[str, list[str]]:
    """Cited id -> the files (relative to the repository) that cite it."""
    where: dict[str, list[str]] = {}
    for path in _sources():
        for rule in cited_ids(path.read_text(encoding="utf-8", errors="replace")):
            where.setdefault(rule, []).append(str(path.relative_to(ROOT)))
    return where


def defined_ids(doc: str) -> set[str]:
    return set(ROW.findall(doc))


def undocumented(doc: str, cited: dict[str, list[str]]) -> dict[str, list[str]]:
    defined = defined_ids(doc)
    return {rule: files for rule, files in sorted(cited.items()) if rule not in defined}


def test_every_cited_rule_id_is_defined_in_docs_rules_md() -> None:
    cited = citations()
    assert cited, "no rule ids found at all: the scan is broken"
    docs = RULES.read_text(encoding="utf-8") + "\n" + REGISTRY_DOC.read_text(encoding="utf-8")
    missing = undocumented(docs, cited)
    assert not missing, "rule ids cited but not defined in docs/rules.md or conformance.md (add a row): " + "; ".join(
        f"{rule} ({', '.join(files[:3])})" for rule, files in missing.items()
    )


def test_the_check_notices_a_removed_row() -> None:
    doc = RULES.read_text(encoding="utf-8")
    cited = citations()
    victim = sorted(cited)[0]
    without = re.sub(rf"^\|\s*{victim}\s*\|.*\n", "", doc, flags=re.MULTILINE)
    assert without != doc
    assert victim in undocumented(without, cited)


def test_ranges_and_lint_codes() -> None:
    text = "see U7–U9 and R79-R81; # noqa: " + " ".join(sorted(LINT_CODES))
    assert cited_ids(text) == {"U7", "U8", "U9", "R79", "R80", "R81"}
