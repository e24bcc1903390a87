"""`[[hooks]]` in the person's config: their own programs, run at five points of a session (docs/commands.md
"Hooks"). Read from the config file only: no repository, project folder or `.claude/settings.json` can add one,
since a hook runs as the person, outside the sandbox.

Each entry is decoded whole or not at all: a malformed one is a `HookError` naming what is wrong, which
`config_hooks` reports with the file and the line of its `[[hooks]]` header and leaves out; the others apply.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ama_acp import ownfiles
from ama_acp.config import MAX_CONFIG_BYTES, Config
from ama_acp.errors import ConfigError
from ama_acp.tools.search.globs import GlobError, glob_regex

log = logging.getLogger(__name__)

EVENTS = ("pre_tool", "post_tool", "prompt_submit", "session_start", "stop")
TOOL_EVENTS = ("pre_tool", "post_tool")
KEYS = ("event", "match", "command", "timeout")
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 600.0  # seconds: a hook holds up a tool call or a prompt, so it may not hold it up for long
MAX_HOOKS = 100
MAX_ARGV = 256
MAX_COMMAND_CHARS = 16_384
MAX_MATCH_CHARS = 256
# A `[[hooks]]` header line (tomllib keeps no positions): the Nth is the Nth entry when they are all written so.
_HEADER = re.compile(r"\s*\[\[\s*(?:hooks|\"hooks\"|'hooks')\s*\]\]\s*(?:#.*)?$")
_REPORTED: set[str] = set()  # a process says each problem once, not once a session


class HookError(ConfigError):
    """A `[[hooks]]` entry that is not a hook; the message says which key is wrong and why."""


@dataclass(frozen=True)
class Hook:
    """One hook: when it runs (`event`, and for a tool event the tool names it `match`es), what it runs (a
    string for `/bin/sh -c`, or a program and its arguments), for how long at most, and where it was written."""

    event: str
    command: str | tuple[str, ...]
    match: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    where: str = "config"

    def matches(self, tool: str) -> bool:
        # Checked when decoded: the glob compiles (RE2, linear time in the name).
        return self.match is None or glob_regex(self.match).fullmatch(tool)

    @property
    def label(self) -> str:
        """The hook as the person wrote it, short enough for a line."""
        text = self.command if isinstance(self.command, str) else " ".join(self.command)
        text = " ".join(text.split())
        return text if len(text) <= 60 else text[:59] + "…"


def decode(entry: object, where: str = "config") -> Hook:
    """One `[[hooks]]` table as a Hook. Raises HookError, and nothing else, whatever `entry` is."""
    if not isinstance(entry, dict):
        raise HookError(f"a hook is a table of {', '.join(KEYS)}, not {type(entry).__name__}")
    unknown = [k for k in entry if k not in KEYS]
    if unknown:
        raise HookError(f"has no setting {_shown(unknown[0])} (only {', '.join(KEYS)})")
    event = entry.get("event")
    if event not in EVENTS:
        raise HookError(f"event must be one of {', '.join(EVENTS)}, not {_shown(event)}")
    assert isinstance(event, str)
    return Hook(event, _command(entry.get("command")), _match(entry.get("match"), event), _timeout(entry), where)


def _command(value: object) -> str | tuple[str, ...]:
    if isinstance(value, str):
        if not value.strip() or len(value) > MAX_COMMAND_CHARS or "\0" in value:
            raise HookError(f"command must be a shell line of 1–{MAX_COMMAND_CHARS:,} characters without NUL")
        return value
    if isinstance(value, list) and 1 <= len(value) <= MAX_ARGV:
        if all(isinstance(a, str) and len(a) <= MAX_COMMAND_CHARS and "\0" not in a for a in value) and value[0]:
            return tuple(value)
    raise HookError(
        f"command must be a shell line (a string) or a program and its arguments (a list of 1–{MAX_ARGV} "
        f"strings, the first not empty), not {_shown(value)}"
    )


def _match(value: object, event: str) -> str | None:
    if value is None:
        return None
    if event not in TOOL_EVENTS:
        raise HookError(f"match is for the tool events ({', '.join(TOOL_EVENTS)}), not {event}")
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_MATCH_CHARS or not value.isprintable():
        raise HookError(f"match must be a glob of tool names, 1–{MAX_MATCH_CHARS} printable characters")
    try:
        glob_regex(value)
    except GlobError as exc:
        raise HookError(f"match: {exc}") from None
    return value


def _timeout(entry: dict[object, object]) -> float:
    value = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT:
        raise HookError(f"timeout must be a number of seconds, above 0 and at most {MAX_TIMEOUT:g}")
    return float(value)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


@dataclass
class Loaded:
    hooks: list[Hook] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def config_hooks(cfg: Config) -> Loaded:
    """The config's hooks, each malformed entry left out and reported with its line (the file is read again
    only to find lines, as for `[permissions]`): worked out once for the config the process runs with, not again
    at each session's open."""
    global _last
    if _last is None or _last[0] is not cfg:
        _last = (cfg, _decoded(cfg))
    loaded = _last[1]
    return Loaded(list(loaded.hooks), list(loaded.problems))


_last: tuple[Config, Loaded] | None = None  # the config of the last call, and its hooks


def _decoded(cfg: Config) -> Loaded:
    loaded = Loaded()
    entries = cfg.hooks
    if not entries:
        return loaded
    path = cfg.config_path or "config"
    lines = _header_lines(cfg.config_path, len(entries)) if cfg.config_path else None
    origin = os.path.basename(cfg.config_path) or "config"
    for i, entry in enumerate(entries):
        if i >= MAX_HOOKS:
            loaded.problems.append(f"{path}: more than {MAX_HOOKS} hooks; the rest are ignored")
            break
        at = f"line {lines[i]}" if lines is not None else f"hooks[{i}]"
        try:
            loaded.hooks.append(decode(entry, f"{origin} {at}"))
        except HookError as exc:
            loaded.problems.append(f"{path} ({at}): the hook is ignored: {exc}")
    return loaded


def _header_lines(path: str, count: int) -> list[int] | None:
    """The line of each `[[hooks]]` header, when there is one for each entry (not an inline array)."""
    try:
        data = ownfiles.read_named(Path(path), MAX_CONFIG_BYTES)  # the file was read whole once already
    except OSError:
        return None
    text = data.decode("utf-8", "replace")
    found = [n for n, line in enumerate(text.split("\n"), 1) if _HEADER.match(line)]
    return found if len(found) == count else None


def report(problems: list[str]) -> None:
    """Each problem logged once a process (the log is the editor's agent log, and ama -p's stderr)."""
    for problem in problems:
        if problem not in _REPORTED:
            _REPORTED.add(problem)
            log.warning("hooks: %s", problem)
