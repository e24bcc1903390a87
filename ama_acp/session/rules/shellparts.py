"""A command line split into its simple commands, as far as that can be done with certainty.

A rule such as `npm test *` allows a line only when every command the shell would run in it is `npm test …`, so
the split must never see one command where the shell sees two. This is not a shell: anything whose effect cannot
be read off the words (a subshell, `$( )`, backticks, a redirection, a here-doc, a comment, a brace group, an
unclosed quote, a line continuation) makes the split uncertain, and an uncertain line is never allowed by a rule.
The words of what was split are still returned, so a deny rule can refuse a line it could not fully read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Between two simple commands: `;`, `&`, `|` and the doubled forms, and a newline.
_SEPARATORS = frozenset(";&|\n")
# Unquoted, these start something the words alone do not describe.
_UNCERTAIN = frozenset("()<>`")
_BLANKS = frozenset(" \t")
# Words that open or continue a compound command: the command they lead is the one after them.
RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "in", "!", "time"})


@dataclass
class Split:
    """The simple commands of a line (each a list of words, quotes removed) and whether that is all of it."""

    commands: list[list[str]] = field(default_factory=list)
    certain: bool = True


def split_commands(line: str) -> Split:
    """The line's simple commands. One pass over the text: linear in its length."""
    out = Split()
    words: list[str] = []
    word: list[str] | None = None  # None between words; [] is an empty quoted word ('')
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in _BLANKS or c in _SEPARATORS:
            if word is not None:
                words.append("".join(word))
                word = None
            if c in _SEPARATORS and words:
                out.commands.append(words)
                words = []
            i += 1
            continue
        if _uncertain_at(line, i, word is None):
            out.certain = False
        if word is None:
            word = []
        i = _piece(line, i, word, out)
    if word is not None:
        words.append("".join(word))
    if words:
        out.commands.append(words)
    if any(command[0] in ("{", "}") or command[-1] == "}" for command in out.commands):
        out.certain = False  # a brace group: its commands run as one
    return out


def _uncertain_at(line: str, i: int, word_start: bool) -> bool:
    """Whether the unquoted character at `i` starts something the words do not describe (`$'…'` and `$"…"` quote
    by other rules than '…' and "…")."""
    c = line[i]
    return c in _UNCERTAIN or (c == "#" and word_start) or (c == "$" and line[i + 1 : i + 2] in ("(", "'", '"'))


def _piece(line: str, i: int, word: list[str], out: Split) -> int:
    """One quoted string, escaped character or plain character of a word added to it; the index past it."""
    c, n = line[i], len(line)
    if c == "'":
        end = line.find("'", i + 1)
        if end < 0:
            out.certain = False
            end = n
        word.append(line[i + 1 : end])
        return end + 1
    if c == '"':
        return _double_quoted(line, i + 1, word, out)
    if c == "\\":
        if i + 1 >= n or line[i + 1] == "\n":
            out.certain = False  # a line continuation, or a backslash at the very end
        word.append(line[i + 1 : i + 2])
        return i + 2
    word.append(c)
    return i + 1


def _double_quoted(line: str, i: int, word: list[str], out: Split) -> int:
    """Past the closing `"`; a `$(` or backtick inside runs a command, an unclosed quote is uncertain."""
    n = len(line)
    while i < n:
        c = line[i]
        if c == '"':
            return i + 1
        if c == "`" or (c == "$" and line.startswith("$(", i)):
            out.certain = False
        if c == "\\" and i + 1 < n and line[i + 1] in '"\\$`':
            word.append(line[i + 1])
            i += 2
            continue
        word.append(c)
        i += 1
    out.certain = False
    return n


# Programs that run the rest of their words as a command, taking no argument of their own before it.
WRAPPERS = frozenset({"command", "exec", "builtin", "nohup", "env", "sudo"})


def program_words(words: list[str]) -> list[str]:
    """The words from the program on: leading reserved words, `NAME=value` assignments and wrappers left out, the
    program by its file name (what a deny rule is matched against; an allow rule sees the words as written, so
    `PATH=… npm test` is not `npm test`)."""
    i = 0
    while i < len(words) and (words[i] in RESERVED or words[i] in WRAPPERS or _assignment(words[i])):
        i += 1
    rest = words[i:]
    return [rest[0].rsplit("/", 1)[-1], *rest[1:]] if rest else rest


def _assignment(word: str) -> bool:
    name, eq, _ = word.partition("=")
    return bool(eq) and name.replace("_", "a").isalnum() and not name[0].isdigit()
