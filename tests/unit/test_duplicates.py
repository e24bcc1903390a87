"""Code written twice (issue 37 point 6): the places in `ama_acp/` where six or more lines of code stand again
elsewhere, the same to the letter once blank lines, comments, docstrings, imports and lone punctuation are set aside
and white space is folded. Each pair of places is a piece of logic with two homes; a change made in one is missed in
the other. The count may only go down: a new pair fails here, naming both places, and the ceiling is lowered when
pairs are removed.

This is a simple, exact check of our own (a hash of every window of six code lines), not a clone detector: copies
that differ only in names escape it, so a person's review and the `duplicates` tool stay the wider net."""

from __future__ import annotations

import ast
import hashlib
import io
import tokenize
from collections import defaultdict
from pathlib import Path

from tests.support.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 6
# Pairs in ama_acp/ today: two `__all__`-like name lists, two schema types, and one `anyio.open_process` keyword list
# in client/ and tools/ (layers that may not share a module). Lower it as pairs go.
CEILING = 4
THIN = {"", "(", ")", "[", "]", "{", "}", "),", "],", "},", "):", "else:", "try:", "finally:", "pass", "return", '"""'}


def code_lines(source: str) -> list[tuple[int, str]]:
    """(line number, folded text) of each line that carries code: no comments, docstrings, imports, thin lines."""
    skip: set[int] = set()
    tree = parse_source(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            doc = body[0].value
            if isinstance(doc, ast.Constant) and isinstance(doc.value, str):
                skip.update(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    comments: dict[int, int] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.start[1]
    out: list[tuple[int, str]] = []
    for number, line in enumerate(source.splitlines(), start=1):
        if number in skip:
            continue
        text = line[: comments[number]] if number in comments else line
        folded = " ".join(text.split())
        if folded not in THIN:
            out.append((number, folded))
    return out


def pairs(files: list[Path], root: Path = ROOT) -> list[str]:
    """Each pair of places (`a.py:10 ~ b.py:40`) whose code shares a run of WINDOW lines; one row for every two
    files, or two places in one file, however long the runs they share."""
    seen: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for path in files:
        lines = code_lines(path.read_text(encoding="utf-8"))
        name = str(path.relative_to(root))
        for i in range(len(lines) - WINDOW + 1):
            window = "\n".join(text for _, text in lines[i : i + WINDOW])
            seen[hashlib.blake2b(window.encode(), digest_size=16).hexdigest()].append((name, lines[i][0]))
    found: dict[tuple[str, str], str] = {}
    for places in seen.values():
        for a in range(len(places)):
            for b in range(a + 1, len(places)):
                (fa, la), (fb, lb) = sorted((places[a], places[b]))
                if fa == fb and abs(la - lb) < WINDOW:
                    continue  # a run that repeats itself within six lines: one place
                found.setdefault((fa, fb), f"{fa}:{la} ~ {fb}:{lb}")
    return sorted(found.values())


# Generated from the code it repeats, and checked equal to it by a test of its own: a copy by design, never edited
# by hand (tests/unit/test_tool_declarations.py regenerates it).
GENERATED = {"ama_acp/tools/declared.py"}


def test_code_written_twice_in_ama_acp_stays_under_the_ceiling() -> None:
    written = [p for p in sorted((ROOT / "ama_acp").rglob("*.py")) if str(p.relative_to(ROOT)) not in GENERATED]
    found = pairs(written)
    assert len(found) <= CEILING, f"{len(found)} pairs of places share {WINDOW}+ lines of code:\n" + "\n".join(found)


def test_the_check_finds_a_copy_and_ignores_what_is_not_code(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = compute({i}, y)\n" for i in range(WINDOW))
    (tmp_path / "a.py").write_text(f'import os\n\n\ndef f(y):\n    """Doc."""\n{body}    return x0\n')
    (tmp_path / "b.py").write_text(f"def g(y):  # another\n    # a comment\n{body}\n    return x1\n")
    (tmp_path / "c.py").write_text(
        '"""Only a docstring\nand\nmore\nlines\nof\nprose\nhere."""\nimport os\nimport sys\n'
    )
    (tmp_path / "d.py").write_text(
        '"""Only a docstring\nand\nmore\nlines\nof\nprose\nhere."""\nimport os\nimport sys\n'
    )
    files = sorted(tmp_path.glob("*.py"))
    assert pairs(files, tmp_path) == ["a.py:6 ~ b.py:3"]
