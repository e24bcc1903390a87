"""Compaction that keeps the work, the protocol-free half: a mechanical inventory, the model-written handoff,
and the recent messages a rebuilt context keeps. The session side (`session/compacting.py`) decides when,
stores the result and tells the person over ACP; failure there replaces nothing and holds auto-compaction.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.errors import ProviderError
from ama_acp.providers import base as pb

log = logging.getLogger(__name__)

HANDOFF_BUDGET = 24_000  # characters of handoff kept in the new context
INVENTORY_BUDGET = 12_000
USER_MESSAGE_CLIP = 2_000
LIST_KEEP = 30

HANDOFF_PROMPT = """The conversation so far is about to be replaced by a handoff you write now, so that work can
continue without it. Write the handoff in Markdown with these sections:
1. Goal and current state
2. The user's instructions and preferences (verbatim where wording matters)
3. Decisions made, and approaches rejected with the reasons
4. Files: role and state of each file that matters
5. Commands that work (build, test, run)
6. Work log and next steps
7. Open questions and verbatim error messages still relevant
8. The few files to re-read first
Use the inventory below as a checklist so nothing is lost. Do not call tools.{extra}

{inventory}"""


def build_inventory(messages: list[Message]) -> str:
    """What the session did, read mechanically from its messages: no model involved."""
    users: list[str] = []
    files: dict[str, Counter[str]] = {}
    commands: list[str] = []
    searches: list[str] = []
    errors: list[str] = []
    calls: dict[str, ToolCallPart] = {}
    for m in messages:
        if isinstance(m, UserMessage):
            text = "".join(p.text for p in m.content if isinstance(p, TextPart)).strip()
            if len(text) > USER_MESSAGE_CLIP:
                text = text[:USER_MESSAGE_CLIP] + f" […{len(text) - USER_MESSAGE_CLIP} characters left out]"
            if text:
                users.append(text)
        elif isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                calls[call.id] = call
        elif isinstance(m, ToolResultMessage):
            args = _args(calls.get(m.tool_call_id))
            path = args.get("path") if isinstance(args.get("path"), str) else None
            if path:
                files.setdefault(path, Counter())[m.name] += 1
            if m.name == "run_command":
                commands.append(("✗ " if m.is_error else "✓ ") + str(args.get("command", "")))
            elif m.name in ("search", "find_files"):
                searches.append(f"{m.name} {args.get('pattern', '')}")
            if m.is_error and m.name != "run_command":
                errors.append(f"{m.name}: {m.text[:300]}")
    out = ["# Inventory (mechanical)", "", "## The user's messages"]
    out += _recent([f"- {u}" for u in users])
    out += ["", "## Files touched"]
    out += _recent([f"- {p}: " + ", ".join(f"{k}×{v}" for k, v in c.items()) for p, c in files.items()])
    out += ["", "## Commands run (✗ failed)"]
    out += _recent([f"- {c}" for c in commands])
    out += ["", "## Searches"]
    out += _recent([f"- {s}" for s in searches])
    out += ["", "## Tool errors"]
    out += _recent([f"- {e}" for e in errors])
    return "\n".join(out) + "\n"


def _args(call: ToolCallPart | None) -> dict[str, Any]:
    if call is None:
        return {}
    try:
        return call.parsed_arguments()
    except ValueError:
        return {}


def _recent(items: list[str]) -> list[str]:
    if not items:
        return ["- (none)"]
    if len(items) <= LIST_KEEP:
        return items
    return [f"- ({len(items) - LIST_KEEP} earlier entries left out)"] + items[-LIST_KEEP:]


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


def handoff_prompt(messages: list[Message], instructions: str = "") -> tuple[str, str]:
    """The prompt asking for a handoff, and the inventory it embeds."""
    inventory = build_inventory(messages)
    extra = f"\nThe user asks you to focus on: {instructions}" if instructions else ""
    return HANDOFF_PROMPT.format(extra=extra, inventory=inventory), inventory


def handoff_message(handoff: str, inventory: str) -> UserMessage:
    return UserMessage(
        content=[
            TextPart(
                "This conversation was compacted. The handoff below, written before compaction, and the mechanical "
                "inventory carry what came before.\n\n" + handoff + "\n\n" + inventory
            )
        ]
    )


class CompactionFailed(ProviderError):
    """The model could not write the handoff; the message says why (a provider failure)."""


async def write_handoff(
    provider: pb.Provider,
    request: pb.ModelRequest,
    prompt: str,
    on_usage: Callable[[Usage | None], None],
) -> str | None:
    """Ask the model for the handoff: `request` (the session's next request) with `prompt` appended and no
    tools. `on_usage` gets the request's usage (it is billed, but does not enter the context). None when
    the model wrote nothing; a provider failure raises CompactionFailed."""
    request = pb.ModelRequest(
        model=request.model,
        system=request.system,
        messages=[*request.messages, UserMessage(content=[TextPart(prompt)])],
        tools=[],
        max_output=request.max_output,
    )
    parts: list[str] = []
    # aclosing: a cancelled compaction closes its HTTP response now, not at garbage collection.
    async with aclosing(provider.stream(request)) as stream:
        async for event in stream:
            if isinstance(event, pb.TextDelta):
                parts.append(event.text)
            elif isinstance(event, pb.Retrying):
                parts = []
            elif isinstance(event, pb.Failure):
                raise CompactionFailed(event.message)
            elif isinstance(event, pb.Finished):
                on_usage(event.usage)
                break
    text = "".join(parts).strip()
    return text or None
