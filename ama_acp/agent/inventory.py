"""The mechanical inventory of a compaction: what the session did, read from its stored messages with no model
involved (docs/sessions.md "Compaction").

Two renderings of one inventory: the full text saved as `compaction-N/inventory.md` (every entry of every
list), and the model's copy derived from that text alone (`model_copy`), so a loaded session rebuilds exactly
the copy the live session put into its context from the saved file.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)

TITLE = "# Inventory (mechanical)"
USER_MESSAGE_CLIP = 6_000  # characters of one user message; the rest is counted, never silently dropped
ERROR_CLIP = 300  # characters of one tool error (the first part says what went wrong)
SLASH_CLIP = 300  # characters of one slash command (`/compact` takes a free-text focus)
COMMAND_CLIP = 400  # characters of one command run (seed 003_)
PATTERN_CLIP = 200  # characters of one search pattern (seed 003_)
TASK_CLIP = 200  # characters of one delegated task's title
SEARCH_TOOLS = frozenset({"search", "find_files"})

SESSION = "Session"
USERS = "The user's messages"
SLASH = "Slash commands the user ran"
FILES = "Files touched (most recent last)"
TOOLS = "Tools used"
COMMANDS = "Commands run (✗ failed)"
SEARCHES = "Searches"
ERRORS = "Tool errors"
SKILLS = "Skills loaded (call the skill tool again for what you need of them)"
SUBAGENTS = "Subagents launched (✗ failed)"
SKILL_TOOL = "skill"  # shaping/skill_tool.py: a compaction must not lose which skills the model had read
TASK_TOOL = "task"  # tools/task.py: delegations, seed 003_'s "Subagents launched"

# The newest entries of each list the model reads (its copy in the context and in the handoff request); the file
# keeps them all. Seed 003_'s caps, each list on its own: files 500, tools used 200, commands 300, searches 100,
# subagents 100 (the seed's remaining 100, read as this list: not checked against the seed), tool errors 50.
# The seed never caps the person's messages; the huge cap only bounds the work on a hostile session file (each
# message is clipped at USER_MESSAGE_CLIP, and the whole copy to its budget, the person's messages first). The
# slash commands are ama's addition (issue 22), 50. docs/context.md "Compaction", docs/seeds.md.
LIST_CAPS: dict[str, int] = {
    USERS: 100_000,
    FILES: 500,
    TOOLS: 200,
    COMMANDS: 300,
    SEARCHES: 100,
    SUBAGENTS: 100,
    ERRORS: 50,
    SLASH: 50,
}
# A heading's entry count, `## Files touched (most recent last) (12)`: not part of the list's title.
_COUNT = re.compile(r" \((\d+)\)$")
LEGACY_LIST_CAPS: dict[str, int] = {FILES: 30, COMMANDS: 30, SEARCHES: 30, ERRORS: 30, SLASH: 30, TOOLS: 30}


class Header(msgspec.Struct, frozen=True):
    """Where and when the inventory was taken; the previous paths only from the second compaction on."""

    session_id: str
    cwd: str
    model: str
    context: str  # "17,020 / 32,768 tokens (usage)"
    time: str  # UTC ISO 8601
    previous_handoff: str | None = None
    previous_inventory: str | None = None


class Inventory(msgspec.Struct):
    users: list[str] = msgspec.field(default_factory=list)
    slash: list[str] = msgspec.field(default_factory=list)  # `/model x`, `/compact focus`: not messages (CommandEntry)
    files: dict[str, Counter[str]] = msgspec.field(default_factory=dict)  # insertion order = order of last touch
    tools: Counter[str] = msgspec.field(default_factory=Counter)
    commands: list[str] = msgspec.field(default_factory=list)
    searches: list[str] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    skills: dict[str, None] = msgspec.field(default_factory=dict)  # `name` or `name: file`, most recent last
    subagents: list[str] = msgspec.field(default_factory=list)  # the `task` calls: agent and title


def collect(messages: list[Message], slash_commands: Sequence[str] = ()) -> Inventory:
    """Walk `messages` once (the session's whole stored history, not only the current context). The slash
    commands the person ran are stored beside the messages, not as messages: the caller reads them too."""
    inv = Inventory(slash=[f"`{clip_note(_one_line(c), SLASH_CLIP)}`" for c in slash_commands if c.strip()])
    calls: dict[str, ToolCallPart] = {}
    for m in messages:
        if isinstance(m, UserMessage):
            text = _request_text(m)
            if text:
                inv.users.append(clip_note(text, USER_MESSAGE_CLIP))
        elif isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                calls[call.id] = call
        elif isinstance(m, ToolResultMessage):
            _result(inv, m, _args(calls.get(m.tool_call_id)))
    return inv


def _request_text(m: UserMessage) -> str:
    """What the person asked; "" for ama's own messages (setting reminders, a handoff), which are not requests."""
    if m.origin != "person":
        return ""
    return "".join(p.text for p in m.content if isinstance(p, TextPart)).strip()


def _result(inv: Inventory, m: ToolResultMessage, args: dict[str, Any]) -> None:
    inv.tools[m.name] += 1
    path = _path_arg(args)
    if path is not None and m.name not in SEARCH_TOOLS:
        counts = inv.files.pop(path, None) or Counter()  # popped and put back: the most recent goes last
        counts[m.name] += 1
        inv.files[path] = counts
    command = clip_note(_one_line(str(args.get("command", ""))), COMMAND_CLIP)
    mark = "✗ " if m.is_error else "✓ "
    if m.name == "run_command":
        inv.commands.append(mark + f"`{command}`")
    elif m.name in SEARCH_TOOLS:
        pattern = clip_note(_one_line(str(args.get("pattern", ""))), PATTERN_CLIP)
        inv.searches.append(f"{m.name} `{pattern}` in `{path or '.'}`")
    elif m.name == TASK_TOOL:
        inv.subagents.append(mark + _task(args))
    if m.name == SKILL_TOOL and not m.is_error:
        _skill(inv, args)
    if m.is_error:
        what = f"run_command `{command}`" if m.name == "run_command" else m.name
        inv.errors.append(f"{what}: {_one_line(m.text[:ERROR_CLIP])}")


def _task(args: dict[str, Any]) -> str:
    agent, title = args.get("agent"), args.get("description")
    if not isinstance(title, str) or not title.strip():
        title = args.get("prompt")
    who = _one_line(agent)[:TASK_CLIP] if isinstance(agent, str) and agent.strip() else "general"
    return f"`{who}`: " + clip_note(_one_line(title if isinstance(title, str) else ""), TASK_CLIP)


def _skill(inv: Inventory, args: dict[str, Any]) -> None:
    name, file = args.get("name"), args.get("file")
    if isinstance(name, str):
        entry = _one_line(f"{name}: {file}" if isinstance(file, str) and file else name)[:SLASH_CLIP]
        inv.skills.pop(entry, None)
        inv.skills[entry] = None


def _path_arg(args: dict[str, Any]) -> str | None:
    path = args.get("path")
    return path if isinstance(path, str) and path else None


def render(inv: Inventory, header: Header | None = None) -> str:
    """The full inventory (the file): every entry of every list."""
    out = [TITLE]
    if header is not None:
        out += _header_lines(header)
    files = [f"- {p}: " + ", ".join(f"{k}×{v}" for k, v in c.items()) for p, c in inv.files.items()]
    out += _list(USERS, [_indent(u) for u in inv.users])
    out += _list(SLASH, [f"- {c}" for c in inv.slash])
    out += _list(FILES, files)
    out += _list(TOOLS, [f"- {name}×{n}" for name, n in inv.tools.most_common()])
    out += _list(COMMANDS, [f"- {c}" for c in inv.commands])
    out += _list(SEARCHES, [f"- {s}" for s in inv.searches])
    if inv.subagents:  # only when the model delegated: every other inventory reads as it did
        out += _list(SUBAGENTS, [f"- {t}" for t in inv.subagents])
    out += _list(ERRORS, [f"- {e}" for e in inv.errors])
    if inv.skills:  # only when the model loaded one: every other inventory reads as it always did
        out += _list(SKILLS, [f"- `{s}`" for s in inv.skills])
    return "\n".join(out) + "\n"


def _list(title: str, items: list[str]) -> list[str]:
    """A list under its heading with its entry count, seed 003_'s `## Files touched (N)`."""
    return ["", f"## {title} ({len(items)})", *_items(items)]


def _header_lines(header: Header) -> list[str]:
    out = ["", f"## {SESSION}"]
    out += [f"- session: {header.session_id}", f"- cwd: {header.cwd}", f"- model: {header.model}"]
    out += [f"- context at compaction: {header.context}", f"- time: {header.time}"]
    if header.previous_handoff:
        out.append(f"- previous handoff: {header.previous_handoff}")
    if header.previous_inventory:
        out.append(f"- previous inventory: {header.previous_inventory}")
    return out


def build_inventory(messages: list[Message], header: Header | None = None, slash_commands: Sequence[str] = ()) -> str:
    return render(collect(messages, slash_commands), header)


# --- the model's copy, from the text alone -----------------------------------------------------------------


def sections(text: str) -> list[tuple[str, list[str]]]:
    """`(title, items)` per `## title` section; an item is a `- ` line with its indented continuation lines.
    The part before the first section comes as title "". A heading's entry count is not part of its title."""
    return [(_COUNT.sub("", heading), items) for heading, items in _headed(text)]


def _headed(text: str) -> list[tuple[str, list[str]]]:
    """sections() with each heading as written, its count kept."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line[3:], []))
        elif line.startswith("- ") or not out[-1][1]:
            if line:
                out[-1][1].append(line)
        elif line.startswith("  "):
            out[-1][1][-1] += "\n" + line
    return out


def model_copy(full: str, budget: int, caps: Mapping[str, int] | None = None) -> str:
    """The inventory as it goes back to the model: each list keeps its newest entries, up to its own cap
    (`caps`, LIST_CAPS by default; saying how many were left out), then the whole is clipped to `budget`
    characters — the user's messages first, since the file keeps them all — with a visible `[+N chars]` marker.
    Headings keep their counts (the whole list's)."""
    caps = LIST_CAPS if caps is None else caps
    rendered = []
    for heading, items in _headed(full):
        title = _COUNT.sub("", heading)
        rendered.append((title, _capped_section(heading, items, caps.get(title))))
    text = _joined(rendered)
    if len(text) <= budget:
        return text
    return clip(_users_clipped(rendered, len(text), budget), budget)


def _capped_section(heading: str, items: list[str], cap: int | None) -> str:
    """A section with its newest `cap` items, saying how many were left out."""
    if cap is not None and len(items) > cap:
        left = len(items) - cap
        items = [f"- ({left} earlier entries left out; inventory.md has them all)", *items[-cap:]]
    body = "\n".join(items)
    return f"## {heading}\n{body}" if heading else body


def _users_clipped(rendered: list[tuple[str, str]], length: int, budget: int) -> str:
    """The sections joined with the user's messages clipped first, to what the other sections leave of `budget`
    (`length`: the whole unclipped), when that leaves them some room."""
    users = next((i for i, (title, _) in enumerate(rendered) if title == USERS), None)
    if users is None:
        return _joined(rendered)
    room = budget - (length - len(rendered[users][1]))
    if room <= len(f"## {USERS}\n") + 40:
        return _joined(rendered)
    clipped = [*rendered[:users], (USERS, clip(rendered[users][1], room)), *rendered[users + 1 :]]
    return _joined(clipped)


def _joined(rendered: list[tuple[str, str]]) -> str:
    return "\n\n".join(r for _, r in rendered) + "\n"


def stored_caps(value: object) -> dict[str, int] | None:
    """The list caps a compaction entry stored (None: an entry from before them, or a damaged one — the caller
    decides). Only non-negative integer caps under known list titles are taken."""
    if not isinstance(value, dict):
        return None
    known = set(LIST_CAPS)
    caps = {
        k: v
        for k, v in value.items()
        if k in known and isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 31
    }
    return caps if len(caps) == len(value) else None


def recent_files(full: str, n: int = 5) -> list[str]:
    """The `n` most recently touched files listed in an inventory text, newest first."""
    for title, items in sections(full):
        if title == FILES:
            paths = [item[2:].rsplit(": ", 1)[0] for item in items if item.startswith("- ") and ": " in item]
            return paths[::-1][:n]
    return []


# --- clipping ----------------------------------------------------------------------------------------------


def marker(left_out: int) -> str:
    return f"[+{left_out} chars]"


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters with a visible `[+N chars]` marker (N: characters left out),
    at a line boundary when one lies in the second half of what is kept."""
    if len(text) <= limit:
        return text
    limit = max(limit, 0)
    room = max(limit - len(marker(len(text))) - 1, 0)  # the marker counts as part of the limit
    cut = text.rfind("\n", 0, room + 1)
    if cut < room // 2:
        cut = room
    kept = text[:cut].rstrip("\n")
    return kept + "\n" + marker(len(text) - len(kept))


def clip_note(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" […{len(text) - limit} characters left out]"


def _args(call: ToolCallPart | None) -> dict[str, Any]:
    if call is None:
        return {}
    try:
        return call.parsed_arguments()
    except ValueError:
        return {}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _indent(text: str) -> str:
    """A user message as one list item: continuation lines indented, so the item stays one item."""
    lines = text.splitlines() or [""]
    return "\n".join([f"- {lines[0]}", *(f"  {line}" for line in lines[1:])])


def _items(items: list[str]) -> list[str]:
    return items or ["- (none)"]
