"""Writing what `ama setup` decided: the config merged into the existing file, the key into the credentials file.

The config keeps everything it held: the existing text is patched line by line (`model = …`, the provider's
keys, an appended `[[models]]` entry), so comments and layout survive; the patched text must load to exactly
the merged data, else the file is rewritten from that data (and the person is told its comments were lost).
A file that does not parse, or that ama would refuse, is an error and is never overwritten.

Both files are written at the very end (`commit`), each atomically (a temporary file in the same directory,
fsynced, renamed); if the credentials cannot be written, the config is put back as it was.
"""

from __future__ import annotations

import copy
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ama_acp import ownfiles
from ama_acp.config import MAX_CONFIG_BYTES, ConfigError, parse_config
from ama_acp.credentials import CredentialsError, read_credentials, replace_atomically, write_credentials
from ama_acp.setup import toml_out
from ama_acp.setup.choices import SetupError

NEW_FILE_HEADER = (
    "# ama's configuration (docs/configuration.md). No key belongs here: `ama setup` stores them apart.\n\n"
)


@dataclass(frozen=True)
class ProviderTable:
    """A `[providers.NAME]` table to set: these keys, api_key_env removed when None."""

    name: str
    kind: str
    base_url: str
    api_key_env: str | None


@dataclass(frozen=True)
class Existing:
    path: Path
    text: str | None  # None: no file yet
    data: dict[str, Any] = field(default_factory=dict)


def read_existing(path: Path) -> Existing:
    """The config as it is. Not TOML, or not a config ama accepts: a SetupError naming the line (exit 2)."""
    try:
        raw = ownfiles.read_named(path, MAX_CONFIG_BYTES)  # a FIFO or a device here must not block `ama setup`
    except FileNotFoundError:
        return Existing(path, None)
    except (IsADirectoryError, ownfiles.OwnFileRefused) as exc:
        if isinstance(exc, IsADirectoryError) or exc.kind == "a directory":
            raise SetupError(f"{path} is a directory, not a config file") from None
        raise SetupError(f"cannot read {path}: {exc}") from None
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
        parse_config(text, str(path))
    except UnicodeDecodeError:
        raise SetupError(f"{path} is not UTF-8 text; it was not changed") from None
    except tomllib.TOMLDecodeError as exc:
        raise SetupError(f"{path}: {exc}; fix it (it was not changed)") from None
    except ConfigError as exc:
        raise SetupError(f"{exc}; fix it (it was not changed)") from None
    return Existing(path, text, data)


def check_credentials(path: Path) -> dict[str, str]:
    """The stored keys; a file that cannot be used is exit 2 before any question, and is never overwritten."""
    try:
        return read_credentials(path)
    except CredentialsError as exc:
        raise SetupError(f"{exc}; fix or remove it (it was not changed)") from None


def merged(
    data: Mapping[str, Any],
    model_id: str,
    provider: ProviderTable | None,
    add_model: bool,
    context_window: int | None = None,
) -> dict[str, Any]:
    """`data` with the default model set, the provider's table set (its other keys kept) and a `[[models]]`
    entry appended (with `context_window` when known): what the written file must load to."""
    new = copy.deepcopy(dict(data))
    new["model"] = model_id
    if provider is not None:
        providers = new.setdefault("providers", {})
        table = dict(providers.get(provider.name, {}))
        table["kind"] = provider.kind
        table["base_url"] = provider.base_url
        if provider.api_key_env:
            table["api_key_env"] = provider.api_key_env
        else:
            table.pop("api_key_env", None)
        providers[provider.name] = table
    if add_model:
        new.setdefault("models", []).append(_model_entry(model_id, context_window))
    elif context_window is not None:
        # `--context-window` for a model the config already has an entry for: that entry gets the window.
        for entry in new.get("models", []):
            if isinstance(entry, dict) and entry.get("id") == model_id:
                entry["context_window"] = context_window
    return new


def _model_entry(model_id: str, context_window: int | None) -> dict[str, Any]:
    return {"id": model_id, **({"context_window": context_window} if context_window is not None else {})}


@dataclass(frozen=True)
class Rendered:
    text: str
    comments_lost: bool  # the file had to be rewritten from its data


def render(
    existing: Existing,
    model_id: str,
    provider: ProviderTable | None,
    add_model: bool,
    context_window: int | None = None,
) -> Rendered:
    target = merged(existing.data, model_id, provider, add_model, context_window)
    if existing.text is not None:
        patched = _patch(existing.text, existing.data, model_id, provider, add_model, context_window)
        if patched is not None and _loads(patched) == target:
            return Rendered(patched, False)
    text = toml_out.dumps(target)
    if existing.text is None:
        text = NEW_FILE_HEADER + text
    if _loads(text) != target:  # a bug here must not reach the person's file
        raise SetupError("internal error: the new config would not read back as written; nothing was written")
    had_comments = existing.text is not None and "#" in existing.text
    return Rendered(text, had_comments)


