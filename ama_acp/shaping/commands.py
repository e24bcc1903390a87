"""Commands from files (docs/commands.md): one file's text → a `FileCommand`, and a command's prompt filled in.

Three formats, all read as hostile text: ama's own and Claude Code's Markdown (optional YAML front matter with
`description` and `argument-hint`; Claude's `allowed-tools`, `model` and any other field are ignored), and
Gemini CLI's TOML (`description`, `prompt`). Nothing in a command runs or is read: a Claude `!`-line or `@file`
and a Gemini `!{…}` or `@{…}` reach the model as the text they are. Protocol-free: the session offers them
(session/file_commands.py).
"""

from __future__ import annotations

import re
import tomllib
from typing import Literal

import msgspec

from ama_acp.errors import ConfigError
from ama_acp.shaping.front_matter import Document, FrontMatterError, split, text_field
from ama_acp.textsafe import one_line

Source = Literal["built-in", "project", "person"]
Format = Literal["ama", "claude", "gemini"]

BODY_CHARS = 64 * 1024  # a command's prompt, in characters: past it, cut with a marker
DESCRIPTION_CHARS = 300
HINT_CHARS = 200
# One segment of a name (`git:commit` has two): what an editor's `/` menu and a person's typing both take.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_DOLLAR = re.compile(r"\$(ARGUMENTS|[1-9](?!\d))")
_BRACES = "{{args}}"
_TOML_LINE = re.compile(r"line (\d+)")
_PLAIN = re.compile(r"([A-Za-z][A-Za-z0-9_-]*):[ \t]*(.*)")


class CommandFileError(ConfigError):
    """A command file ama cannot read as a command; `line` is the file's line (1-based) where it went wrong."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class FileCommand(msgspec.Struct, frozen=True):
    """One command: its `/name`, what the editor shows, and the prompt it sends."""

    name: str
    description: str
    hint: str | None  # the editor's input hint; None: the command takes no input
    body: str
    source: Source
    shown: str  # where it came from, as a person reads it (relative to the workspace, or the person's path)
    format: Format


def command_name(parts: tuple[str, ...]) -> str | None:
    """The name of a file at `parts` (its folders below the commands folder, then its file name without the
    extension): `git/commit.toml` → `git:commit`, as Gemini CLI names them. None when a part is not a name."""
    if not parts or not all(_SEGMENT.fullmatch(p) for p in parts):
        return None
    return ":".join(parts)


def parse(text: str, name: str, source: Source, shown: str, fmt: Format) -> FileCommand:
    """One command file's text as a command; CommandFileError (with the line) when it is not one."""
    text = text.removeprefix("\ufeff")
    if fmt == "gemini":
        description, hint, body = _toml(text)
    else:
        description, hint, body = _markdown(text)
    if not body.strip():
        raise CommandFileError("the command's prompt is empty", 1)
    body = _cut(body)
    if hint is None and uses_arguments(body, fmt):
        hint = "arguments"
    # What the editor shows on one line: controls made visible (the prompt itself is the model's, kept as written).
    description = one_line(description or _first_line(body))
    return FileCommand(name, description, one_line(hint) if hint else None, body, source, shown, fmt)


def _markdown(text: str) -> tuple[str | None, str | None, str]:
    try:
        try:
            doc = split(text)
        except FrontMatterError as exc:
            doc = _plain_fields(text, exc)
        description = text_field(doc.meta, "description", DESCRIPTION_CHARS)
        hint = _hint(doc.meta, text)
    except FrontMatterError as exc:
        raise CommandFileError(str(exc), exc.line) from None
    return description, hint, doc.body.strip("\n")


