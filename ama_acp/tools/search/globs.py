"""Glob patterns as RE2 regexes: matching takes time linear in the path, whatever the pattern.

A pattern comes from the model (find_files, search's `glob`) or from a .gitignore in the project, so it is
hostile: Python's backtracking `re` on a translation of `**/**/**/…` or `*a*a*a*…` can run for hours while
holding the GIL. RE2 cannot backtrack, so no pattern can do that.

Syntax over '/'-separated relative paths: `*` and `?` stay within one path segment, `**/` matches zero or
more whole directories (so does a longer run of stars before '/'), `**` elsewhere matches anything, `[abc]`, `[a-z]`, `[!abc]`
(a class never matches '/'), `{a,b}` (nested too), `\\x` a literal x.
"""

from __future__ import annotations

from functools import lru_cache

import re2  # type: ignore[import-untyped]  # google-re2 ships neither stubs nor py.typed

from ama_acp.errors import ToolError

# Past this the pattern is not a glob anyone means; it also bounds the translator's recursion on `{{{…`.
MAX_GLOB_CHARS = 4096
MAX_BRACE_DEPTH = 32
# RE2 bounds its own memory; a translated glob this size fails to compile rather than eat the heap.
_RE2_MAX_MEM = 32 << 20
# Characters that mean something in an RE2 regex outside a class, or inside one.
_SPECIAL = set(".^$*+?()[]{}|\\/-#&~ \t\n\r\f\v")


class GlobError(ToolError, ValueError):
    """The glob cannot be used (too long, too deep, too big to compile); the message says why."""


def _options() -> re2.Options:
    options = re2.Options()
    options.dot_nl = True  # a file name may hold a newline; `*` matches it like any other character
    options.log_errors = False  # a refused pattern is reported to the caller, not printed to stderr
    options.max_mem = _RE2_MAX_MEM
    return options


class CompiledGlob:
    """A compiled glob. `fullmatch` takes any path str, also one holding surrogate escapes (an undecodable
    file name from git or the disk): each undecodable byte counts as one character."""

    __slots__ = ("_regex",)

    def __init__(self, regex: re2._Regexp) -> None:
        self._regex = regex

    def fullmatch(self, path: str) -> bool:
        try:
            return self._regex.fullmatch(path) is not None
        except UnicodeEncodeError:
            safe = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            return self._regex.fullmatch(safe) is not None


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> CompiledGlob:
    """The compiled glob, matched against a whole relative path. Raises GlobError."""
    if len(pattern) > MAX_GLOB_CHARS:
        raise GlobError(f"the glob is longer than {MAX_GLOB_CHARS} characters")
    source = translate(pattern)
    try:
        return CompiledGlob(re2.compile(source, _options()))
    except (re2.error, UnicodeEncodeError) as e:
        raise GlobError(f"the glob is too complex to match ({e})") from None


def translate(pattern: str) -> str:
    """The RE2 source for a glob (for fullmatch)."""
    return _translate(pattern, 0)


_ANY_DIRS = "(?:.*/)?"


def _translate(pat: str, depth: int) -> str:
    if depth > MAX_BRACE_DEPTH:
        raise GlobError(f"the glob nests braces deeper than {MAX_BRACE_DEPTH}")
    out: list[str] = []
    i = 0
    while i < len(pat):
        piece, i = _next_piece(pat, i, out[-1] if out else "", depth)
        if piece:
            out.append(piece)
    return "".join(out)


def _next_piece(pat: str, i: int, previous: str, depth: int) -> tuple[str, int]:
    """The regex for the construct starting at `pat[i]` ("" when it adds nothing), and the index after it.
    `previous`: the piece before it."""
    c = pat[i]
    if c == "*":
        return _stars(pat, i, previous)
    if c == "?":
        return "[^/]", i + 1
    if c == "[":
        return _bracket(pat, i)
    if c == "{":
        return _braces(pat, i, depth)
    if c == "\\" and i + 1 < len(pat):
        return _literal(pat[i + 1]), i + 2
    return _literal(c), i + 1


