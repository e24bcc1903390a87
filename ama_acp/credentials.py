"""The credentials file: API keys that `ama setup` keeps for a person, so an editor that passes no environment
still finds them. Keys are looked up in the environment first, then here (docs/configuration.md "Credentials").

    # ~/.config/ama/credentials.toml (0600; AMA_CREDENTIALS names another path)
    [keys]
    OPENAI_API_KEY = "sk-…"

Each key is stored under the name of the environment variable it stands in for, so every place that reads a
provider's `api_key_env` reads this file too, through `key_source()`. The file is read again when it changes
(authenticate re-reads credentials after `ama setup` ran in a terminal). Its values are registered as secrets:
the redactor keeps them out of logs and session files, and commands never see them (they are in no environment).
A malformed file is a CredentialsError naming the line, never quoting a value. `write_credentials` (what
`ama setup` calls) merges keys into it atomically, and the file is never readable by others at any moment.
"""

from __future__ import annotations

import os
import re
import stat
import threading
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

from ama_acp import ownfiles
from ama_acp.errors import ConfigError
from ama_acp.secrets import register_secret_values

FILE_NAME = "credentials.toml"
MAX_FILE_BYTES = 1024 * 1024  # a handful of keys; a file past this is refused, never read whole


class CredentialsError(ConfigError):
    """The credentials file exists but cannot be used (unreadable, not TOML, wrong shape)."""


def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("AMA_CREDENTIALS"):
        return Path(env["AMA_CREDENTIALS"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "ama" / FILE_NAME


def read_credentials(path: Path) -> dict[str, str]:
    """The keys in `path` ({} when it does not exist). Only string values under [keys] count."""
    try:
        # A FIFO left `initialize` unanswered, a link to /dev/zero ended ama with a MemoryError (issue 39 point
        # 11): only a regular file is opened, without blocking, and read up to the cap.
        raw = ownfiles.read_named(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        # tomllib's message names the line and column; it never quotes the offending value.
        raise CredentialsError(f"{path} is not valid TOML: {exc}") from None
    keys = data.get("keys", {})
    if not isinstance(keys, dict):
        raise CredentialsError(f'{path}: [keys] must be a table of NAME = "value"')
    return {k: v for k, v in keys.items() if isinstance(k, str) and isinstance(v, str) and v}


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what `ama setup` stores keys under: environment variable names
_BARE = re.compile(r"[A-Za-z0-9_-]+")  # a TOML bare key


def _toml_string(text: str) -> str:
    """A TOML basic string for a value already checked to hold no control character or lone surrogate."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _storable(value: str) -> bool:
    return bool(value) and not any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in value)


def _make_private_dirs(directory: Path) -> None:
    """Create `directory` and any missing parent 0700: a credentials folder that never was group-readable."""
    missing: list[Path] = []
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass


def write_credentials(path: Path, updates: Mapping[str, str]) -> None:
    """Set the keys `updates` names in the credentials file, keeping the others it holds (only the `[keys]`
    table's string values survive: the file is ama's own). Atomic: a temporary file in the same directory,
    created 0600 (never readable by others at any moment), written, fsynced and renamed over the old one; the
    directory is created 0700 when missing. A file that cannot be read or parsed is a CredentialsError and is
    left as it is."""
    _check_updates(updates)
    kept = {k: v for k, v in read_credentials(path).items() if _storable(k) and _storable(v)}
    merged = {**kept, **updates}
    text = "# API keys stored by `ama setup`. Keep this file private (0600).\n[keys]\n" + "".join(
        f"{k if _BARE.fullmatch(k) else _toml_string(k)} = {_toml_string(v)}\n" for k, v in sorted(merged.items())
    )
    if path.is_symlink():  # replace what it points to, not the link (a dotfiles checkout keeps working)
        path = path.resolve()
    directory = path.parent
    try:
        _make_private_dirs(directory)
        replace_atomically(path, text.encode("utf-8"), 0o600)
    except OSError as exc:
        raise CredentialsError(f"cannot write {path}: {exc.strerror or exc}") from None
    register_secret_values(updates.values())


def _check_updates(updates: Mapping[str, str]) -> None:
    for name, value in updates.items():
        # The names are environment variable names; a key is never quoted back (it may be mistyped, not leaked).
        if not _NAME.fullmatch(name):
            raise CredentialsError(f"cannot store a key under {name!r}: not an environment variable name")
        if not _storable(value):
            raise CredentialsError(f"cannot store {name}: the key is empty or holds control characters")


def replace_atomically(path: Path, data: bytes, mode: int | None) -> None:
    """Replace `path` with `data` in one rename: a temporary file beside it (created exclusively, never through a
    link), written, synced, renamed over `path`, and the directory synced. `mode` None: a new file gets 0644 less
    the umask; else exactly `mode` from the first byte. Raises OSError, having removed the temporary file."""
    directory = path.parent
    tmp = directory / f".{path.name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644 if mode is None else mode
    )
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # the umask can only take bits away; this makes it exactly `mode`
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(directory)


def fsync_directory(directory: Path) -> None:
    """Make the rename durable; a file system that cannot sync a directory has nothing more to offer."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def too_open(path: Path) -> bool:
    """Whether others than the owner may read the file (then `ama doctor` says so)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


class _Cache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: tuple[str, float, int] | None = None
        self.keys: dict[str, str] = {}

    def keys_of(self, path: Path) -> dict[str, str]:
        try:
            st = path.stat()
            stamp = (str(path), st.st_mtime, st.st_size)
        except OSError:
            stamp = (str(path), 0.0, -1)
        with self.lock:
            if stamp != self.seen:
                self.keys = read_credentials(path) if stamp[2] >= 0 else {}
                self.seen = stamp
                register_secret_values(self.keys.values())
            return self.keys


_cache = _Cache()


class KeySource(Mapping[str, str]):
    """The environment, with the credentials file behind it: a variable that is unset or empty in the
    environment reads from the file. What resolve.py looks keys up in."""

    def __init__(self, env: Mapping[str, str], keys: Mapping[str, str]) -> None:
        self._env, self._keys = env, keys

    def __getitem__(self, name: str) -> str:
        value = self._env.get(name)
        if value:
            return value
        if name in self._keys:
            return self._keys[name]
        if value is not None:
            return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self._env
        yield from (k for k in self._keys if k not in self._env)

    def __len__(self) -> int:
        return len(set(self._env) | set(self._keys))

    def from_file(self, name: str) -> bool:
        """Whether `name` comes from the credentials file (it is not set in the environment)."""
        return not self._env.get(name) and name in self._keys


def key_source(env: Mapping[str, str] | None = None) -> KeySource:
    """The environment (os.environ unless given) over the current credentials file. A file that cannot be used
    is treated as absent here (the error is `ama doctor`'s and `ama setup`'s to show)."""
    env = os.environ if env is None else env
    try:
        keys = _cache.keys_of(credentials_path(env))
    except CredentialsError:
        keys = {}
    return KeySource(env, keys)
