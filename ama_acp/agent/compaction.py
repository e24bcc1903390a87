"""Compaction that keeps the work, the protocol-free half: the budgets that make a compaction always shrink the
context, the kept tail, the handoff request (sized to fit the window), and the message that replaces the older
context. The inventory itself is `agent/inventory.py`. The session side (`session/turn/compacting.py`) decides when,
stores the result and tells the person over ACP; failure or refusal there replaces nothing and holds automatic
compaction.

The arithmetic (docs/sessions.md "Budgets"): the context after a compaction must land at most
`limit = (1 - MARGIN) × min(used, autoCompactAt)`; it is the prefix (system prompt + tools) + the context message
(its fixed wording + the handoff and inventory copies) + the kept tail. The kept tail may use at most
KEEP_FRACTION of autoCompactAt (whatever `keep_tokens` says), the handoff and inventory get what is left, capped
for big windows. When what is left is under MIN_ROOM_TOKENS, compaction cannot help and is refused.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing

import msgspec

from ama_acp.agent.inventory import clip, model_copy, recent_files
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.errors import ProviderError
from ama_acp.providers import base as pb

log = logging.getLogger(__name__)

# A quarter of autoCompactAt for the kept tail: the rest is for the prefix, the handoff and the inventory, and
# what is left under the threshold must leave the person several turns of work before the next compaction.
KEEP_FRACTION_PERCENT = 25
# The context after a compaction lands at most 80 % of the threshold (or of the current figure, for a /compact
# under it): a compaction that frees less would be followed by another one a turn later.
MARGIN_PERCENT = 20
CHARS_PER_TOKEN = 4  # the heuristic estimator's ratio for ASCII (U1); budgets are characters, limits tokens
MIN_ROOM_TOKENS = 256  # under this a handoff cannot carry the work: refuse rather than lose it
INVENTORY_SHARE_PERCENT = 40  # of the room, at most, for the inventory's copy; the handoff gets the rest
# Characters of handoff and of inventory in the context at most (seed 003 clips a restored block at 95,000):
# below that the window's room decides (`budgets`), so an 8K window still compacts.
HANDOFF_CAP = 95_000
INVENTORY_CAP = 95_000
REQUEST_INVENTORY_CAP = 400_000  # characters of inventory in the handoff request (a checklist, not the context)
MAX_REREAD = 10  # files named to re-read in the context message

# Seed 003's handoff: nine sections, the environment and "anything else" among them, with the seed's sub-items
# (what changed and why, the skills, risks, failing tests); a reason beside every file
# to re-read; what a previous handoff said carried over; complete rather than brief. Section 8 stays the files to
# re-read (`reread_files` reads it).
HANDOFF_PROMPT = """The conversation so far is about to be replaced by a handoff you write now, so that work can
continue without it: whatever the handoff leaves out is lost to whoever continues. Write the handoff in Markdown
with these nine sections:
1. Goal and current state
2. The user's instructions and preferences (verbatim where wording matters)
3. Decisions made, and approaches rejected with the reasons
4. Files: role and state of each file that matters, and what changed in it and why
5. Environment: commands that work (build, test, run), the MCP servers in use and what they are for, and where
   credentials live (the names of environment variables and files, never their values); the skills loaded
