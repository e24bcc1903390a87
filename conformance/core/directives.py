"""What the suite asks a model to do, written into prompt text so that any agent carries it to its model.

A prompt the suite sends may hold one directive line::

    acp-conformance: reply Hello there
    acp-conformance: slow
    acp-conformance: read /abs/path/to/file.txt
    acp-conformance: write /abs/path/to/new.txt some text to write
    acp-conformance: run echo conformance
    acp-conformance: mcp conformance_echo
    acp-conformance: think Some reasoning to show
    acp-conformance: plan One step of a plan
    acp-conformance: delegate Text the sub-agent is to reply with

The suite's scripted model (`conformance/servers/model.py`) reads the directive from the latest user message
and answers with the tool call (to whichever of the agent's declared tools fits) or the text it names; the
test fixtures' agents read it straight from the prompt. A prompt without a directive gets a short reply.
The format is one line, one verb, the rest of the line as its argument, so nothing here can backtrack.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "acp-conformance:"
VERBS = frozenset({"reply", "slow", "read", "write", "run", "mcp", "think", "plan", "delegate"})
_NEEDS_ARGUMENT = frozenset({"read", "write", "run", "mcp", "delegate"})  # the others may have an empty text


@dataclass(frozen=True)
class Directive:
    verb: str  # one of VERBS
    path: str = ""  # read, write
    text: str = ""  # reply text, write content, run command, mcp tool name, thinking text, plan step, delegated reply


def directive_line(verb: str, *args: str) -> str:
    """The prompt line that asks for `verb` with `args` (see the module docstring)."""
    if verb not in VERBS:
        raise ValueError(f"unknown directive verb {verb!r}")
    return " ".join([PREFIX, verb, *args]).rstrip()


def parse_directive(text: str) -> Directive | None:
    """The last well-formed directive line in `text`, or None. Unknown verbs and lines missing their
    arguments are ignored: a prompt that is not ours is just a prompt."""
    found: Directive | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith(PREFIX):
            continue
        verb, _, rest = line[len(PREFIX) :].strip().partition(" ")
        parsed = _directive(verb, rest.strip())
        if parsed is not None:
            found = parsed
    return found


def _directive(verb: str, rest: str) -> Directive | None:
    """The directive of one line's verb and the rest of the line (None: an unknown verb, or a missing argument)."""
    if verb not in VERBS or (verb in _NEEDS_ARGUMENT and not rest):
        return None
    if verb == "slow":
        return Directive("slow")
    if verb == "read":
        return Directive("read", path=rest)
    if verb == "write":
        path, _, content = rest.partition(" ")
        return Directive("write", path=path, text=content)
    return Directive(verb, text=rest)


def delegated_prompt(text: str) -> str:
    """The prompt a `delegate` directive hands the sub-agent: a reply directive (never another delegation, so a
    child that could delegate again does not), which the child's model answers with `text`."""
    return f"Reply with exactly this text: {text}\n{directive_line('reply', text)}"
