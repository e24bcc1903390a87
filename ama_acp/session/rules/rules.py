"""`TOOL(PATTERN)` rules and how a call is judged by them: deny over ask over allow.

A rule names a tool and, in parentheses, what of its calls it covers: a command (`run_command(npm test *)`), a
path glob (`edit_file(src/**)`, `read_file(~/.ssh/**)`) or an origin (`web_fetch(docs.python.org)`, that host on
its scheme's default port; `web_fetch(localhost:8080)`: tools/web/origin.py). A bare name covers every call of
the tool (`mcp__SERVER__TOOL`, `web_fetch`). Patterns are matched in time linear in what
they are matched against: paths with the project's RE2 globs, commands word by word.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

from ama_acp.session.rules.shellparts import program_words, split_commands
from ama_acp.tools.search.globs import GlobError, glob_match, glob_regex

Verdict = Literal["allow", "ask", "deny"]
VERDICTS: tuple[Verdict, ...] = ("deny", "ask", "allow")  # the order of precedence

COMMAND_TOOLS = frozenset({"run_command"})
HOST_TOOLS = frozenset({"web_fetch"})
PATH_TOOLS = frozenset({"read_file", "edit_file", "write_file", "list_dir", "find_files", "search"})
MAX_RULE_CHARS = 4096
_TOOL = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,127}")


@dataclass(frozen=True)
class Rule:
    verdict: Verdict
    tool: str
    pattern: str | None  # None: every call of the tool
    origin: str  # where it was written: "config.toml line 4", the project file
    text: str = ""  # as written

    @property
    def shown(self) -> str:
        return self.text or (self.tool if self.pattern is None else f"{self.tool}({self.pattern})")


def parse_rule(text: object, verdict: Verdict, origin: str) -> Rule | str:
    """The rule, or why `text` is not one (never raises: the text is the person's, or a hostile file's)."""
    if not isinstance(text, str):
        return "a rule is a string such as `run_command(npm test *)`"
    if not 0 < len(text) <= MAX_RULE_CHARS or "\0" in text:
        return f"a rule is 1–{MAX_RULE_CHARS} characters without NUL"
    tool, paren, rest = text.strip().partition("(")
    if not _TOOL.fullmatch(tool):
        return "a rule starts with a tool's name (letters, digits, `_`, `-`), e.g. `run_command(npm test *)`"
    if not paren:
        return Rule(verdict, tool, None, origin, text)
    if not rest.endswith(")") or not rest[:-1].strip():
        return f"`{tool}(` must be closed by `)` with a pattern inside, or the tool named alone"
    pattern = rest[:-1].strip()
    if tool.startswith("mcp__"):
        return "an MCP tool's rule is its name alone (`mcp__SERVER__TOOL`): its arguments are not matched"
    if tool in COMMAND_TOOLS:
        split = split_commands(pattern)
        if not split.certain or len(split.commands) != 1:
            return "a command pattern is one simple command (no `;`, `&&`, `|`, redirections or `$( )`)"
    elif tool in PATH_TOOLS:
        try:
            glob_regex(_path_pattern(pattern).lstrip("/"))
        except GlobError as exc:
            return str(exc)
    elif tool in HOST_TOOLS:
        from ama_acp.tools.web.origin import origin_pattern  # only for a web_fetch rule (start-up time)

        if origin_pattern(pattern) is None:
            return (
                "a web_fetch pattern is a host, or a host and a port (no scheme or path): `docs.python.org`, "
                "`localhost:8080`, `[::1]:8080`"
            )
    else:
        return f"`{tool}` takes no pattern; name it alone to cover every call"
    return Rule(verdict, tool, pattern, origin, text)


def _path_pattern(pattern: str) -> str:
    return os.path.expanduser(pattern) if pattern.startswith("~") else pattern


@dataclass(frozen=True)
class Call:
    """What a rule is matched against: the tool, its command or URL, and its paths resolved (absolute, and relative
    to the workspace when inside it: None outside)."""

    tool: str
    command: str | None = None
    url: str | None = None
    paths: tuple[tuple[str, str | None], ...] = ()


def judge(rules: list[Rule], call: Call) -> tuple[Verdict, Rule] | None:
    """The verdict of the strongest rule that covers the call, and that rule; None when none does."""
    for verdict in VERDICTS:
        for rule in rules:
            if rule.verdict == verdict and rule.tool == call.tool and _covers(rule, call):
                return verdict, rule
    return None


def _covers(rule: Rule, call: Call) -> bool:
    if rule.pattern is None:
        return True
    if rule.tool in COMMAND_TOOLS:
        return _covers_command(rule, call.command)
    if rule.tool in HOST_TOOLS:
        from ama_acp.tools.web.origin import origin_pattern, url_origin

        pattern, origin = origin_pattern(rule.pattern), url_origin(call.url) if call.url is not None else None
        return pattern is not None and origin is not None and pattern.covers(origin)
    # Every path of the call must match for an allow; any one for a deny or an ask (a move out of src/**).
    matches = [_path_matches(rule.pattern, absolute, rel) for absolute, rel in call.paths]
    if not matches:
        return False
    return all(matches) if rule.verdict == "allow" else any(matches)


def _covers_command(rule: Rule, command: str | None) -> bool:
    if command is None or rule.pattern is None:
        return False
    pattern = split_commands(rule.pattern).commands[0]
    split = split_commands(command)
    if rule.verdict == "allow":  # every simple command of a line read with certainty
        return split.certain and bool(split.commands) and all(_words_match(pattern, c) for c in split.commands)
    # A deny or an ask holds when any command matches, as written or from its program on.
    return any(_words_match(pattern, c) or _words_match(pattern, program_words(c)) for c in split.commands)


def _words_match(pattern: list[str], words: list[str]) -> bool:
    """Word by word: `*` is any one word, a `*` at the end any words (or none); every other word as written."""
    if pattern and pattern[-1] == "*":
        head = pattern[:-1]
        return len(words) >= len(head) and all(p in ("*", w) for p, w in zip(head, words, strict=False))
    return len(words) == len(pattern) and all(p in ("*", w) for p, w in zip(pattern, words, strict=True))


def _path_matches(pattern: str, absolute: str, rel: str | None) -> bool:
    expanded = _path_pattern(pattern)
    try:
        if expanded.startswith("/"):
            return glob_regex(expanded.lstrip("/")).fullmatch(absolute.lstrip("/"))
        return rel is not None and glob_match(expanded, rel)
    except GlobError:
        return False
