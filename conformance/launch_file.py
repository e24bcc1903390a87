"""The launch file of the published record (conformance/agents.toml): how each public agent is started for a
suite run, read and checked here for `python -m ama_conformance.record`.

Each `[[agent]]` table says how an editor starts the agent speaking ACP on stdio (`command`), how to install it
(`install`, shown in docs/conformance.md), and how its model is pointed at the suite's scripted model
(`model_env`, the `--model-env` pairs) — or, in `model_note`, why it cannot be and what it runs with instead.
`env` and `home_copy` are passed as `--env` and `--home-copy`, `args` as more suite options; `version_command`
prints the agent's version when its `initialize` answer names none; `skip` names a reason the record does not
run it at all. Anything else in the file is an error: a misspelt key must not silently drop a setting.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LAUNCH_FILE = Path(__file__).resolve().with_name("agents.toml")
KEYS = {
    "name",
    "command",
    "install",
    "model_env",
    "model_note",
    "env",
    "home_copy",
    "args",
    "version_command",
    "skip",
}


class LaunchFileError(ValueError):
    """The launch file cannot be used as it is (what is wrong, and where)."""


@dataclass(frozen=True)
class PublicAgent:
    name: str  # the table's first column, and what --only names
    command: tuple[str, ...]  # how an editor starts it speaking ACP on stdio; command[0] is looked up on PATH
    suite_args: tuple[str, ...] = ()  # more options for its run (-k, timeouts)
    model_env: tuple[tuple[str, str], ...] = ()  # --model-env NAME=TEMPLATE: its model pointed at the suite's
    model_note: str = ""  # why its model is not the suite's, when model_env is empty
    env: tuple[tuple[str, str], ...] = ()  # --env NAME=VALUE
    home_copy: tuple[str, ...] = ()  # --home-copy PATH: what its fresh homes are seeded with (its sign-in)
    install: str = ""  # the command that installs it
    version_command: tuple[str, ...] = ()  # prints its version, when agentInfo names none
    skip: str = ""  # why the record does not run it, if it does not

    def suite_argv(self, found: str) -> list[str]:
        """The suite's command line for this agent, `found` being command[0] as found on PATH."""
        argv = ["--env-clean"]
        for flag, pairs in (("--env", self.env), ("--model-env", self.model_env)):
            for name, value in pairs:
                argv += [flag, f"{name}={value}"]
        for path in self.home_copy:
            argv += ["--home-copy", path]
        return [*argv, *self.suite_args, "--", found, *self.command[1:]]

    @property
    def model(self) -> str:
        """Which model the agent ran with, as the table says it (why, when not the suite's: `model_note`)."""
        if self.skip:
            return "—"
        return "the suite's scripted model" if self.model_env else "its own"


def _strings(entry: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LaunchFileError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _pairs(entry: dict[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise LaunchFileError(f"{where}: {key} must be a table of strings")
    return tuple(sorted(value.items()))  # sorted: the argv, and so the run, never depends on the file's order


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise LaunchFileError(f"{where}: {key} must be a string")
    return value


def parse(text: str, source: str = "agents.toml") -> tuple[PublicAgent, ...]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LaunchFileError(f"{source}: {exc}") from exc
    entries = data.get("agent")
    if set(data) - {"agent"} or not isinstance(entries, list) or not entries:
        raise LaunchFileError(f"{source}: expected [[agent]] tables and nothing else")
    agents: list[PublicAgent] = []
    for at, entry in enumerate(entries, 1):
        where = f"{source}: agent {at}"
        unknown = sorted(set(entry) - KEYS)
        if unknown:
            raise LaunchFileError(f"{where}: unknown keys {unknown} (known: {sorted(KEYS)})")
        name, command = _text(entry, "name", where), _strings(entry, "command", where)
        if not name or not command:
            raise LaunchFileError(f"{where}: name and command are required")
        if any(a.name == name for a in agents):
            raise LaunchFileError(f"{where}: a second agent named {name!r}")
        agents.append(
            PublicAgent(
                name,
                command,
                suite_args=_strings(entry, "args", where),
                model_env=_pairs(entry, "model_env", where),
                model_note=_text(entry, "model_note", where),
                env=_pairs(entry, "env", where),
                home_copy=_strings(entry, "home_copy", where),
                install=_text(entry, "install", where),
                version_command=_strings(entry, "version_command", where),
                skip=_text(entry, "skip", where),
            )
        )
    return tuple(agents)


def load(path: Path = LAUNCH_FILE) -> tuple[PublicAgent, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LaunchFileError(f"{path}: {exc.strerror or exc}") from exc
    return parse(text, str(path))
