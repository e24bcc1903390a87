"""Pruning, the first tier of a long session: at `pruneAt`, the bodies of old tool results are replaced by
a short placeholder, before any summarising is needed. This is the protocol-free half (which results, and
the placeholder); the session side (`session/turn/compacting.py`) applies it, records a ContextEditEntry (the
stored messages stay whole, so a loaded session rebuilds the same context) and reports the new figure.
"""

from __future__ import annotations

from collections.abc import Callable

from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, ToolResultMessage

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


def apply_prune(context: list[Message], positions: list[int]) -> None:
    """Session load: prune the same messages again (positions in the rebuilt context)."""
    for p in positions:
        if 0 <= p < len(context) and isinstance(m := context[p], ToolResultMessage):
            context[p] = pruned(m)


def early_prune_at(auto_compact_at: int) -> int:
    """Where pruning starts when the prompt cache is known to be cold (rule C4): half of autoCompactAt, below
    pruneAt's 70 %. Pruning rewrites the middle of the context, so the next request re-reads everything after
    the first pruned result at the full input price; with a cold cache it pays that price anyway, so pruning
    then costs no cache and saves the pruned tokens on every request after."""
    return auto_compact_at // 2


def prune_threshold(prune_at: int, auto_compact_at: int, cold: bool) -> int:
    """The fill at which pruning runs: pruneAt, or earlier only when the cache is known to be cold (a warm or
    unknown cache keeps pruneAt: pruning early would throw away a cached prefix that is paid for)."""
    return min(prune_at, early_prune_at(auto_compact_at)) if cold else prune_at