def _loads(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


_HEADER = re.compile(r"^\s*\[")
_MODELS_HEADER = re.compile(r"^\s*\[\[\s*models\s*\]\]\s*(#.*)?$")


def _patch(
    text: str,
    data: Mapping[str, Any],
    model_id: str,
    provider: ProviderTable | None,
    add_model: bool,
    context_window: int | None = None,
) -> str | None:
    """The existing text with the changes made in place; None when its shape is one this does not edit (the
    caller then rewrites the file). Not trusted: the caller checks that it loads to the merged data."""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = _lines(text, nl)
    first_header = next((i for i, line in enumerate(lines) if _HEADER.match(line)), len(lines))
    lines = _set_keys(lines, 0, first_header, {"model": model_id}, nl, top=True)
    patched = lines if provider is None else _patch_provider(lines, data, provider, nl)
    if patched is None:
        return None
    if add_model:
        patched += _block("[[models]]", _model_entry(model_id, context_window), patched, nl)
    elif context_window is not None:
        patched = _patch_window(patched, data, model_id, context_window, nl)
    return None if patched is None else "".join(patched)


def _lines(text: str, nl: str) -> list[str]:
    """`text` as lines that keep their ends, the last one ended too."""
    # TOML lines end at \n (or \r\n) only; str.splitlines would also split at \x85, \u2028 and the other
    # Unicode breaks, which may sit inside a string value.
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += nl
    return lines


def _table_end(lines: list[str], start: int) -> int:
    """Where the table whose keys begin at `start` ends: the next header, or the end of the file."""
    return next((i for i in range(start, len(lines)) if _HEADER.match(lines[i])), len(lines))


def _patch_provider(lines: list[str], data: Mapping[str, Any], provider: ProviderTable, nl: str) -> list[str] | None:
    """The provider's keys set in its `[providers.NAME]` table, or the table appended; None when the file
    defines it some other way (dotted keys, inline)."""
    updates = {"kind": provider.kind, "base_url": provider.base_url, "api_key_env": provider.api_key_env}
    if provider.name not in data.get("providers", {}):
        return lines + _block(f"[providers.{toml_out.key(provider.name)}]", updates, lines, nl)
    name = re.escape(provider.name)
    header = re.compile(r"^\s*\[\s*providers\s*\.\s*(" + name + r'|"' + name + r'")\s*\]\s*(#.*)?$')
    found = [i for i, line in enumerate(lines) if header.match(line.rstrip("\r\n"))]
    if len(found) != 1:
        return None
    start = found[0] + 1
    return _set_keys(lines, start, _table_end(lines, start), updates, nl)


def _patch_window(
    lines: list[str], data: Mapping[str, Any], model_id: str, context_window: int, nl: str
) -> list[str] | None:
    """`context_window` set in the model's `[[models]]` entry; None when the entries are not all spelled so."""
    # The n-th `[[models]]` header is the n-th entry when the file spells every entry so (not `models = […]`).
    entries = data.get("models", [])
    if len(_models_headers(lines)) != len(entries):
        return None
    for n, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("id") == model_id:
            start = _models_headers(lines)[n] + 1
            lines = _set_keys(lines, start, _table_end(lines, start), {"context_window": context_window}, nl)
    return lines


def _models_headers(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if _MODELS_HEADER.match(line.rstrip("\r\n"))]


def _block(header: str, values: Mapping[str, object], lines: list[str], nl: str) -> list[str]:
    gap = [nl] if lines and lines[-1].strip() else []
    return [*gap, header + nl, *(f"{k} = {toml_out.value(v)}{nl}" for k, v in values.items() if v is not None)]


def _set_keys(
    lines: list[str], start: int, end: int, values: Mapping[str, object], nl: str, *, top: bool = False
) -> list[str]:
    """Set (or, for None, remove) `key = value` lines of the table between `start` and `end`: a key's line is
    replaced where it stands, a new key goes after the table's last key line (at the top of the file for the
    top-level table when it has none)."""
    out = list(lines)
    region = range(start, end)
    for name, new in values.items():
        pattern = re.compile(r"^\s*(" + re.escape(name) + r'|"' + re.escape(name) + r'")\s*=')
        at = [i for i in region if pattern.match(out[i])]
        line = f"{name} = {toml_out.value(new)}{nl}" if new is not None else None
        if at:
            out[at[0]] = line if line is not None else ""
        elif line is not None:
            out.insert(_new_key_at(out, region, top), line)
            region = range(start, region.stop + 1)
    return out


def _new_key_at(lines: list[str], region: range, top: bool) -> int:
    """Where a new key of the table in `region` goes: after its last key line, else at the table's top."""
    keyed = [i for i in region if lines[i].strip() and not lines[i].lstrip().startswith("#")]
    if keyed:
        return keyed[-1] + 1
    return 0 if top else region.start


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one rename; a new file gets 0644 less the umask (the config holds no key),
    an existing one keeps its permissions. A symlink (a dotfiles checkout) is followed: its target is replaced."""
    if path.is_symlink():
        path = path.resolve()
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = None
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SetupError(f"cannot create {directory}: {exc.strerror or exc}") from None
    try:
        replace_atomically(path, data, mode)
    except OSError as exc:
        raise SetupError(f"cannot write {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Plan:
    config_path: Path
    config_text: str
    old_config: str | None  # what to put back; None: there was no file
    credentials_path: Path
    keys: dict[str, str]  # variable → key to store; empty: nothing to store


def commit(plan: Plan) -> None:
    """Write the config, then the credentials; if the second write fails (or is interrupted), the config is
    restored, so a failed setup leaves both files as they were."""
    write_atomic(plan.config_path, plan.config_text.encode("utf-8"))
    try:
        if plan.keys:
            write_credentials(plan.credentials_path, plan.keys)
    except BaseException as exc:
        try:
            if plan.old_config is None:
                plan.config_path.unlink(missing_ok=True)
            else:
                write_atomic(plan.config_path, plan.old_config.encode("utf-8"))
        except (OSError, SetupError) as undo:
            raise SetupError(
                f"{exc}; and {plan.config_path} could not be put back ({undo}): check it", code=1
            ) from None
        if isinstance(exc, CredentialsError):
            raise SetupError(f"{exc}; nothing was written", code=1) from None
        raise
