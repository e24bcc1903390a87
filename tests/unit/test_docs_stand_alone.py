"""The repository stands alone: nothing in it sends the reader to a document that is not in it.

Two checks, each with a test that it notices what it looks for:

- no file (outside .git, .venv, caches and the vendored schema/) names one of the design documents the project
  was specified in but that are not part of the repository; the rules and sections they held are defined in
  docs/ (docs/rules.md for rule ids, docs/context.md, docs/sessions.md, … for the rest);
- every relative link in docs/*.md and README.md names a file in the repository, and a `#anchor` names a
  heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The documents outside the repository, by name. Spelled in parts so that this file does not name them.
OUTSIDE_DOCS = ("context-usage", "long-sessions", "acp-mode", "interface", "acp-v1-requirements")
SPEC_DIR = "shared" + "/spec"  # the folder they live in, next to a checkout
CITATION = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, OUTSIDE_DOCS)) + r")\.md\b|" + re.escape(SPEC_DIR))
SKIP_DIRS = frozenset(
    {".git", ".venv", "schema", "__pycache__", ".cache", "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
)
TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".toml", ".txt", ".json", ".jsonl", ".cfg", ".ini", ".yaml", ".yml", ".sh", ""}
)

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _repository_text_files() -> list[Path]:
    files = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            files.append(path)
    return sorted(files)


def citations_of_outside_docs(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line that names a document outside the repository."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if CITATION.search(line)]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation (backticks, commas, arrows…) dropped,
    each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, … as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        base = github_anchor(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(markdown: str) -> list[str]:
    """The targets of the links in `markdown` that point inside the repository (no scheme), code left out."""
    prose = INLINE_CODE.sub("", FENCE.sub("", markdown))
    return [t for t in LINK.findall(prose) if not SCHEME.match(t)]


def broken_links(doc: Path, text: str | None = None) -> list[str]:
    """What is wrong with the relative links of `doc` (its text read from disk unless given)."""
    problems = []
    text = doc.read_text(encoding="utf-8") if text is None else text
    for target in relative_links(text):
        path_part, _, anchor = target.partition("#")
        dest = (doc.parent / path_part).resolve() if path_part else doc
        where = f"{doc.relative_to(ROOT)}: ({target})"
        if not dest.is_relative_to(ROOT):
            problems.append(f"{where} points outside the repository")
            continue
        if not dest.exists():
            problems.append(f"{where}: no such file {dest.relative_to(ROOT)}")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            problems.append(f"{where}: {dest.relative_to(ROOT)} has no heading with the anchor #{anchor}")
    return problems


def _docs() -> list[Path]:
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


# --- the checks --------------------------------------------------------------------------------------------


def test_no_file_names_a_document_outside_the_repository() -> None:
    files = _repository_text_files()
    assert any(p.name == "rules.md" for p in files), "the scan found no docs/rules.md: it is broken"
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line}"
        for path in files
        for n, line in citations_of_outside_docs(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, (
        "these cite a document that is not in the repository; point them at the doc in docs/ that defines the "
        "rule or section:\n" + "\n".join(found)
    )


def test_every_relative_link_in_the_docs_resolves() -> None:
    docs = _docs()
    assert sum(len(relative_links(d.read_text(encoding="utf-8"))) for d in docs) > 10, "no links found: broken scan"
    problems = [p for doc in docs for p in broken_links(doc)]
    assert not problems, "broken links in the docs:\n" + "\n".join(problems)


# --- the checks notice what they look for ------------------------------------------------------------------


def test_a_citation_of_an_outside_document_is_found() -> None:
    name = OUTSIDE_DOCS[0] + ".md"
    text = f"ok line\nsee {name} U8 here\n../{SPEC_DIR}/x\n(docs/rules.md U8)\nmy-{name} is another file\n"
    assert citations_of_outside_docs(text) == [(2, f"see {name} U8 here"), (3, f"../{SPEC_DIR}/x")]


def test_anchors_follow_github() -> None:
    md = "# Title\n## Agent event → update\n### `size`, `percent`\n## Notes\n## Notes\n```\n# not a heading\n```\n"
    assert anchors(md) == {"title", "agent-event--update", "size-percent", "notes", "notes-1"}


def test_a_broken_link_and_a_missing_anchor_are_reported() -> None:
    text = (
        "[ok](rules.md) [anchor](rules.md#rule-ids-what-each-one-cited-in-the-code-and-tests-means) "
        "[gone](no-such-file.md) [bad anchor](rules.md#no-such-heading) [web](https://example.com) "
        "`[in code](nowhere.md)`\n"
    )
    doc = ROOT / "docs" / "probe.md"  # not written: only where relative links start from
    assert relative_links(text) == [
        "rules.md",
        "rules.md#rule-ids-what-each-one-cited-in-the-code-and-tests-means",
        "no-such-file.md",
        "rules.md#no-such-heading",
    ]
    problems = broken_links(doc, text)
    assert len(problems) == 2, problems
    assert "no such file docs/no-such-file.md" in problems[0]
    assert "#no-such-heading" in problems[1]
