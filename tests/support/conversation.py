"""Checks on ama's own conversation model that several tests need."""

from __future__ import annotations

from collections.abc import Iterable

from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, ToolResultMessage


def first_text(message: Message) -> str:
    """The text of a message whose first part the test expects to be text."""
    part = message.content[0]
    assert isinstance(part, TextPart), f"the first part is not text: {part!r:.200}"
    return part.text


def paired_everywhere(messages: Iterable[Message]) -> bool:
    """What providers demand: each call's result follows its assistant message; no result without a call."""
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, ToolResultMessage):
            if m.tool_call_id not in open_calls:
                return False
            open_calls.discard(m.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(m, AssistantMessage):
            open_calls = {c.id for c in m.tool_calls}
    return not open_calls
