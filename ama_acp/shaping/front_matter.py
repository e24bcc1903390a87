"""A Markdown file's YAML front matter, read as hostile input: the files that shape ama (project commands, skills)
come from a repository a stranger may write.

The front matter is the text between a first line `---` and the next line `---` (or `...`). It is parsed with
PyYAML's safe loader (no Python objects, no tags that run code) and three bounds more: at most `MAX_BYTES` of it,
no aliases (an alias bomb is linear for the loader and exponential for whatever walks the result), and a mapping
at the top. Anything else is a `FrontMatterError` naming the line, which the caller reports with the file and skips.

PyYAML (~13 ms to import) is imported by the first `parse`, never by importing this module: a session opens and
answers its first prompt without it unless a file it reads has front matter (issue 41's cold first answer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ama_acp.errors import ConfigError

if TYPE_CHECKING:
    from yaml import SafeLoader

MAX_BYTES = 64 * 1024
# Flow collections (`[`, `{`) nested deeper than this are refused before parsing: PyYAML's pure-Python scanner
# takes time quadratic in the depth (30,000 levels: 47 s), libyaml stops at 1,000. Counted without regard to
# quotes, so a quoted run of brackets counts too: no front matter a person writes comes near it.
MAX_NESTING = 64
_FENCE = "---"
_ENDS = ("---", "...")


class FrontMatterError(ConfigError):
    """The front matter is not what ama reads; `line` is the file's line (1-based) where it went wrong."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class Document(msgspec.Struct, frozen=True):
    """A file split: its front matter (empty when it has none) and its body, and the body's first line (1-based)."""

    meta: dict[str, object]
    body: str
    body_line: int


def split(text: str) -> Document:
    """`text` split into front matter and body; a file without a `---` first line is all body."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != _FENCE:
        return Document({}, text, 1)
    for n, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r") in _ENDS:
            return Document(parse("\n".join(lines[1:n])), "\n".join(lines[n + 1 :]), n + 2)
    raise FrontMatterError("the front matter opened by `---` on line 1 is never closed", 1)


def parse(source: str) -> dict[str, object]:
    """The front matter's text (without its fences) as a mapping of string keys."""
    if len(source.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise FrontMatterError(f"the front matter is longer than {MAX_BYTES // 1024} KiB", 2)
    if (depth := _flow_depth(source)) > MAX_NESTING:
        raise FrontMatterError(f"malformed YAML: nested {depth} levels deep (at most {MAX_NESTING})", 2)
    import yaml

    loader = _loader()
    try:
        for event in yaml.parse(source, Loader=loader):
            if isinstance(event, yaml.AliasEvent):  # each would be a shared node the result's reader walks again
                mark = event.start_mark
                raise FrontMatterError("malformed YAML: aliases are not allowed", mark.line + 2 if mark else 2)
        value = yaml.load(source, Loader=loader)  # a safe loader: builds no objects, runs no tags
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else 2  # +1: 1-based, +1: the opening fence
        raise FrontMatterError(f"malformed YAML: {exc.problem or exc.context}", line) from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise FrontMatterError(f"malformed YAML: {type(exc).__name__}", 2) from None
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise FrontMatterError("the front matter must be a mapping of names to values", 2)
    return value


def _loader() -> type[SafeLoader]:
    """libyaml's parser where the wheel has it (a C loop, ten times faster); the pure-Python one otherwise."""
    import yaml

    loader: type[SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def _flow_depth(source: str) -> int:
    """The deepest run of unclosed `[` and `{`, in one pass."""
    depth = deepest = 0
    for char in source:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}" and depth:
            depth -= 1
    return deepest


def text_field(meta: dict[str, object], name: str, limit: int = 1024) -> str | None:
    """A field that must be text (a number or boolean written bare counts as its text), cut at `limit`
    characters with a marker; None when absent. Any other value is a FrontMatterError."""
    value = meta.get(name)
    if value is None:
        return None
    if isinstance(value, bool | int | float):
        value = str(value).lower() if isinstance(value, bool) else str(value)
    if not isinstance(value, str):
        raise FrontMatterError(f"`{name}` must be text, not {type(value).__name__}", 2)
    value = " ".join(value.split())
    return value if len(value) <= limit else value[:limit] + f"… [+{len(value) - limit} chars]"
