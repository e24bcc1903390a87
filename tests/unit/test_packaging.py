"""The wheel carries every package, found by setup.py rather than listed by hand, with the conformance suite
installed under a name of ama's own (`ama_conformance`, from the repository's conformance/ folder) and typed; the
vendored schema/ rides along as `ama_conformance._schema`. The test builds the wheel from a copy of the sources
(setuptools' own backend, no network) and reads what it holds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("ama_acp", "conformance", "schema", "setup.py", "pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(origin, src / name)
    out = work / "dist"
    build = "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_wheel(sys.argv[1]))\n"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", build, str(out)], cwd=src, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with zipfile.ZipFile(out / done.stdout.strip().splitlines()[-1]) as zf:
        return set(zf.namelist())


def _packages(top: str) -> set[str]:
    return {
        "/".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def test_every_package_of_the_repository_is_in_the_wheel(wheel: set[str]) -> None:
    dirs = {name.rpartition("/")[0] for name in wheel}
    missing = {p for p in _packages("ama_acp") if p not in dirs}
    missing |= {p for p in _packages("conformance") if "ama_" + p not in dirs}
    assert not missing, f"packages missing from the wheel: {sorted(missing)}"


def test_the_suite_installs_as_ama_conformance_typed(wheel: set[str]) -> None:
    assert not any(name.startswith("conformance/") for name in wheel), "a top-level `conformance` package"
    assert {"ama_acp/py.typed", "ama_conformance/py.typed"} <= wheel
    assert "ama_conformance/_schema/pin.json" in wheel
    assert any(name.startswith("ama_conformance/_schema/v1/") and name.endswith(".json") for name in wheel)
    assert any(name.startswith("ama_acp/scripts/") and name.endswith(".toml") for name in wheel)


IMPORT_OF_THE_FOLDER = re.compile(r"^\s*(?:from\s+conformance(?:\.[\w.]+)?\s+import|import\s+conformance\b)", re.M)


def test_nothing_imports_the_suite_by_its_folder_name() -> None:
    """The folder is conformance/, the import name ama_conformance: an import of `conformance` would work from a
    checkout (the repository's root is on sys.path) and load a second copy of every module, then fail installed."""
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for top in ("ama_acp", "conformance", "tests")
        for path in sorted((ROOT / top).rglob("*.py"))
        for text in [path.read_text(encoding="utf-8")]
        for match in IMPORT_OF_THE_FOLDER.finditer(text)
    ]
    assert not found, found


def test_the_import_check_can_fail() -> None:
    text = "import os\nfrom conformance.core import agent\n    import conformance\nimport conformance_x\n"
    assert [m.group(0).strip() for m in IMPORT_OF_THE_FOLDER.finditer(text)] == [
        "from conformance.core import",
        "import conformance",
    ]


def test_the_suite_runs_by_path_from_a_checkout_not_installed() -> None:
    """`python conformance/run.py` from a checkout where ama_conformance is not installed: run.py registers the
    folder under that name (`-S`: the editable install's import hook is not loaded; the dependencies still are)."""
    import sysconfig

    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "conformance" / "run.py"), "--help"],
        cwd=ROOT.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: ama conformance")
