"""The `skill` tool: a skill's instructions and files enter the context only when the model asks for them.

`skill(name)` returns the body of the skill's SKILL.md (its front matter left out: the system prompt has it), cut
at BODY_BYTES with a marker, and the list of the files beside it; `skill(name, file)` returns one of those files.
It reads only inside the folder of a skill the session listed, so it asks no permission (kind "read"), also for
the person's own skills outside the project, where read_file would ask. A link is never followed while listing,
and a file is read only when its real path lies inside the skill's folder (and, for a project's skill, inside the
project); FIFOs and devices are refused without blocking (shaping/skills.py `read_bytes`). Nothing is run: a script
beside SKILL.md is listed, and the model may run it with run_command like any command, under the same permission
and sandbox.
"""

from __future__ import annotations

import os
import stat
from typing import NotRequired, TypedDict

from ama_acp.shaping.skills import SKILL_FILE, Found, Skill, read_bytes
from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import closed_object, validate
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import inside

NAME = "skill"
BODY_BYTES = 256 * 1024  # of SKILL.md, or of one file beside it, in one result
MAX_LISTED = 200  # files beside SKILL.md listed in one result
MAX_VISITED = 2_000  # entries looked at while listing (a deep or huge folder ends the walk, said so)
MAX_DEPTH = 4  # folders below the skill's own that are listed


class SkillArgs(TypedDict):
    name: str
    file: NotRequired[str]


class SkillTool:
    name = NAME
    kind: ToolKind = "read"
    description = (
        "Load a skill listed in the system prompt: `name` alone returns its instructions (SKILL.md) and the list "
        "of files beside them; `name` with `file` (a path from that list) returns that file. Call it when the "
        "task matches the skill's description, before you start."
    )
    parameters: JSONObject = closed_object(
        {
            "name": {"type": "string", "description": "The skill's name, as the system prompt lists it."},
            "file": {
                "type": "string",
                "description": "A file beside SKILL.md, relative to the skill's folder (as the list shows it).",
            },
        },
        "name",
    )

    def __init__(self, found: Found) -> None:
        self._found = found

    def title(self, args: ToolArgs) -> str:
        name, file = args.get("name"), args.get("file")
        what = f"skill {name}" if isinstance(name, str) else "skill"
        return f"Read {what}: {file}" if isinstance(file, str) and file else f"Load {what}"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []  # a location outside the project would make the approval ask; the skill's folder is known

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, SkillArgs)
        skill = self._found.skill(checked["name"])
        if skill is None:
            names = ", ".join(s.name for s in self._found.skills) or "none"
            raise ToolError(f"There is no skill {checked['name'][:100]!r}. The skills of this session: {names}.")
        file = checked.get("file")
        return ToolResult(text=read_beside(skill, file) if file else instructions(skill))


def instructions(skill: Skill) -> str:
    """The skill's SKILL.md without its front matter, then the files beside it."""
    from ama_acp.shaping.front_matter import FrontMatterError, split  # see skills.py `_skill`

    try:
        data = read_bytes(skill.path, skill.root_real, BODY_BYTES + 1)
    except OSError as exc:
        raise ToolError(f"The skill {skill.name}'s {SKILL_FILE} cannot be read: {exc.strerror or exc}") from None
    text = _decoded(data)
    try:
        body = split(text).body
    except FrontMatterError:  # changed since the session opened: show it whole rather than nothing
        body = text
    body = body.strip("\n") + (_MARKER if len(data) > BODY_BYTES else "")
    files = list_files(skill.folder)
    listed = "\n".join(f"- {f}" for f in files) if files else "(none)"
    return (
        f'<skill name="{skill.name}" folder="{skill.folder}">\n{body}\n</skill>\n\n'
        f'Files beside {SKILL_FILE} (read one with skill(name="{skill.name}", file=...); run a script with '
        f"run_command from the folder above only when the instructions call for it):\n{listed}\n"
    )


def read_beside(skill: Skill, file: str) -> str:
    """One file of the skill's folder, by its path relative to the folder; refused outside it."""
    rel = os.path.normpath(file)
    if os.path.isabs(file) or rel == os.curdir or rel.split(os.sep)[0] == os.pardir or "\0" in file:
        raise ToolError(f"`file` must be a path inside the skill's folder, as its list shows it, not {file[:200]!r}.")
    folder_real = os.path.realpath(skill.folder)
    path = os.path.join(skill.folder, rel)
    real = os.path.realpath(path)
    if not inside(real, folder_real) or (skill.root_real is not None and not inside(real, skill.root_real)):
        raise ToolError(f"{rel} is refused: it links outside the skill's folder.")
    try:
        data = read_bytes(real, None, BODY_BYTES + 1)
    except IsADirectoryError:
        raise ToolError(f"{rel} is a folder; the list of the skill's files names the files in it.") from None
    except OSError as exc:
        raise ToolError(f"{rel} cannot be read: {exc.strerror or exc}") from None
    if b"\0" in data:
        return f"{rel} is a binary file; it is not shown."
    return _decoded(data) + (_MARKER if len(data) > BODY_BYTES else "")


_MARKER = f"\n[ama cut this file here: only its first {BODY_BYTES // 1024} KiB are shown.]"


def _decoded(data: bytes) -> str:
    """At most BODY_BYTES of `data` as text: a character the cut splits is dropped, bad UTF-8 replaced."""
    kept = data[:BODY_BYTES]
    if len(data) > BODY_BYTES:
        kept = kept[: len(kept) - _partial_tail(kept)]
    return kept.decode("utf-8", errors="replace")


def _partial_tail(data: bytes) -> int:
    """How many bytes at the end of `data` begin a UTF-8 character they do not finish (0: none)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # the last character's first byte: how long it says the character is
            need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
            return back if need > back else 0
    return 0


def list_files(folder: str) -> list[str]:
    """The files under `folder` but SKILL.md, relative and sorted, bounded; links are listed, never followed."""
    out: list[str] = []
    visited = 0
    pending = [("", folder, 0)]
    more = False
    while pending and not more:
        rel_dir, path, depth = pending.pop()
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            visited += 1
            if visited > MAX_VISITED or len(out) >= MAX_LISTED:
                more = True
                break
            rel = f"{rel_dir}{e.name}"
            try:
                mode = e.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                more = more or depth >= MAX_DEPTH
                if depth < MAX_DEPTH:
                    pending.append((rel + "/", e.path, depth + 1))
            elif stat.S_ISLNK(mode):
                out.append(f"{rel} (a link)")
            elif stat.S_ISREG(mode) and rel != SKILL_FILE:
                out.append(rel)
    out.sort()
    if more:
        out.append(f"… more files not listed (at most {MAX_LISTED}, {MAX_DEPTH} folders deep)")
    return out
