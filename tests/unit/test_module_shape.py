"""The shape of ama's modules (docs/architecture.md "The shape of a module"): no two modules of a package import
each other round a circle — at the top, in a function or under `TYPE_CHECKING`, because a circle that only the
type checker sees still means neither module can be read, tested or moved without the other — and no module is
longer than a person reads in one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "ama_acp", ROOT / "conformance")
MAX_LINES = 600
OURS = {"ama_acp", "conformance"}  # the top-level packages whose imports are ours


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    rel = ROOT.joinpath(*name.split("."))
    return rel.is_dir() or rel.with_suffix(".py").is_file()


def imported_modules(path: Path) -> set[str]:
    """Every module of ours this file imports, at any depth; `from pkg import mod` counts as `pkg.mod`."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if _exists(sub) else target)
    return {name for name in found if name.split(".")[0] in OURS and _exists(name)} - {this}


def import_graph(roots: tuple[Path, ...] = PACKAGES) -> dict[str, set[str]]:
    return {module_name(p): imported_modules(p) for root in roots for p in sorted(root.rglob("*.py"))}


def package_of(module: str) -> str:
    return module.rpartition(".")[0]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components (more than one module) of each package's own import graph. A package's
    `__init__` importing its modules is not a circle unless a module imports the package's `__init__` back."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def inside(a: str, b: str) -> bool:
        return b in graph and (package_of(a) == package_of(b) or package_of(b) == a or package_of(a) == b)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if not inside(v, w):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_circle_inside_any_package() -> None:
    found = circles(import_graph())
    assert not found, "modules that import each other round a circle:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_no_module_is_longer_than_a_sitting() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for root in PACKAGES
        for p in root.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by job): {long}"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {
                "a.py": "from pkg import b\n",
                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n",
            },
            [["pkg.a", "pkg.b"]],
        ),
        ({"a.py": "def f():\n    from pkg import b\n", "b.py": "from . import a\n"}, [["pkg.a", "pkg.b"]]),
        ({"a.py": "from pkg import b\n", "b.py": "import os\n"}, []),
        ({"__init__.py": "from pkg.a import X\n", "a.py": "X = 1\n"}, []),
    ],
)
def test_the_circle_check_can_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], expected: list[list[str]]
) -> None:
    """A circle made by a function-level or TYPE_CHECKING import is found; a one-way import or a package's
    `__init__` re-exporting its module is not a circle."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(text)
    this = __import__(__name__, fromlist=["x"])
    monkeypatch.setattr(this, "ROOT", tmp_path)
    monkeypatch.setattr(this, "OURS", {"pkg"})
    assert circles(import_graph((package,))) == expected