def _stars(pat: str, i: int, previous: str) -> tuple[str, int]:
    # A run of stars: one is `*`; two or more are `**`, which before a '/' means "any directories".
    run = i
    while i < len(pat) and pat[i] == "*":
        i += 1
    if i - run == 1:
        return "[^/]*", i
    if i < len(pat) and pat[i] == "/":
        # `**/**/` means exactly what `**/` means: one keeps the regex small for `**/` repeated.
        return ("" if previous == _ANY_DIRS else _ANY_DIRS), i + 1
    return ".*", i


def _bracket(pat: str, i: int) -> tuple[str, int]:
    end = _closing_bracket(pat, i)
    if end == -1:  # no class: a literal '['
        return _literal("["), i + 1
    return _char_class(pat[i + 1 : end]), end + 1


def _braces(pat: str, i: int, depth: int) -> tuple[str, int]:
    end = _closing_brace(pat, i)
    if end == -1:  # no alternatives: a literal '{'
        return _literal("{"), i + 1
    alts = _split_alternatives(pat[i + 1 : end])
    return "(?:" + "|".join(_translate(a, depth + 1) for a in alts) + ")", end + 1


def _literal(c: str) -> str:
    return "\\" + c if c in _SPECIAL and c.isascii() and not c.isspace() else _plain(c)


def _plain(c: str) -> str:
    # Whitespace and control characters by code point: RE2 refuses `\ ` and a raw newline reads oddly.
    return f"\\x{{{ord(c):x}}}" if not c.isprintable() or c.isspace() else c


def _closing_bracket(pat: str, start: int) -> int:
    """Index of the ']' closing the class opened at `start`, or -1. A ']' right after '[' or '[!' is a member."""
    j = start + 1
    if j < len(pat) and pat[j] in "!^":
        j += 1
    if j < len(pat) and pat[j] == "]":
        j += 1
    end = pat.find("]", j)
    return end


def _char_class(body: str) -> str:
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    inner = "".join(_class_range(lo, hi) for lo, hi in _without_slash(_class_ranges(body)))
    if negate:
        return "[^/" + inner + "]"
    return "[" + inner + "]" if inner else "[^\\x00-\\x{10ffff}]"  # an empty class matches nothing


def _class_ranges(body: str) -> list[tuple[int, int]]:
    """The code point ranges a class's body names: `a`, `a-z`, `\\]`."""
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(body):
        lo = body[i]
        if lo == "\\" and i + 1 < len(body):
            i += 1
            lo = body[i]
        i += 1
        if i + 1 < len(body) and body[i] == "-":
            hi = body[i + 1]
            i += 2
            if hi == "\\" and i < len(body):
                hi = body[i]
                i += 1
            if lo <= hi:  # a reversed range matches nothing, as in fnmatch
                ranges.append((ord(lo), ord(hi)))
            continue
        ranges.append((ord(lo), ord(lo)))
    return ranges


def _without_slash(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    # A class never matches '/': '[a/]' must not let a one-segment pattern cross into another directory.
    slash = ord("/")
    kept: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if not lo <= slash <= hi:
            kept.append((lo, hi))
            continue
        if lo < slash:
            kept.append((lo, slash - 1))
        if slash < hi:
            kept.append((slash + 1, hi))
    return kept


def _class_range(lo: int, hi: int) -> str:
    # Every member by code point: nothing inside a class can then be read as syntax ('^', ']', '-', '[:').
    return f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}"


def _closing_brace(pat: str, start: int) -> int:
    depth = 0
    j = start
    while j < len(pat):
        ch = pat[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def _split_alternatives(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    j = 0
    while j < len(body):
        ch = body[j]
        if ch == "\\" and j + 1 < len(body):
            current.append(body[j : j + 2])
            j += 2
            continue
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            j += 1
            continue
        depth += ch == "{"
        depth -= ch == "}"
        current.append(ch)
        j += 1
    parts.append("".join(current))
    return parts


def glob_match(pattern: str, rel_path: str) -> bool:
    """Whether a relative path matches. A pattern without '/' matches the file name at any depth, as
    ripgrep's --glob does (so `*.py` finds `src/a.py`). Raises GlobError for an unusable pattern."""
    if "/" not in pattern.rstrip("/"):
        return glob_regex(pattern).fullmatch(rel_path.rsplit("/", 1)[-1])
    return glob_regex(pattern.lstrip("/")).fullmatch(rel_path)
