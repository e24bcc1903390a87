"""The wheel carries every package: pyproject lists them by name (so the vendored schema/ can be mapped in as
`conformance._schema`), and a package left off that list is missing only from installs, never from a checkout —
this test notices first."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_the_repository_is_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("ama_acp", "conformance")
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - listed == set(), "packages missing from [tool.setuptools] packages"
    # The others are data directories: the demo scripts, and the schema mapped in from schema/.
    mapped = config["package-dir"]
    assert mapped == {"conformance._schema": "schema"}
    for name in listed - found:
        where = ROOT / mapped.get(name, name.replace(".", "/"))
        parent = name.rpartition(".")[0]
        declared = name in config["package-data"] or any(
            pattern.startswith(name.rpartition(".")[2] + "/") for pattern in config["package-data"].get(parent, [])
        )
        assert where.is_dir() and declared, f"{name}: a data directory whose files no package-data entry names"
    assert (ROOT / "schema" / "pin.json").is_file()
