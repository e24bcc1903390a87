"""Text from someone else, made safe to show on a terminal: every control character made visible.

An agent, a model, a provider, a session file or an MCP server may put terminal controls in any string: ESC
starts sequences that set the clipboard (OSC 52), the window title (OSC 0), fake a program's status (OSC 7501)
or ask the terminal a question whose answer it then types into the person's shell (DSR, `ESC [ 6 n`). Bidi
overrides reorder what is shown, and a newline inside a one-line field (a title in a permission prompt) forges
lines of its own. So every string of theirs that reaches a person passes through here first.

Nothing is dropped, so the person sees that something was there (the forms are documented in
docs/terminal-client.md, "Text from the agent"):

- C0 controls and DEL in caret notation: ESC is `^[`, BEL `^G`, CR `^M`, NUL `^@`, DEL `^?`;
- C1 controls (U+0080–U+009F), the bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069),
  the line and paragraph separators (U+2028, U+2029) and lone surrogates as `<U+XXXX>`.

`visible` is for text whose layout owns its lines (a message, a file's content): a newline and a tab are kept
(a tab only moves the cursor forward), CR LF is read as a newline. `one_line` is for a field shown on a line
with other things (a title, a name, a stop reason, a key, a log message): the newline and the tab are made
visible too (`^J`, `^I`), so a field is always exactly one line.

The ground floor: it imports nothing of ama, so every printing path (the client, the conformance report, the
session commands, `ama -p`, `ama doctor`, the log formatter) can use the one rule.
"""

from __future__ import annotations

import re
from typing import Any

# What is never shown as it is, in either form (tab and newline are added for one-line fields).
_ALWAYS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
_MULTI = re.compile(f"[{_ALWAYS}]")
_SINGLE = re.compile(f"[{_ALWAYS}\t\n]")
_MAX_DEPTH = 64


def shown_as(ch: str) -> str:
    """The visible form of one character that may not reach a terminal as it is."""
    code = ord(ch)
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, BEL -> ^G, LF -> ^J
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def _shown(match: re.Match[str]) -> str:
    return shown_as(match.group())


def visible(text: str) -> str:
    """`text` with its controls made visible; newlines and tabs kept (CR LF becomes a newline)."""
    if not _MULTI.search(text):
        return text
    return _MULTI.sub(_shown, text.replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """`text` as one line: every control made visible, the newline (`^J`) and the tab (`^I`) included."""
    if not _SINGLE.search(text):
        return text
    return _SINGLE.sub(_shown, text)


def terminal_safe(value: Any, _depth: int = 0) -> Any:
    """`value` (anything JSON-like) with every string in it passed through `visible`, keys included. Containers
    are copied; nesting past 64 levels is cut off (None), never recursed into."""
    if isinstance(value, str):
        return visible(value)
    if _depth >= _MAX_DEPTH:
        return None
    if isinstance(value, dict):
        return {terminal_safe(k, _depth + 1): terminal_safe(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [terminal_safe(v, _depth + 1) for v in value]
    return value


# Characters JSON lets through raw that a terminal still acts on (JSON escapes only U+0000–U+001F).
_JSON_RAW = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def json_safe(document: str) -> str:
    """A JSON document (from `json.dumps(..., ensure_ascii=False)`) with DEL, C1, bidi controls, U+2028/2029
    and lone surrogates written as `\\uXXXX` escapes: the same JSON, and nothing in it a terminal acts on. Such
    characters can only stand inside strings, where the escape means the same character."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
