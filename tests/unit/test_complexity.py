"""Complexity a reviewer accepts (docs/architecture.md "The shape of a module"): as radon grades cyclomatic
complexity, no function over 20 (ruff's C901, `max-complexity` in pyproject.toml, holds that ceiling too, on every
run of `ruff check`), and at most two blocks of grade C or worse (11 and up) per 1,000 lines of each package — where
httpx, anyio and the ACP Python SDK sit. A function that grows past the ceiling, or a package that gathers too many
branchy ones, fails here with the list to work on."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ama_acp", "conformance")
CEILING = 20
PER_THOUSAND_LINES = 2


@functools.cache  # both tests of a package read the same grades
def graded(root: Path) -> tuple[list[tuple[str, int]], int]:
    """(every block of grade C or worse as `path:line name` with its complexity, the package's lines)."""
    found: list[tuple[str, int]] = []
    lines = 0
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines += len(source.splitlines())
        for block in cc_visit(source):
            if cc_rank(block.complexity) >= "C":
                found.append((f"{path.relative_to(root.parent)}:{block.lineno} {block.fullname}", block.complexity))
    return found, lines


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_over_the_ceiling(package: str) -> None:
    found, _ = graded(ROOT / package)
    over = sorted((c, name) for name, c in found if c > CEILING)
    assert not over, f"over complexity {CEILING}: " + ", ".join(f"{name} ({c})" for c, name in over)


@pytest.mark.parametrize("package", PACKAGES)
def test_few_functions_are_graded_c_or_worse(package: str) -> None:
    found, lines = graded(ROOT / package)
    allowed = PER_THOUSAND_LINES * lines // 1000
    worst = sorted(found, key=lambda f: -f[1])
    assert len(found) <= allowed, (
        f"{len(found)} blocks of grade C or worse in {lines} lines of {package}/ ({allowed} allowed): "
        + ", ".join(f"{name} ({c})" for name, c in worst[:15])
    )


def test_ruff_holds_the_same_ceiling() -> None:
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C901" in lint["select"] and lint["mccabe"]["max-complexity"] == CEILING


def test_the_check_can_fail(tmp_path: Path) -> None:
    """A function with 21 branches is over the ceiling; a package of one short module holding it is too dense."""
    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(20))
    (package / "m.py").write_text(f"def f(x):\n{body}    return -1\n")
    found, lines = graded(package)
    assert found == [("pkg/m.py:1 f", 21)] and len(found) > PER_THOUSAND_LINES * lines // 1000
