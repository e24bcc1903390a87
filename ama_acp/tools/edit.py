"""edit_file: exact string replacements in one file, all of them or none."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import NotRequired, TypedDict

import msgspec

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.common import (
    FILE_PATH_PARAM,
    arg_str,
    closed_object,
    diff_too_big,
    file_to_change,
    first_changed_line,
    make_diff,
    missing_file_error,
    os_errors_as_tool_errors,
    path_locations,
    plural,
    validate,
)
from ama_acp.tools.context import ToolContext
from ama_acp.tools.workspace import BinaryFileError

_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t")
# difflib over a huge file would take seconds; the hint is a courtesy, not worth that.
_HINT_MAX_LINES = 20_000


class Edit(TypedDict):
    old_text: str
    new_text: str
    replace_all: NotRequired[bool]  # filled in (False) by the check


class EditArgs(TypedDict):
    path: str
    edits: list[Edit]


class EditTool:
    name = "edit_file"
    kind: ToolKind = "edit"
    description = (
        "Edit an existing file by exact string replacement. Each edit replaces `old_text` with `new_text`; "
        "`old_text` must match the file exactly (whitespace and indentation included, without read_file's line "
        "numbers) and occur exactly once, unless `replace_all` is true. Include enough surrounding lines to make "
        "it unique. Several edits in one call are applied in order, each to the result of the previous one, and "
        "the file changes only if all of them apply. Read the file first. To create a file use write_file."
    )
    parameters: JSONObject = closed_object(
        {
            "path": FILE_PATH_PARAM,
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "Replacements, applied in order.",
                "items": closed_object(
                    {
                        "old_text": {"type": "string", "description": "Exact text to replace."},
                        "new_text": {"type": "string", "description": "The replacement."},
                        "replace_all": {
                            "type": "boolean",
                            "description": "Replace every occurrence instead of requiring exactly one.",
                            "default": False,
                        },
                    },
                    "old_text",
                    "new_text",
                ),
            },
        },
        "path",
        "edits",
    )

    def title(self, args: ToolArgs) -> str:
        return f"Edit {arg_str(args, 'path', 'file')}"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return path_locations(args, cwd)

    @os_errors_as_tool_errors
    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        checked = validate(self.parameters, args, EditArgs)
        target = await file_to_change(ctx, checked["path"], "edited")
        path, shown = target.path, target.shown
        try:
            original = await ctx.workspace.read_text(path)
        except FileNotFoundError:
            raise await missing_file_error(
                ctx.workspace, path, ctx.cwd, "To create a new file use write_file."
            ) from None
        except BinaryFileError:
            raise ToolError(f"{shown} is a binary file; edit_file works on text files only.") from None

        new, replacements = apply_edits(original, checked["edits"], shown)
        count = len(checked["edits"])
        if new == original:
            return ToolResult(text=f"The edits left {shown} unchanged.", locations=[Location(path)])
        await ctx.workspace.write_text(path, new)

        line = first_changed_line(original, new)
        text = f"Edited {shown}: {plural(count, 'edit')} applied"
        if replacements != count:
            text += f" ({replacements} replacements)"
        text += f"; the first change is at line {line}."
        if diff_too_big(original, new):
            text += " (No diff shown: the file is larger than 256 KiB.)"
        return ToolResult(text=text, diffs=make_diff(path, original, new), locations=[Location(path, line)])


def apply_edits(original: str, edits: Sequence[Edit], shown: str) -> tuple[str, int]:
    """Apply the edits in memory; returns the new text and the number of replacements, or raises ToolError
    and nothing is written. `edits` are checked ones (`validate`), in the tool and in an approval's preview."""
    # A CRLF file meets model text written with "\n": match on "\n" and put the CRLFs back afterwards.
    # Only when the file is consistently CRLF, so a mixed file keeps its bytes.
    crlf = "\r\n" in original and original.count("\r\n") == original.count("\n")
    text = original.replace("\r\n", "\n") if crlf else original
    base = text
    replacements = 0
    many = len(edits) > 1
    for i, edit in enumerate(edits, start=1):
        label = f"Edit {i}: " if many else ""
        old, new = edit["old_text"], edit["new_text"]
        if crlf:
            old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        replace_all = edit.get("replace_all", False)
        found = _occurrences(text, old, new, replace_all, _Where(label, shown, base, i))
        if replace_all:
            text = text.replace(old, new)
            replacements += found
        else:
            text = text.replace(old, new, 1)
            replacements += 1
    if crlf:
        text = text.replace("\n", "\r\n")
    return text, replacements


