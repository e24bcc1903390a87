"""Skills (docs/commands.md "Skills"): folders in the Agent Skills layout — a `SKILL.md` whose front matter names the
skill and says when to use it, and any files beside it — found in three places, in this order of precedence:

1. the project's `.ama/skills/` (source "project"),
2. the project's `.claude/skills/` (source "claude": the folders teams already keep for Claude Code),
3. the person's `skills/` in ama's config folder, `~/.config/ama/skills/` (source "person").

A name found twice is the first place's; the others are reported (once) and skipped. Only the names and
descriptions are read here, when a session opens: they go into the system prompt. A skill's body and files are
read when the model asks for them (shaping/skill_tool.py). Everything is text: nothing in a skill folder runs.

Every file is hostile input. A project's folder (and each skill folder and SKILL.md in it) must resolve inside
the project: a link out of it is refused, whatever the target. The person's folder is their own, as their
global AGENTS.md is: links there are followed. FIFOs, devices and sockets are refused without blocking
(`tools/regular.py`). A malformed SKILL.md is a `Problem` naming its file and line, and is skipped.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import msgspec

from ama_acp.tools.paths import inside
from ama_acp.tools.regular import read_regular

log = logging.getLogger(__name__)

Source = Literal["project", "claude", "person"]

SKILL_FILE = "SKILL.md"
MAX_SKILLS = 100  # skills in one session's system prompt, all places together
MAX_ENTRIES = 1_000  # entries of one skills folder looked at (a folder of a million entries must not slow an open)
NAME_CHARS = 64  # the Agent Skills specification's bounds
DESCRIPTION_CHARS = 1024
_HEAD_BYTES = 64 * 1024 + 4096  # enough of a SKILL.md for its front matter (at most 64 KiB; the body: on demand)
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# Where each source's folder lies: under the project, or under ama's config folder.
_PLACES: tuple[tuple[Source, str, bool], ...] = (
    ("project", os.path.join(".ama", "skills"), True),
    ("claude", os.path.join(".claude", "skills"), True),
    ("person", "skills", False),
)


class Skill(msgspec.Struct, frozen=True):
    """One skill as the system prompt lists it. `folder`: absolute, as found; `root_real`: the real path its files
    must resolve inside (the project's, for a project's skill; None for the person's own)."""

    name: str
    description: str
    folder: str
    source: Source
    root_real: str | None = None

    @property
    def path(self) -> str:
        return os.path.join(self.folder, SKILL_FILE)


class Problem(msgspec.Struct, frozen=True):
    """A skill that was skipped, and why: its file, the line when one is to blame, and what was wrong."""

    path: str
    message: str
    line: int | None = None

    def text(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Found:
    """The skills of a session (in the order the system prompt lists them) and what was skipped."""

    skills: tuple[Skill, ...] = ()
    problems: tuple[Problem, ...] = ()
    by_name: dict[str, Skill] = field(default_factory=dict, compare=False)

    def skill(self, name: str) -> Skill | None:
        return self.by_name.get(name)

    @cached_property
    def block(self) -> str:
        """What the system prompt carries of the skills ('' without any): read once, when the session opened."""
        return prompt_block(self.skills)


def load(cwd: str, config_dir: str | None) -> Found:
    """The skills found now for a project at `cwd` and the person whose config folder is `config_dir`; never raises."""
    root_real = os.path.realpath(cwd)
    skills: dict[str, Skill] = {}
    problems: list[Problem] = []
    for source, rel, in_project in _PLACES:
        base = cwd if in_project else config_dir
        if base is not None and not _place(
            os.path.join(base, rel), source, root_real if in_project else None, skills, problems
        ):
            break
    for p in problems:
        log.warning("skills: %s", p.text())
    ordered = tuple(sorted(skills.values(), key=lambda s: s.name))  # one order, whatever the file system's
    return Found(ordered, tuple(problems), skills)


def _place(
    folder: str, source: Source, root_real: str | None, skills: dict[str, Skill], problems: list[Problem]
) -> bool:
    """The skills of one place added to `skills` in the order of their folders' names (a name taken already is a
    problem); a place that is not there has none. False once a skill past MAX_SKILLS was found: stop looking."""
    try:
        os.lstat(folder)
    except (OSError, ValueError):
        return True  # the usual case: no such folder
    if root_real is not None and not inside(os.path.realpath(folder), root_real):
        problems.append(Problem(folder, "refused: it links outside the project"))
        return True
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_ENTRIES:
                    problems.append(Problem(folder, f"more than {MAX_ENTRIES} entries: the rest are not read"))
                    break
                names.append(entry.name)
    except OSError as exc:
        problems.append(Problem(folder, f"cannot be read: {exc.strerror or exc}"))
        return True
    for name in sorted(n for n in names if not n.startswith(".")):
        skill = _skill(os.path.join(folder, name), source, root_real, problems)
        if skill is None:
            continue
        first = skills.get(skill.name)
        if first is not None:
            problems.append(Problem(skill.path, f"skill `{skill.name}` is already defined by {first.path}"))
        elif len(skills) >= MAX_SKILLS:
            problems.append(Problem(skill.path, f"more than {MAX_SKILLS} skills: this one and later are skipped"))
            return False
        else:
            skills[skill.name] = skill
    return True


def _skill(folder: str, source: Source, root_real: str | None, problems: list[Problem]) -> Skill | None:
    # Only a session that has a skill pays for the YAML parser's import (~35 ms): most projects have none.
    from ama_acp.shaping.front_matter import FrontMatterError, split, text_field

    path = os.path.join(folder, SKILL_FILE)
    if not os.path.isdir(folder):
        return None  # a file beside the skill folders (a README): not a skill
    try:
        text = read_text(path, root_real, _HEAD_BYTES)
    except FileNotFoundError:
        return None  # a folder without SKILL.md: not a skill
    except OSError as exc:
        problems.append(Problem(path, f"refused: {exc.strerror or exc}"))
        return None
    try:
        meta = split(text).meta
        name = text_field(meta, "name", NAME_CHARS + 1) or os.path.basename(folder)
        description = text_field(meta, "description", DESCRIPTION_CHARS)
    except FrontMatterError as exc:
        problems.append(Problem(path, str(exc), exc.line))
        return None
    if len(name) > NAME_CHARS or not _NAME.fullmatch(name):
        why = "lowercase letters, digits and single hyphens, at most 64 characters"
        problems.append(Problem(path, f"the name {name[:80]!r} is not a skill name ({why})", _line_of(text, "name")))
        return None
    if not description:
        problems.append(Problem(path, "no `description`: the model could never tell when to use the skill", 1))
        return None
    return Skill(name, description, folder, source, root_real)


def _line_of(text: str, key: str) -> int:
    """The line (1-based) where the front matter sets `key`; 2 (its first) when no line does."""
    for n, line in enumerate(text.split("\n")[1:], start=2):
        if line.startswith(f"{key}:"):
            return n
        if line.rstrip("\r") in ("---", "..."):
            break
    return 2


def read_text(path: str, root_real: str | None, limit: int) -> str:
    """Up to `limit` bytes of the regular file at `path`, decoded (bad UTF-8 replaced); see `read_bytes`."""
    return read_bytes(path, root_real, limit).decode("utf-8", errors="replace")


def read_bytes(path: str, root_real: str | None, limit: int) -> bytes:
    """Up to `limit` bytes of the regular file at `path`. `root_real`: the real path it must resolve inside (None:
    anywhere). OSError for a link out of it, a FIFO or a device (never blocking)."""
    real = os.path.realpath(path)
    if root_real is not None and not inside(real, root_real):
        raise PermissionError(1, f"it links outside {root_real} (to {real})")
    return read_regular(real, limit)


# --- what the model reads ----------------------------------------------------------------------------------

PROMPT_HEADER = """# Skills
Skills are folders of instructions (and sometimes scripts, templates or reference files) for particular tasks. \
When a task matches a skill's description, call the `skill` tool with its name before you start: it returns the \
skill's instructions and lists the files beside them, which you read with the same tool (`file`). Nothing in a \
skill runs by itself: run one of its scripts with run_command only when its instructions call for it."""


def prompt_block(skills: tuple[Skill, ...]) -> str:
    """The system prompt's skills (empty without any): the header, then one line a skill."""
    if not skills:
        return ""
    return "\n" + PROMPT_HEADER + "\n\n" + "".join(f"- `{s.name}`: {s.description}\n" for s in skills)
