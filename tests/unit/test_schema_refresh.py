"""schema/refresh.py: `--check` verifies the vendored schema against schema/pin.json without touching the network,
and a refresh from a local tarball rewrites the files and the pin and prints the old and new hashes.

The script runs as a person runs it (a subprocess of this interpreter); the refresh is fed a tarball built here,
so no test reaches the registry."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from ama_conformance.schema.validate import SCHEMA_DIR

SCRIPT = SCHEMA_DIR / "refresh.py"
VENDORED = ("pin.json", "LICENSE", "v1/schema.json", "v1/schema.unstable.json")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, check=False)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "schema"
    for name in VENDORED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCHEMA_DIR / name, root / name)
    return root


def _pin(root: Path) -> dict[str, Any]:
    pin = json.loads((root / "pin.json").read_text())
    assert isinstance(pin, dict)
    return pin


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tarball(path: Path, members: dict[str, bytes]) -> Path:
    """An npm-style tarball (everything under package/) holding ``members``."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _package_json(version: str, name: str = "@agentclientprotocol/sdk") -> bytes:
    return json.dumps({"name": name, "version": version, "license": "Apache-2.0"}).encode()


def test_check_passes_on_the_committed_files() -> None:
    proc = _run("--check")
    assert proc.returncode == 0, proc.stderr
    assert "matches pin.json" in proc.stdout


def test_pin_names_the_package_version_and_every_vendored_file() -> None:
    pin = _pin(SCHEMA_DIR)
    assert (pin["package"], pin["version"], pin["license"]) == ("@agentclientprotocol/sdk", "2.4.0", "Apache-2.0")
    assert pin["tarball"]["url"] == "https://registry.npmjs.org/@agentclientprotocol/sdk/-/sdk-2.4.0.tgz"
    listed = {f["path"]: f for f in pin["files"]}
    assert set(listed) == {"LICENSE", "v1/schema.json", "v1/schema.unstable.json"}
    assert listed["v1/schema.unstable.json"]["source"] == "package/schema/v1/schema.unstable.json"
    for path, entry in listed.items():
        assert _sha((SCHEMA_DIR / path).read_bytes()) == entry["sha256"], path


def test_check_fails_on_a_modified_copy(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    target = root / "v1" / "schema.json"
    target.write_bytes(target.read_bytes().replace(b'"sessionId"', b'"sessionID"', 1))
    proc = _run("--check", "--root", str(root))
    assert proc.returncode == 1
    assert "v1/schema.json: sha256 " + _sha(target.read_bytes()) in proc.stderr
    assert _pin(root)["files"][0]["sha256"] in proc.stderr
    assert "v1/schema.unstable.json" not in proc.stderr  # only the file that differs is named


def test_check_fails_on_a_missing_file(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "LICENSE").unlink()
    proc = _run("--check", "--root", str(root))
    assert proc.returncode == 1
    assert "LICENSE: missing" in proc.stderr


def test_refresh_from_a_tarball_rewrites_files_and_pin_and_prints_the_hashes(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    old = {f["path"]: f["sha256"] for f in _pin(root)["files"]}
    new_stable = b'{"$defs": {}, "note": "a newer release"}\n'
    unstable = (root / "v1" / "schema.unstable.json").read_bytes()
    licence = (root / "LICENSE").read_bytes()
    tgz = _tarball(
        tmp_path / "sdk-9.9.9.tgz",
        {
            "package.json": _package_json("9.9.9"),
            "schema/v1/schema.json": new_stable,
            "schema/v1/schema.unstable.json": unstable,
            "LICENSE": licence,
        },
    )
    proc = _run("--root", str(root), "--tarball", str(tgz), "--version", "9.9.9")
    assert proc.returncode == 0, proc.stderr
    assert "@agentclientprotocol/sdk: 2.4.0 -> 9.9.9" in proc.stdout
    assert f"v1/schema.json: {old['v1/schema.json']} -> {_sha(new_stable)}  CHANGED" in proc.stdout
    assert f"v1/schema.unstable.json: {old['v1/schema.unstable.json']} -> {_sha(unstable)}  unchanged" in proc.stdout
    assert (root / "v1" / "schema.json").read_bytes() == new_stable
    pin = _pin(root)
    assert pin["version"] == "9.9.9"
    assert pin["tarball"]["sha256"] == _sha(tgz.read_bytes())
    assert pin["tarball"]["integrity"].startswith("sha512-")
    assert {f["path"]: f["sha256"] for f in pin["files"]}["v1/schema.json"] == _sha(new_stable)
    assert _run("--check", "--root", str(root)).returncode == 0


def test_refresh_refuses_a_tarball_of_another_version_and_writes_nothing(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = {name: (root / name).read_bytes() for name in VENDORED}
    tgz = _tarball(
        tmp_path / "other.tgz",
        {
            "package.json": _package_json("1.0.0"),
            "schema/v1/schema.json": b"{}",
            "schema/v1/schema.unstable.json": b"{}",
            "LICENSE": b"x",
        },
    )
    proc = _run("--root", str(root), "--tarball", str(tgz), "--version", "9.9.9")
    assert proc.returncode == 1
    assert "expected @agentclientprotocol/sdk@9.9.9" in proc.stderr
    assert {name: (root / name).read_bytes() for name in VENDORED} == before


def test_refresh_refuses_a_tarball_without_the_schema(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    tgz = _tarball(tmp_path / "empty.tgz", {"package.json": _package_json("2.4.0"), "LICENSE": b"x"})
    proc = _run("--root", str(root), "--tarball", str(tgz))
    assert proc.returncode == 1
    assert "the tarball has no package/schema/v1/schema.json" in proc.stderr
    assert _run("--check", "--root", str(root)).returncode == 0
