"""Compaction that keeps the work (long-sessions.md): a mechanical inventory, a model-written handoff, and
a context rebuilt from them plus the recent messages. Failure replaces nothing and holds auto-compaction.
"""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import aclosing
from pathlib import Path
from typing import Any

from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.providers import base as pb
from ama_acp.session import entries as en
from ama_acp.wire import types as w

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
            call = calls.get(m.tool_call_id)
            args = _args(call)
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


def recent_messages(messages: list[Message], keep_tokens: int, estimate: Any) -> list[Message]:
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


async def maybe_compact(rt: Any, session: Any) -> None:
    f = session.ctx.figures()
    if f.auto_compact_at is not None and f.used >= f.auto_compact_at:
        await compact(rt, session, manual=False)


async def compact(rt: Any, session: Any, manual: bool, instructions: str = "") -> None:
    number = session.compactions + 1
    cid = f"{session.id}-c{number}"
    caps = rt.client_caps.session
    visible = caps is not None and caps.compaction is not None
    if visible:
        await session.send(w.CompactionUpdate(compaction_id=cid, status="in_progress"))
    inventory = build_inventory(session.messages)
    extra = f"\nThe user asks you to focus on: {instructions}" if instructions else ""
    try:
        handoff = await _ask_handoff(rt, session, HANDOFF_PROMPT.format(extra=extra, inventory=inventory))
    except CompactionFailed as exc:
        await _failed(session, cid, visible, str(exc))
        return
    except Exception as exc:  # a bug of ours: the conversation stays as it was, and the log has the traceback
        log.exception("compaction failed unexpectedly")
        await _failed(session, cid, visible, f"internal error: {type(exc).__name__}")
        return
    if handoff is None:
        await _failed(session, cid, visible, "the model returned no handoff")
        return
    handoff = handoff[:HANDOFF_BUDGET]
    inv = inventory[:INVENTORY_BUDGET]
    kept = recent_messages(session.messages, rt.config.compaction.keep_tokens, session.ctx.meter.estimator.message)
    folder = Path(rt.store.handoff_dir(session.id)) / f"compaction-{number}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "handoff.md").write_text(handoff, encoding="utf-8")
        (folder / "inventory.md").write_text(inv, encoding="utf-8")
    except OSError as exc:
        await _failed(session, cid, visible, f"cannot save the handoff: {exc}")
        return
    rt.store.prune_handoffs(except_id=session.id)
    kept_from = session.message_total - len(kept)
    session.replace_context([handoff_message(handoff, inv), *kept])
    session.compactions = number
    session.context_first, session.context_synthetic = kept_from, 1
    session.ctx.meter.set_compaction(held=False)
    session.persist(
        en.CompactionEntry(
            number=number,
            summary_path=f"compaction-{number}/handoff.md",
            inventory_path=f"compaction-{number}/inventory.md",
            kept_from_index=kept_from,
            meter=session.ctx.meter_state(),
        )
    )
    summary = f"Compacted the conversation ({'by request' if manual else 'automatically'}): a handoff replaces the older messages; {len(kept)} recent messages kept."
    if visible:
        await session.send(
            w.CompactionUpdate(compaction_id=cid, status="completed", summary=[w.TextContent(text=summary)])
        )
    else:
        await session.send(w.AgentMessageChunk(content=w.TextContent(text=f"\n\n_{summary}_\n\n")))
    await session.report_usage()  # E5


def handoff_message(handoff: str, inventory: str) -> UserMessage:
    return UserMessage(
        content=[
            TextPart(
                "This conversation was compacted. The handoff below, written before compaction, and the mechanical "
                "inventory carry what came before.\n\n" + handoff + "\n\n" + inventory
            )
        ]
    )


class CompactionFailed(Exception):
    """The model could not write the handoff; the message says why (a provider failure)."""


async def _ask_handoff(rt: Any, session: Any, prompt: str) -> str | None:
    request = session.build_request()
    request = pb.ModelRequest(
        model=request.model,
        system=request.system,
        messages=[*session.messages, UserMessage(content=[TextPart(prompt)])],
        tools=[],
        max_output=request.max_output,
    )
    parts: list[str] = []
    # aclosing: a cancelled compaction closes its HTTP response now, not at garbage collection.
    async with aclosing(session.provider().stream(request)) as stream:
        async for event in stream:
            if isinstance(event, pb.TextDelta):
                parts.append(event.text)
            elif isinstance(event, pb.Retrying):
                parts = []
            elif isinstance(event, pb.Failure):
                raise CompactionFailed(event.message)
            elif isinstance(event, pb.Finished):
                session.ctx.bill(session.model_id, event.usage, enters_context=False)
                if event.usage is not None:
                    session.persist(
                        en.UsageEntry(
                            model_id=session.model_id,
                            usage=event.usage,
                            cost=session.ctx.last_cost,
                            purpose="compaction",
                            billing=session.ctx.billing_state(),
                        )
                    )
                break
    text = "".join(parts).strip()
    return text or None


async def _failed(session: Any, cid: str, visible: bool, error: str) -> None:
    log.warning("compaction failed: %s", error)
    session.ctx.meter.set_compaction(held=True)  # not retried on every message (long-sessions.md 5)
    if visible:
        await session.send(w.CompactionUpdate(compaction_id=cid, status="failed", error=error))
    else:
        await session.send(
            w.AgentMessageChunk(
                content=w.TextContent(
                    text=f"\n\n_Compaction failed ({error}); the conversation is unchanged. Run /compact to try again._\n\n"
                )
            )
        )
    await session.report_usage()
