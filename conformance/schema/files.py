"""Where the vendored ACP schema lives, and its check against schema/pin.json (once per process and root).

The schema is vendored in ``<repo>/schema/v1/`` (``schema.unstable.json`` and ``schema.json`` from the npm package
``@agentclientprotocol/sdk`` at the version ``schema/pin.json`` names). Nothing here fetches anything: a file that is
missing or does not match its pin fails loudly (``SchemaUnavailable``), saying what to do.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _schema_dir() -> Path:
    """The vendored schema: ``<repo>/schema`` when the suite runs from a checkout (or an editable install),
    else the copy the wheel carries as ``ama_conformance/_schema`` (setup.py maps that package onto schema/)."""
    package = Path(__file__).resolve().parents[1]  # conformance/, installed as ama_conformance
    repo = package.parent / "schema"
    return repo if (repo / "pin.json").is_file() else package / "_schema"


SCHEMA_DIR = _schema_dir()
UNSTABLE_NAME = "schema.unstable.json"
STABLE_NAME = "schema.json"


class SchemaUnavailable(RuntimeError):
    """The vendored schema is missing or does not match schema/pin.json. str() says which file and what to do."""


@functools.cache
def _pin_tool() -> ModuleType:
    """schema/refresh.py, which owns the pin format and its check. It is loaded from its path because schema/
    is data plus a person-run script, not a package (and a top-level package named ``schema`` would shadow
    the PyPI library of that name)."""
    path = SCHEMA_DIR / "refresh.py"
    spec = importlib.util.spec_from_file_location("ama_schema_refresh", path)
    if spec is None or spec.loader is None:
        raise SchemaUnavailable(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # msgspec resolves the Structs' postponed annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@functools.cache
def _verified(root: Path) -> Path:
    """``root`` once every file it vendors matches its pin (hashed once per process and root)."""
    tool = _pin_tool()
    try:
        found: list[str] = tool.problems(root)
    except tool.PinError as exc:
        found = [str(exc)]
    if found:
        raise SchemaUnavailable(
            f"the vendored ACP schema in {root} does not match its pin:\n  "
            + "\n  ".join(found)
            + "\nThe files are committed byte for byte; restore them from git, or, for a reviewed change of"
            " version, run `python schema/refresh.py` (see schema/README.md)."
        )
    return root


def schema_path(root: Path = SCHEMA_DIR) -> Path:
    """Path of the verified ``v1/schema.unstable.json`` (raises SchemaUnavailable, saying why)."""
    return _verified(root.resolve()) / "v1" / UNSTABLE_NAME


def stable_schema_path(root: Path = SCHEMA_DIR) -> Path:
    """Path of the verified stable ``v1/schema.json`` from the same package."""
    return _verified(root.resolve()) / "v1" / STABLE_NAME
