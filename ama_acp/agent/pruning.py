"""Pruning, the first tier of long-sessions.md: at `pruneAt`, the bodies of old tool results are replaced by
a short placeholder, before any summarising is needed. The stored messages stay whole; a ContextEditEntry
records which ones the context carries pruned, so a loaded session rebuilds the same context. The next
figure is an estimate (U9) and a usage_update follows (E5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, ToolResultMessage
from ama_acp.session import entries as en

PLACEHOLDER = "[This tool output was pruned to save context. Run the tool again if you need it.]"
MIN_CHARS = 400  # smaller results are not worth a placeholder


def pruned(message: ToolResultMessage) -> ToolResultMessage:
    return ToolResultMessage(message.tool_call_id, message.name, [TextPart(PLACEHOLDER)], message.is_error)


def candidates(messages: list[Message], keep_tokens: int, estimate: Callable[[Message], int]) -> list[int]:
    """Positions of tool results worth pruning: older than the last assistant message (the model has seen
    them) and outside the newest `keep_tokens` of the context."""
    last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)
    total, protected_from = 0, len(messages)
    for i in range(len(messages) - 1, -1, -1):
        total += estimate(messages[i])
        if total > keep_tokens:
            break
        protected_from = i
    limit = min(protected_from, last_assistant)
    return [
        i
        for i in range(max(limit, 0))
        if isinstance(m := messages[i], ToolResultMessage) and m.text != PLACEHOLDER and len(m.text) > MIN_CHARS
    ]


async def maybe_prune(rt: Any, session: Any) -> bool:
    """Prune when the fill reached pruneAt; True when the context changed."""
    f = session.ctx.figures()
    if f.prune_at is None or f.used < f.prune_at:
        return False
    positions = candidates(session.messages, rt.config.compaction.keep_tokens, session.ctx.meter.estimator.message)
    positions = [p for p in positions if p >= session.context_synthetic]
    if not positions:
        return False
    context = list(session.messages)
    for p in positions:
        context[p] = pruned(context[p])
    session.replace_context(context)
    session.persist(
        en.ContextEditEntry(
            message_indices=[session.file_index(p) for p in positions],
            action="prune",
            placeholder=PLACEHOLDER,
            meter=session.ctx.meter_state(),
        )
    )
    await session.report_usage()  # E5
    return True


def apply_prune(context: list[Message], positions: list[int]) -> None:
    """Session load: prune the same messages again (positions in the rebuilt context)."""
    for p in positions:
        if 0 <= p < len(context) and isinstance(m := context[p], ToolResultMessage):
            context[p] = pruned(m)
