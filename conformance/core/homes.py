"""A fresh home for each group: the agent under test cannot carry what one group did into the next.

Agents keep settings, sign-ins and sessions under HOME and the XDG base directories. A group that switches a
model or a mode can make the agent save it (mistral-vibe does, and its next `session/new` then failed), and a
group that lists sessions would see those of earlier groups and earlier runs. So each group (and the start-up
probe) starts its agents with HOME and XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_STATE_HOME and XDG_CACHE_HOME pointing
into a directory of its own under the run's temporary directory, seeded with a copy of what the person named
(`--home-copy`: a sign-in, a config file) and removed with the run. `--keep-home` gives every group the
environment's own HOME instead, as before.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ama_conformance.core.config import RunConfig

# Where each XDG base directory lives inside a home when the variable is unset (the XDG spec's defaults).
XDG_DIRS = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
    "XDG_CACHE_HOME": ".cache",
}


class HomeCopyError(ValueError):
    """A --home-copy path that cannot be copied into a fresh home (missing, or outside HOME and the XDG dirs)."""


def _bases(env: dict[str, str]) -> list[tuple[Path, str]]:
    """The person's base directories with where each goes in a fresh home: the XDG ones first (they may lie
    inside HOME, and then they decide), HOME last."""
    home = Path(env.get("HOME") or Path.home())
    out = [(Path(env[var]) if env.get(var) else home / rel, rel) for var, rel in XDG_DIRS.items()]
    return [*out, (home, "")]


def seed_path(path: Path, env: dict[str, str]) -> Path:
    """Where `path` (absolute, or relative to the environment's HOME) goes inside a fresh home: the same place
    relative to HOME, or to the XDG directory that holds it. HomeCopyError when it does not exist or lies
    outside all of them."""
    home = Path(env.get("HOME") or Path.home())
    full = path if path.is_absolute() else home / path
    if not full.exists() and not full.is_symlink():
        raise HomeCopyError(f"--home-copy {path}: {full} does not exist")
    for base, rel in _bases(env):
        try:
            inside = full.relative_to(base)
        except ValueError:
            continue
        if inside.parts:
            return Path(rel) / inside
    raise HomeCopyError(f"--home-copy {path}: not inside HOME ({home}) or an XDG base directory")


def resolve_copies(paths: list[str], env: dict[str, str]) -> tuple[Path, ...]:
    """--home-copy's paths made absolute (relative ones against the environment's HOME), each checked now, so
    a mistyped one is a usage error before any agent starts."""
    home = Path(env.get("HOME") or Path.home())
    out = []
    for given in paths:
        path = Path(given).expanduser()
        full = path if path.is_absolute() else home / path
        seed_path(full, env)
        out.append(full)
    return tuple(out)


def group_env(config: RunConfig, env: dict[str, str], name: str) -> dict[str, str]:
    """`env` with HOME and the XDG base directories of a fresh home for the group `name` (made and seeded now);
    `env` itself when the run keeps the environment's HOME."""
    if config.homes is None:
        return env
    home = config.homes / name
    home.mkdir(parents=True, exist_ok=False)
    for source in config.home_copy:
        target = home / seed_path(source, config.env)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, target, symlinks=True)  # a link is copied as a link, never followed out
        else:
            shutil.copy2(source, target, follow_symlinks=False)
    out = dict(env) | {"HOME": str(home)}
    for var, rel in XDG_DIRS.items():
        (home / rel).mkdir(parents=True, exist_ok=True)
        out[var] = str(home / rel)
    return out
