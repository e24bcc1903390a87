"""The shape of ama's modules (docs/architecture.md "The shape of a module"): no modules import each other round a
circle — anywhere: inside a package, between a package and its subpackages, or across packages; at the top, in a
function or under `TYPE_CHECKING`, because a circle that only the type checker sees still means none of its modules
can be read, tested or moved without the others — no module is longer than a person reads in one sitting, and no
folder holds more modules than a person can take in at a glance.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "ama_acp", ROOT / "conformance")
MAX_LINES = 600
MAX_MODULES = 20  # modules in one folder, __init__ not counted
OURS = {"ama_acp", "ama_conformance"}  # the top-level packages whose imports are ours
FOLDERS = {"ama_conformance": "conformance"}  # an import name whose folder is named otherwise (setup.py)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = {folder: name for name, folder in FOLDERS.items()}.get(parts[0], parts[0])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    top, *rest = name.split(".")
    rel = ROOT.joinpath(FOLDERS.get(top, top), *rest)
    return rel.is_dir() or rel.with_suffix(".py").is_file()


def imported_modules(path: Path) -> set[str]:
    """Every module of ours this file imports, at any depth; `from pkg import mod` counts as `pkg.mod`."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parse_source(path.read_text(encoding="utf-8"), filename=str(path))):
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
    found = {name for name in found if name.split(".")[0] in OURS and _exists(name)}
    # Importing `a.b.c` runs `a/b/__init__` first: a circle can pass through a package's `__init__` that the
    # import statement never names (the issue 37 circle did: groups.usage -> core.runner -> groups.base, whose
    # package `__init__` imports groups.usage). The importer's own packages are already running, so not those.
    own = {".".join(this.split(".")[:i]) for i in range(1, this.count(".") + 1)}
    for name in list(found):
        parts = name.split(".")
        found.update(a for a in (".".join(parts[:i]) for i in range(1, len(parts))) if a not in own)
    return found - {this}


def import_graph(roots: tuple[Path, ...] = PACKAGES) -> dict[str, set[str]]:
    return {module_name(p): imported_modules(p) for root in roots for p in sorted(root.rglob("*.py"))}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components (more than one module) of the whole import graph: a package's `__init__`
    is a module like any other, so it importing its modules is not a circle unless one of them, or anything they
    import, imports the package back."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in graph:
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


def test_no_circle_anywhere() -> None:
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


def crowded_folders(roots: tuple[Path, ...] = PACKAGES) -> dict[str, int]:
    counts = {
        str(folder.relative_to(ROOT)): sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        for root in roots
        for folder in [root, *root.rglob("*")]
        if folder.is_dir() and (folder / "__init__.py").is_file()
    }
    return {folder: n for folder, n in counts.items() if n > MAX_MODULES}


def test_no_folder_holds_more_than_twenty_modules() -> None:
    crowded = crowded_folders()
    assert not crowded, f"folders over {MAX_MODULES} modules (split them into subpackages by job): {crowded}"


def test_the_folder_check_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    for i in range(MAX_MODULES + 1):
        (package / f"m{i}.py").write_text("")
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", tmp_path)
    assert crowded_folders((package,)) == {"pkg": MAX_MODULES + 1}


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
        # across a package and its subpackage, through the subpackage's `__init__` (the circle of issue 37)
        (
            {
                "sub/__init__.py": "from pkg.sub import b\n",
                "sub/b.py": "from pkg import runner\n",
                "runner.py": "def f():\n    from pkg import sub\n",
            },
            [["pkg.runner", "pkg.sub", "pkg.sub.b"]],
        ),
        # the same when the import names only a module of the subpackage: its `__init__` runs first
        (
            {
                "sub/__init__.py": "from pkg.sub import b\n",
                "sub/b.py": "def f():\n    from pkg.runner import g\n",
                "sub/base.py": "",
                "runner.py": "from pkg.sub.base import X\n",
            },
            [["pkg.runner", "pkg.sub", "pkg.sub.b"]],
        ),
        # a module of a package importing a sibling, with the package's `__init__` re-exporting it: no circle
        ({"sub/__init__.py": "from pkg.sub.a import X\n", "sub/a.py": "from pkg.sub import b\n", "sub/b.py": ""}, []),
        # across two sibling packages
        (
            {"x/__init__.py": "", "x/a.py": "import pkg.y.b\n", "y/__init__.py": "", "y/b.py": "from pkg.x import a\n"},
            [["pkg.x.a", "pkg.y.b"]],
        ),
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
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    this = __import__(__name__, fromlist=["x"])
    monkeypatch.setattr(this, "ROOT", tmp_path)
    monkeypatch.setattr(this, "OURS", {"pkg"})
    monkeypatch.setattr(this, "FOLDERS", {})
    assert circles(import_graph((package,))) == expected
