"""Refresh or check the vendored ACP schema in this directory against its pin (``pin.json``).

    python schema/refresh.py --check                 # verify the committed files against pin.json (no network)
    python schema/refresh.py                         # re-fetch the pinned version, verify, rewrite, print hashes
    python schema/refresh.py --version 2.5.0         # move the pin to another version of the package
    python schema/refresh.py --tarball sdk-2.5.0.tgz # use a tarball obtained by other means (no network)

Only a person runs the fetching modes; the tests run ``--check`` and the offline ``--tarball`` mode only.
The tarball comes from ``npm pack`` when ``npm`` is on PATH (npm verifies the registry's integrity hash),
else by a plain HTTPS download from the registry, checked against the ``dist.integrity`` the registry's
metadata gives. A refresh that changes any hash changes ``pin.json`` and the files: it is a reviewed change
(the script prints the old and new hashes so the reviewer sees them).

Standard library plus msgspec (ama's own dependency): run it with the project's virtualenv interpreter.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import msgspec

HERE = Path(__file__).resolve().parent
PIN_NAME = "pin.json"
PACKAGE = "@agentclientprotocol/sdk"
REGISTRY = "https://registry.npmjs.org"
# What is vendored: path under schema/ -> path inside the npm tarball. The licence travels with the files
# because Apache-2.0 (section 4a) asks that a redistribution carries a copy of it.
VENDORED: dict[str, str] = {
    "v1/schema.json": "package/schema/v1/schema.json",
    "v1/schema.unstable.json": "package/schema/v1/schema.unstable.json",
    "LICENSE": "package/LICENSE",
}
NPM_TIMEOUT_S = 300
HTTP_TIMEOUT_S = 120
MAX_TARBALL_BYTES = 64 << 20  # the 2.4.0 tarball is ~0.8 MB; anything this large is not the package


class PinnedFile(msgspec.Struct, forbid_unknown_fields=True):
    path: str  # relative to schema/
    source: str  # member of the npm tarball
    sha256: str


class Tarball(msgspec.Struct, forbid_unknown_fields=True):
    url: str
    sha256: str
    integrity: str  # npm's Subresource-Integrity form: "sha512-<base64>"


class Pin(msgspec.Struct, forbid_unknown_fields=True):
    package: str
    version: str
    license: str  # the package.json "license" field of that version
    tarball: Tarball
    files: list[PinnedFile]


class PinError(Exception):
    """pin.json is missing or malformed, or the files do not match it. str() says which and how."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_pin(root: Path = HERE) -> Pin:
    path = root / PIN_NAME
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PinError(f"cannot read {path}: {exc}") from exc
    try:
        return msgspec.json.decode(raw, type=Pin)
    except msgspec.ValidationError as exc:
        raise PinError(f"{path} is not a valid pin: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise PinError(f"{path} is not JSON: {exc}") from exc


def problems(root: Path = HERE) -> list[str]:
    """Every way the files under ``root`` differ from its pin.json (empty when they match)."""
    pin = load_pin(root)
    out: list[str] = []
    listed = {f.path for f in pin.files}
    if listed != set(VENDORED):
        out.append(f"{PIN_NAME} lists {sorted(listed)}, this script vendors {sorted(VENDORED)}")
    for f in pin.files:
        path = root / f.path
        if not path.is_file():
            out.append(f"{f.path}: missing (pinned sha256 {f.sha256})")
            continue
        got = sha256_file(path)
        if got != f.sha256:
            out.append(f"{f.path}: sha256 {got}, pinned {f.sha256}")
    return out


# -- obtaining a tarball (person-run modes only) --------------------------------------------------------------


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def _npm_pack(version: str, workdir: Path) -> bytes:
    npm = shutil.which("npm")
    if npm is None:
        raise PinError("npm is not on PATH")
    cmd = [npm, "pack", f"{PACKAGE}@{version}", "--pack-destination", str(workdir), "--ignore-scripts", "--silent"]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False)
    tarballs = sorted(workdir.glob("*.tgz"))
    if proc.returncode != 0 or len(tarballs) != 1:
        raise PinError(f"`npm pack {PACKAGE}@{version}` exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return tarballs[0].read_bytes()


class _Dist(msgspec.Struct):
    tarball: str
    integrity: str


class _VersionMeta(msgspec.Struct):
    dist: _Dist


def _https_download(version: str) -> tuple[bytes, str]:
    """The tarball and its URL, checked against the integrity hash of the registry's metadata."""
    meta_url = f"{REGISTRY}/{PACKAGE}/{version}"
    with urllib.request.urlopen(meta_url, timeout=HTTP_TIMEOUT_S) as resp:  # noqa: S310 (fixed https URL)
        meta = msgspec.json.decode(resp.read(1 << 22), type=_VersionMeta)
    if not meta.dist.tarball.startswith(REGISTRY + "/"):
        raise PinError(f"the registry points the tarball at {meta.dist.tarball!r}, outside {REGISTRY}")
    with urllib.request.urlopen(meta.dist.tarball, timeout=HTTP_TIMEOUT_S) as resp:  # noqa: S310
        data = resp.read(MAX_TARBALL_BYTES + 1)
    if len(data) > MAX_TARBALL_BYTES:
        raise PinError(f"{meta.dist.tarball} is larger than {MAX_TARBALL_BYTES} bytes")
    if _integrity(data) != meta.dist.integrity:
        raise PinError(f"{meta.dist.tarball}: integrity {_integrity(data)}, the registry says {meta.dist.integrity}")
    return data, meta.dist.tarball


class _PackageJson(msgspec.Struct):
    name: str
    version: str
    license: str


def _extract(data: bytes) -> tuple[_PackageJson, dict[str, bytes]]:
    members: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        wanted = {"package/package.json", *VENDORED.values()}
        for name in sorted(wanted):
            try:
                info = tar.getmember(name)
            except KeyError as exc:
                raise PinError(f"the tarball has no {name}") from exc
            f = tar.extractfile(info) if info.isfile() else None
            if f is None:
                raise PinError(f"{name} in the tarball is not a regular file")
            with f:
                members[name] = f.read()
    manifest = msgspec.json.decode(members.pop("package/package.json"), type=_PackageJson)
    return manifest, members


def _atomic_write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def refresh(root: Path, version: str, tarball: bytes, url: str) -> list[str]:
    """Write the vendored files and pin.json from ``tarball``; return the report lines (old -> new)."""
    manifest, members = _extract(tarball)
    if manifest.name != PACKAGE or manifest.version != version:
        raise PinError(f"the tarball is {manifest.name}@{manifest.version}, expected {PACKAGE}@{version}")
    try:
        previous = load_pin(root)
        old: dict[str, str] = {f.path: f.sha256 for f in previous.files}
        old_version = previous.version
    except PinError:  # no pin yet (first vendoring) or an unreadable one: everything is new
        old, old_version = {}, "(none)"
    new = Pin(
        package=PACKAGE,
        version=version,
        license=manifest.license,
        tarball=Tarball(url=url, sha256=hashlib.sha256(tarball).hexdigest(), integrity=_integrity(tarball)),
        files=[
            PinnedFile(path=path, source=src, sha256=hashlib.sha256(members[src]).hexdigest())
            for path, src in VENDORED.items()
        ],
    )
    for f in new.files:
        _atomic_write(root / f.path, members[f.source])
    pin_text = json.dumps(msgspec.to_builtins(new), indent=2) + "\n"
    _atomic_write(root / PIN_NAME, pin_text.encode("utf-8"))
    lines = [f"{PACKAGE}: {old_version} -> {version} (licence {manifest.license})"]
    for f in new.files:
        before = old.get(f.path, "(none)")
        mark = "unchanged" if before == f.sha256 else "CHANGED: review this diff"
        lines.append(f"  {f.path}: {before} -> {f.sha256}  {mark}")
    return lines


def _say(line: str, *, err: bool = False) -> None:
    (sys.stderr if err else sys.stdout).write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only verify the files against pin.json (no network)")
    parser.add_argument("--version", help="package version to pin (default: the one pin.json names)")
    parser.add_argument("--tarball", type=Path, help="use this local npm tarball instead of fetching one")
    parser.add_argument("--root", type=Path, default=HERE, help="the schema directory (default: this one)")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    try:
        if args.check:
            found = problems(root)
            for line in found:
                _say(f"schema: {line}", err=True)
            if found:
                _say(f"schema: {root} does not match {PIN_NAME}; see schema/README.md", err=True)
                return 1
            _say(f"schema: {root} matches {PIN_NAME}")
            return 0
        version = args.version or load_pin(root).version
        # The registry's canonical URL is recorded whatever the route; the recorded integrity is what a reviewer
        # compares with `npm view PACKAGE@VERSION dist.integrity`.
        url = f"{REGISTRY}/{PACKAGE}/-/{PACKAGE.split('/')[-1]}-{version}.tgz"
        if args.tarball is not None:
            data = args.tarball.read_bytes()
        elif shutil.which("npm") is not None:
            with tempfile.TemporaryDirectory(prefix="acp-schema-") as tmp:
                data = _npm_pack(version, Path(tmp))
        else:
            data, url = _https_download(version)
        for line in refresh(root, version, data, url):
            _say(line)
        return 0
    except (PinError, OSError, tarfile.TarError, msgspec.DecodeError, subprocess.TimeoutExpired) as exc:
        _say(f"schema: {exc}", err=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