class _Where(msgspec.Struct, frozen=True):
    """Which edit of a call a refusal is about, and what it needs to say why."""

    label: str  # "Edit 2: ", or "" when the call has one edit
    shown: str  # the file as the model knows it
    base: str  # the text before the call's first edit
    index: int  # 1-based


def _occurrences(text: str, old: str, new: str, replace_all: bool, where: _Where) -> int:
    """How often `old` occurs in `text`; raises a ToolError when the edit cannot apply as asked."""
    label = where.label
    if not old:
        raise ToolError(f"{label}old_text is empty. To create or overwrite a whole file use write_file.")
    if old == new:
        raise ToolError(f"{label}old_text and new_text are the same; nothing would change.")
    found = text.count(old)
    if found == 0:
        hint = _not_found_hint(old, text, where.base, where.index)
        raise ToolError(f"{label}old_text was not found in {where.shown}. " + hint)
    if found > 1 and not replace_all:
        lines = _match_lines(text, old)
        at = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        raise ToolError(
            f"{label}old_text occurs {found} times in {where.shown} (at lines {at}). Include more surrounding "
            "lines to make it unique, or set replace_all to true to replace every occurrence."
        )
    return found


def _match_lines(text: str, needle: str) -> list[int]:
    lines: list[int] = []
    start = text.find(needle)
    while start != -1:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + len(needle))
    return lines


def _not_found_hint(old: str, text: str, base: str, index: int) -> str:
    old_lines = old.split("\n")
    if all(_LINE_NUMBER_PREFIX.match(line) for line in old_lines if line.strip()):
        return "It seems to include the line numbers from read_file; leave them out."
    if index > 1 and old in base:
        return "It matched the file before an earlier edit in this call changed that part."
    file_lines = text.split("\n")
    loose = _loose_match(old_lines, file_lines)
    if loose:
        return (
            f"Ignoring indentation and trailing spaces it matches at line {loose}: copy the exact whitespace "
            "(tabs or spaces) from read_file."
        )
    return _closest_line(old_lines, file_lines) or "Read the file again to see its current content."


def _closest_line(old_lines: list[str], file_lines: list[str]) -> str | None:
    """A hint naming the file's line closest to the first line of `old_lines`, if one is close enough."""
    first = next((line.strip() for line in old_lines if line.strip()), "")
    if not first or len(file_lines) > _HINT_MAX_LINES:
        return None
    stripped = [line.strip() for line in file_lines]
    close = difflib.get_close_matches(first, stripped, n=1, cutoff=0.6)
    if not close:
        return None
    n = stripped.index(close[0]) + 1
    return f"The closest line is {n}: `{file_lines[n - 1].strip()[:200]}`. Read the file again and retry."


def _loose_match(old_lines: list[str], file_lines: list[str]) -> int | None:
    """The line where `old_lines` match with whitespace at line ends ignored, if they do."""
    want = _without_blank_ends([line.strip() for line in old_lines])
    if not want:
        return None
    have = [line.strip() for line in file_lines]
    for i in range(len(have) - len(want) + 1):
        if have[i] == want[0] and have[i : i + len(want)] == want:
            return i + 1
    return None


def _without_blank_ends(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start]:
        start += 1
    while end > start and not lines[end - 1]:
        end -= 1
    return lines[start:end]
