"""The house as issue 37 left it, kept: delegation written once, and a map that names every folder.

- A task's session id (`<session>.task-<n>`) is built and parsed in one module (session/tasks/stored.py); the tool
  call of either kind of task is run by one tool runner (session/turn/tool_runner.py), which the session's host and
  a task's host both call; no class in ama_acp/ calls the delegated work a "child" (the word is "task";
  "subagent" is the ACP wire feature's).
- docs/architecture.md's map has a line for every package folder of ama_acp/ and conformance/.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from tests.support.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ama_acp"
ID_HOME = PACKAGE / "session" / "tasks" / "stored.py"
RUNNER = "ama_acp.session.turn.tool_runner"
HOSTS = (PACKAGE / "session" / "turn" / "host.py", PACKAGE / "session" / "tasks" / "host.py")


@functools.cache  # each module parsed once for every check here
def _tree(path: Path) -> ast.Module:
    return parse_source(path.read_text(encoding="utf-8"))


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of the module's code (docstrings and comments say what they like)."""
    tree = _tree(path)
    docs = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(body := getattr(node, "body", None), list)
        and body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def task_id_builders(package: Path = PACKAGE, home: Path = ID_HOME) -> list[str]:
    return [
        f"{path.relative_to(package.parent)}:{line}"
        for path in sorted(package.rglob("*.py"))
        if path != home
        for line, text in _strings(path)
        if ".task-" in text
    ]


def test_a_task_session_id_is_built_in_one_place() -> None:
    found = task_id_builders()
    assert not found, f"`.task-` spelled outside {ID_HOME.relative_to(ROOT)}: {found}"


def test_the_id_check_can_fail(tmp_path: Path) -> None:
    package = tmp_path / "ama_acp"
    package.mkdir()
    (package / "home.py").write_text('ID = "{}.task-{}"\n')
    (package / "other.py").write_text('"""A `<id>.task-<n>` id, in words."""\nX = f"{a}.task-{n}"\n')
    assert task_id_builders(package, package / "home.py") == ["ama_acp/other.py:2"]


def test_both_hosts_run_tools_through_the_one_runner() -> None:
    for host in HOSTS:
        tree = parse_source(host.read_text(encoding="utf-8"))
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == RUNNER
            for alias in node.names
        }
        assert "run_tool" in imported, f"{host.relative_to(ROOT)} does not run tools through {RUNNER}"


def test_no_class_calls_a_task_a_child() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.ClassDef) and "child" in node.name.lower()
    ]
    assert not found, found


def mapped_folders(text: str) -> set[str]:
    map_section = text.split("## The map", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_/]+)/`", map_section, re.M))


def test_the_map_names_every_folder() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    folders = {
        str(init.parent.relative_to(ROOT))
        for top in ("ama_acp", "conformance")
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    missing = sorted(folders - mapped_folders(text))
    assert not missing, f"folders missing from the map in docs/architecture.md: {missing}"


def test_the_map_check_can_fail() -> None:
    text = "# A\n\n## The map\n\n| folder | job |\n|---|---|\n| `ama_acp/` (top) | x |\n| `ama_acp/rpc/` | y |\n\n## Next\n"
    assert mapped_folders(text) == {"ama_acp", "ama_acp/rpc"}


MAX_IGNORES = 10  # issue 37: the tests are type-checked, with at most ten `type: ignore` (each with its reason)


def ignores(paths: list[Path]) -> list[str]:
    """Every `# type: ignore` comment (comments only: a string that mentions one is not one)."""
    import io
    import tokenize

    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if "type:" not in text:  # most files: no tokenizing needed
            continue
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT and re.search(r"#\s*type:\s*ignore", tok.string):
                found.append(f"{path.relative_to(path.parents[1])}:{tok.start[0]}")
    return found


def test_the_tests_keep_few_type_ignores() -> None:
    found = ignores(sorted((ROOT / "tests").rglob("*.py")))
    assert len(found) <= MAX_IGNORES, f"{len(found)} `type: ignore` in tests/ (at most {MAX_IGNORES}): {found}"


def test_the_ignore_count_can_fail(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.py").write_text('x = f()  # type: ignore[no-untyped-call]\ny = "# type: ignore"\n')
    assert ignores([folder / "a.py"]) == ["t/a.py:1"]