6. Work log and next steps
7. Open questions, risks, failing tests, and verbatim error messages still relevant
8. The files to re-read first: one a line, the path in backticks, then the reason to re-read it
9. Anything else the work needs that fits no section above
Write the handoff in the language of the conversation (the language the user writes in), even though this
request is in English; keep paths, commands, code and quoted errors verbatim.
{length}
Use the inventory below as a checklist so nothing is lost. Do not call tools.{previous}{extra}
{environment}
{git}
{inventory}"""

COMPLETE = (
    "Be complete rather than brief: the whole handoff goes back into the context (and is saved beside the session)."
)
# Only where the window forces a budget does the request give one, and it says why.
WINDOW_BOUND = (
    "Be complete rather than brief, within one limit: this model's context window leaves room for about {chars} "
    "characters of the handoff in the context (the full text is saved, but only that much goes back), so spend "
    "them on what cannot be found again in the files."
)
PREVIOUS = (
    "\nThis conversation was compacted before: the previous handoff opens it (its full text: {path}). Carry over "
    "everything it says that still holds (instructions, decisions, environment, open questions) into the matching "
    "sections: your handoff replaces it."
)


def keep_budget(keep_tokens: int, auto_compact_at: int | None) -> int:
    """The kept tail's bound: `keep_tokens`, but never more than KEEP_FRACTION of autoCompactAt."""
    if auto_compact_at is None:
        return max(keep_tokens, 0)
    return max(0, min(keep_tokens, auto_compact_at * KEEP_FRACTION_PERCENT // 100))


def limit_after(used: int, auto_compact_at: int | None) -> int:
    """The most the context may hold after a compaction (integers: no float rounding at the boundary)."""
    base = used if auto_compact_at is None else min(used, auto_compact_at)
    return base * (100 - MARGIN_PERCENT) // 100


class Plan(msgspec.Struct, frozen=True):
    """A compaction that will shrink the context: keep `kept` (`kept_tokens`), and `room_tokens` for the handoff
    and the inventory's copy, so that the context lands at most `limit`."""

    kept: list[Message]
    kept_tokens: int
    limit: int
    room_tokens: int


class Refused(msgspec.Struct, frozen=True):
    """Why a compaction would not help, worded for the person."""

    reason: str


def plan_compaction(
    messages: list[Message],
    synthetic: int,
    *,
    used: int,
    prefix_tokens: int,
    wrapper_tokens: int,
    auto_compact_at: int | None,
    keep_tokens: int,
    estimate: Callable[[Message], int],
) -> Plan | Refused:
    """Predict the context after a compaction before asking the model (all estimates). `messages` is the
    context; its first `synthetic` messages (a previous handoff) are never kept."""
    stored = messages[synthetic:]
    limit = limit_after(used, auto_compact_at)
    fixed = prefix_tokens + wrapper_tokens
    keep = max(0, min(keep_budget(keep_tokens, auto_compact_at), limit - fixed - MIN_ROOM_TOKENS))
    kept = recent_messages(stored, keep, estimate)
    unseen = unseen_tail(stored)
    if len(unseen) > len(kept):  # what the model has not read yet is kept whole, whatever the budget says
        kept = unseen
    if len(kept) == len(stored):
        return Refused(
            "There is nothing to compact yet: every message is among the recent ones a compaction keeps. "
            "Nothing was changed."
        )
    kept_tokens = sum(estimate(m) for m in kept)
    room = limit - fixed - kept_tokens
    if room < MIN_ROOM_TOKENS:
        if len(kept) == len(unseen) and kept_tokens > keep:
            why = (
                f"the newest messages, which the model has not read yet ({kept_tokens:,} tokens), leave too little "
                f"room under {limit:,} tokens for a handoff"
            )
        elif auto_compact_at is None or used < auto_compact_at:
            why = f"a compaction would not free even {MARGIN_PERCENT} % of the context ({used:,} tokens)"
        else:
            why = (
                f"the system prompt and tools ({prefix_tokens:,} tokens) leave too little room under "
                f"{limit:,} tokens for a handoff"
            )
        return Refused(f"Compaction cannot help here: {why}. Nothing was changed.")
    return Plan(kept, kept_tokens, limit, room)


class Budgets(msgspec.Struct, frozen=True):
    inventory_chars: int  # the budget `model_copy` was given (stored, so a load derives the same copy)
    inventory_copy: str
    handoff_chars: int


def budgets(room_tokens: int, inventory_full: str) -> Budgets:
    """The inventory's copy for the context and the handoff's character budget, together within the room: the
    inventory takes what it needs up to its share, the handoff the rest, each capped for big windows."""
    room = room_tokens * CHARS_PER_TOKEN
    inventory_chars = min(INVENTORY_CAP, room * INVENTORY_SHARE_PERCENT // 100)
    copy = model_copy(inventory_full, inventory_chars)
    return Budgets(inventory_chars, copy, max(0, min(HANDOFF_CAP, room - len(copy))))


def unseen_tail(messages: list[Message]) -> list[Message]:
    """The messages the model has not answered yet: everything after its last reply — the person's newest
    prompt, or the results of its last reply's tool calls, with that reply itself (every result keeps its
    call). A compaction keeps them whole: compacting a result away before the model saw it made a model that
    reads a big file read it again, compaction after compaction."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)
    if last < 0:
        return list(messages)
    tail = messages[last + 1 :]
    if any(isinstance(m, ToolResultMessage) for m in tail):
        return messages[last:]
    return tail


def recent_messages(messages: list[Message], keep_tokens: int, estimate: Callable[[Message], int]) -> list[Message]:
    """The newest messages within `keep_tokens`, starting at a user message so every tool result keeps its
    call."""
    total = 0
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += estimate(messages[i])
        if total > keep_tokens:
            break
        if isinstance(messages[i], UserMessage):
            start = i
    return messages[start:]


# --- the message that replaces the older context -----------------------------------------------------------

# The handoff is the model's text: each pattern must run in linear time on any line. No two adjacent parts may
# match the same characters (`^\s*(?:…)?\s*` would try every split of a long run of spaces: quadratic).
_HEADING = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|\*\*[ \t]*)?(\d+)[.):]?\s")
_TICKED = re.compile(r"`([^`\n]{1,200})`")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def reread_files(handoff: str, inventory_full: str) -> list[str]:
    """The files to re-read: the handoff's section 8 when it names some (the first path of each line: a reason
    follows it), else the inventory's most recently touched files."""
    found = [path for item in _files_section(handoff.splitlines()) if (path := _first_path(item)) is not None]
    unique = list(dict.fromkeys(found))
    return unique[:MAX_REREAD] if unique else recent_files(inventory_full)


def _files_section(lines: list[str]) -> list[str]:
    """The lines of the first section 8 (the files to re-read), up to a Markdown heading or section 9."""
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m is None or m.group(1) != "8":
            continue
        section = []
        for item in lines[i + 1 :]:
            if item.lstrip().startswith("#") or ((h := _HEADING.match(item)) is not None and h.group(1) == "9"):
                break
            section.append(item)
        return section
    return []


def _first_path(item: str) -> str | None:
    """One file a line, then its reason: only the line's first path counts (the reason may quote code). A path
    in backticks, else the bullet's first word, if it looks like a path."""
    for ticked in _TICKED.findall(item):
        if ticked.strip() and _looks_like_path(ticked):
            return str(ticked.strip())
    b = _BULLET.match(item)
    words = item[b.end() :].split() if b is not None else []
    first = words[0].strip("*,;:") if words else ""
    return first if first and _looks_like_path(first) else None


def _looks_like_path(text: str) -> bool:
    return "/" in text or "." in text


def context_message(
    number: int,
    handoff: str,
    inventory_full: str,
    *,
    handoff_path: str,
    inventory_path: str,
    handoff_chars: int | None,
    inventory_chars: int | None,
    list_caps: Mapping[str, int] | None = None,
) -> UserMessage:
    """The synthetic first message of a compacted context, built from the saved full texts (a live compaction
    and a load call this alike, so the reloaded context is the live one). None budgets: unclipped. `list_caps`:
    the inventory's list caps the compaction used (LIST_CAPS when None)."""
    files = reread_files(handoff, inventory_full)
    reread = (
        "Re-read these files before you continue: " + ", ".join(f"`{f}`" for f in files) + "."
        if files
        else "No files were named to re-read."
    )
    shown_handoff = handoff if handoff_chars is None else clip(handoff, handoff_chars)
    shown_inventory = (
        inventory_full if inventory_chars is None else model_copy(inventory_full, inventory_chars, list_caps)
    )
    text = (
        f"This conversation was compacted (compaction {number}). The handoff below, written before compaction, and "
        "the mechanical inventory carry what came before.\n"
        f"{reread}\n"
        "The full handoff and inventory are on disk; read them if something you need is missing here:\n"
        f"- handoff: {handoff_path}\n- inventory: {inventory_path}\n\n" + shown_handoff + "\n\n" + shown_inventory
    )
    return UserMessage(content=[TextPart(text)], origin="ama")


def wrapper_text(handoff_path: str, inventory_path: str) -> str:
    """The context message's fixed wording at its longest (every re-read slot used): its share of the room."""
    longest = "\n".join(f"`{'x' * 60}`" for _ in range(MAX_REREAD))
    message = context_message(
        99,
        f"8. files\n{longest}",
        "",
        handoff_path=handoff_path,
        inventory_path=inventory_path,
        handoff_chars=0,
        inventory_chars=0,
    )
    part = message.content[0]
    return part.text if isinstance(part, TextPart) else ""


# --- the handoff request -----------------------------------------------------------------------------------


def handoff_prompt(
    inventory: str,
    handoff_chars: int,
    instructions: str = "",
    git_state: str = "",
    *,
    previous: str | None = None,
    mcp_servers: Sequence[str] = (),
) -> str:
    """`git_state`: the workspace's git state as text (tools/git_state.py), "" when there is none. A budget of
    HANDOFF_CAP or more is none the window forces: the request asks for completeness alone. `previous`: the
    path of the previous compaction's handoff, when there was one. `mcp_servers`: the session's MCP servers."""
    extra = f"\nThe user asks you to focus on: {instructions}" if instructions else ""
    git = f"\n{git_state}\n" if git_state else ""
    length = COMPLETE if handoff_chars >= HANDOFF_CAP else WINDOW_BOUND.format(chars=f"{handoff_chars:,}")
    if mcp_servers:
        names = ", ".join(f"`{' '.join(name.split())}`" for name in mcp_servers)
        environment = f"\nMCP servers connected to this session: {names}.\n"
    else:
        environment = "\nNo MCP servers are connected to this session.\n"
    return HANDOFF_PROMPT.format(
        length=length,
        previous=PREVIOUS.format(path=previous) if previous else "",
        extra=extra,
        environment=environment,
        git=git,
        inventory=inventory,
    )


def handoff_request(
    base: pb.ModelRequest,
    inventory_full: str,
    handoff_chars: int,
    *,
    instructions: str,
    window: int | None,
    prefix_tokens: int,
    estimate_text: Callable[[str], int],
    estimate: Callable[[Message], int],
    git_state: str = "",
    previous: str | None = None,
    carried: int = 0,
    mcp_servers: Sequence[str] = (),
) -> pb.ModelRequest:
    """The session's next request with the handoff prompt appended and no tools, sized to fit `window`: the
    context (its oldest messages left out of this one request if it must) + the prompt + the inventory (its
    lists capped, `model_copy`) clipped to what fits + the expected handoff. The first `carried` messages (the
    previous handoff) stay when the oldest must go, as long as they leave room: the prompt asks to carry them
    over."""
    messages = list(base.messages)
    inventory = model_copy(inventory_full, REQUEST_INVENTORY_CAP)

    def prompt_for(text: str) -> str:
        return handoff_prompt(text, handoff_chars, instructions, git_state, previous=previous, mcp_servers=mcp_servers)

    if window is not None:
        head = estimate_text(prompt_for(""))
        avail = window - window // 20 - handoff_chars // CHARS_PER_TOKEN - head  # 5 %: estimates are not exact
        context = prefix_tokens + sum(estimate(m) for m in messages)
        if context > avail - MIN_ROOM_TOKENS:
            room = max(avail - MIN_ROOM_TOKENS - prefix_tokens, 0)
            kept = messages[:carried]
            kept_tokens = sum(estimate(m) for m in kept)
            if kept_tokens > room // 2:  # the previous handoff would crowd out the newest work: it goes too
                kept, kept_tokens = [], 0
            messages = kept + recent_messages(messages[len(kept) :], room - kept_tokens, estimate)
            context = prefix_tokens + sum(estimate(m) for m in messages)
        fits = max(avail - context, MIN_ROOM_TOKENS) * CHARS_PER_TOKEN
        inventory = model_copy(inventory_full, min(REQUEST_INVENTORY_CAP, fits))
    return pb.ModelRequest(
        model=base.model,
        system=base.system,
        messages=[*messages, UserMessage(content=[TextPart(prompt_for(inventory))])],
        tools=[],
        max_output=base.max_output,
    )


class CompactionFailed(ProviderError):
    """The model could not write the handoff; the message says why (a provider failure)."""


async def write_handoff(
    provider: pb.Provider,
    request: pb.ModelRequest,
    on_usage: Callable[[Usage | None], None],
    on_lost: Callable[[], None],
) -> str | None:
    """Ask the model for the handoff (`request` from `handoff_request`). `on_usage` gets the request's usage
    (it is billed, but does not enter the context); `on_lost` is called for each attempt the provider accepted
    whose usage never came (cancelled, cut off, retried: billed all the same, U17). None when the model wrote
    nothing; a provider failure raises CompactionFailed."""
    parts: list[str] = []
    accepted = False
    try:
        # aclosing: a cancelled compaction closes its HTTP response now, not at garbage collection.
        async with aclosing(provider.stream(request)) as stream:
            async for event in stream:
                if isinstance(event, pb.Accepted):
                    accepted = True
                elif isinstance(event, pb.TextDelta):
                    parts.append(event.text)
                elif isinstance(event, pb.Retrying):
                    parts = []
                    if accepted:
                        accepted = False
                        on_lost()
                elif isinstance(event, pb.Failure):
                    raise CompactionFailed(event.message)
                elif isinstance(event, pb.Finished):
                    accepted = False
                    on_usage(event.usage)
                    break
    finally:  # a cancel, a failure or a stream that just ended: an accepted attempt was billed without usage
        if accepted:
            on_lost()
    text = "".join(parts).strip()
    return text or None