def _plain_fields(text: str, error: FrontMatterError) -> Document:
    """Claude Code reads its front matter line by line, so its documented `argument-hint: [pr] [priority]` is
    not YAML: a front matter whose every line is `name: text` at the margin is taken as written; anything else
    is the YAML error."""
    lines = text.split("\n")
    end = next((n for n, ln in enumerate(lines[1:], start=1) if ln.rstrip("\r") in ("---", "...")), None)
    if lines[0].rstrip("\r") != "---" or end is None:
        raise error
    meta: dict[str, object] = {}
    for line in lines[1:end]:
        if not line.strip() or line.startswith("#"):
            continue
        found = _PLAIN.fullmatch(line.rstrip("\r"))
        if found is None:
            raise error
        meta[found[1]] = found[2]
    return Document(meta, "\n".join(lines[end + 1 :]), end + 2)


def _hint(meta: dict[str, object], text: str) -> str | None:
    """`argument-hint`: Claude's own files write `[message]`, which YAML reads as a list: then the line as written."""
    value = meta.get("argument-hint")
    if isinstance(value, list):
        for line in text.split("\n")[1:]:
            if line.startswith("argument-hint:"):
                return " ".join(line.partition(":")[2].split())[:HINT_CHARS] or None
    return text_field(meta, "argument-hint", HINT_CHARS) or None


def _toml(text: str) -> tuple[str | None, str | None, str]:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        raise CommandFileError(f"malformed TOML: {str(exc).split(' (at ')[0]}", int(found[1]) if found else 1) from None
    except RecursionError:
        raise CommandFileError("malformed TOML: nested too deep", 1) from None
    prompt = raw.get("prompt")
    if not isinstance(prompt, str):
        what = "missing" if prompt is None else f"{type(prompt).__name__}, not text"
        raise CommandFileError(f'`prompt` is {what}: a Gemini command needs `prompt = "…"`', _line_of(text, "prompt"))
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise CommandFileError("`description` must be text", _line_of(text, "description"))
    if description is not None:
        description = " ".join(description.split())[:DESCRIPTION_CHARS]
    return description, None, prompt.strip("\n")


def _line_of(text: str, key: str) -> int:
    for n, line in enumerate(text.split("\n"), start=1):
        if line.lstrip().startswith(key):
            return n
    return 1


def _first_line(body: str) -> str:
    """The description of a command without one: its prompt's first line, as Claude Code shows it."""
    line = next((ln.strip() for ln in body.split("\n") if ln.strip()), "")
    line = " ".join(line.lstrip("#").split())
    return line if len(line) <= 100 else line[:99] + "…"


def _cut(body: str) -> str:
    if len(body) <= BODY_CHARS:
        return body
    return (
        body[:BODY_CHARS] + f"\n[ama cut this command here: at most {BODY_CHARS:,} characters of its prompt are sent.]"
    )


def uses_arguments(body: str, fmt: Format) -> bool:
    return _BRACES in body if fmt == "gemini" else _DOLLAR.search(body) is not None


def expand(command: FileCommand, line: str) -> str:
    """The prompt `command` sends when run with the argument line `line` (what follows `/name `).

    Markdown (ama's, Claude's): `$ARGUMENTS` is the whole line, `$1`…`$9` its words as a POSIX shell would split
    them (quotes group, backslashes escape; nothing is expanded or run), an unbalanced quote falling back to
    splitting at whitespace; a missing word is empty, and `$10` is left as written. Gemini: `{{args}}` is the whole
    line. Each placeholder is filled in once, so an argument that itself reads `$1` stays as typed. A prompt
    without any placeholder gets a non-empty line after a blank line (as Gemini CLI does)."""
    line = line.strip()
    body = command.body
    if command.format == "gemini":
        if _BRACES in body:
            return line.join(body.split(_BRACES))
    elif _DOLLAR.search(body):
        words = _words(line)

        def fill(m: re.Match[str]) -> str:
            key = m.group(1)
            if key == "ARGUMENTS":
                return line
            n = int(key)
            return words[n - 1] if n <= len(words) else ""

        return _DOLLAR.sub(fill, body)
    return body + "\n\n" + line if line else body


def _words(line: str) -> list[str]:
    import shlex  # a command run with arguments only: not on a session's open

    try:
        return shlex.split(line, comments=False, posix=True)
    except ValueError:  # an unbalanced quote: a shell would wait for more; the person meant words
        return line.split()
