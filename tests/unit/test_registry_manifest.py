"""The ACP registry manifest (registry/agent.json) matches the package: the version, the `uvx` distribution that
runs the `ama-acp` executable, the shape the registry's schema asks for, and a 16×16 SVG icon."""

from __future__ import annotations

import json
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import ama_acp

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "registry" / "agent.json"
ICON = ROOT / "registry" / "icon.svg"


def manifest() -> dict[str, Any]:
    found = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(found, dict)
    return found


def project() -> dict[str, Any]:
    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert isinstance(found, dict)
    return found


def test_the_manifest_version_is_the_package_version() -> None:
    data, proj = manifest(), project()
    assert data["version"] == proj["version"] == ama_acp.__version__
    assert data["distribution"] == {"uvx": {"package": f"{proj['name']}=={proj['version']}"}}


def test_uvx_finds_the_executable_it_runs() -> None:
    # `uvx PACKAGE` runs the executable named like the package: ama-acp, the ACP agent on stdio.
    scripts = project()["scripts"]
    assert scripts["ama-acp"] == "ama_acp.cli:acp_main"
    assert project()["name"] == "ama-acp"


def test_the_manifest_has_the_fields_the_registry_requires() -> None:
    data = manifest()
    assert set(data) <= {"id", "name", "version", "description", "repository", "website", "authors", "license",
                         "license_url", "icon", "distribution"}  # fmt: skip
    assert re.fullmatch(r"[a-z][a-z0-9-]*", data["id"])
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", data["version"])
    assert data["name"] and data["description"]
    assert data["repository"].startswith("https://")
    assert data["authors"] and all(isinstance(a, str) and a for a in data["authors"])
    assert data["license"] == project()["license"]["text"]
    assert set(data["distribution"]) == {"uvx"} and set(data["distribution"]["uvx"]) <= {"package", "args", "env"}


def test_the_icon_is_a_plain_16_by_16_svg() -> None:
    assert manifest()["icon"] == ICON.name
    root = ET.fromstring(ICON.read_text(encoding="utf-8"))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("16", "16", "0 0 16 16")
    # Nothing that runs or fetches: no scripts, no foreign objects, no external references.
    tags = {el.tag.rpartition("}")[2] for el in root.iter()}
    assert not tags & {"script", "foreignObject", "image", "use"}
    assert "http" not in ICON.read_text(encoding="utf-8").replace("http://www.w3.org/2000/svg", "")
