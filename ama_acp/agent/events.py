"""What the agent loop reports. One module (session/updates.py) maps these to ACP `session/update`s; the
context reporter hangs off the same stream. The loop never imports the protocol.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ama_acp.conversation.messages import AssistantMessage
from ama_acp.providers.base import (
    Retrying as Retrying,  # re-exported, passed on as the provider said it: a partial message is void
)
from ama_acp.tools.base import Location, ToolResult


class TextChunk(msgspec.Struct, frozen=True):
    text: str
    message_id: str


class ThoughtChunk(msgspec.Struct, frozen=True):
    text: str
    message_id: str


class ToolCallRequested(msgspec.Struct, frozen=True):
    wire_id: str
    name: str
    title: str
    kind: str
    locations: list[Location]
    raw_input: Any  # the arguments as the model wrote them (a JSON object when they parsed), shown as is


class ToolCallStarted(msgspec.Struct, frozen=True):
    wire_id: str


class ToolCallFinished(msgspec.Struct, frozen=True):
    wire_id: str
    result: ToolResult
    title: str | None = None
    # What the person is shown instead of `result.text` (which is for the model), e.g. "You rejected this call."
    shown: str | None = None


class AssistantMessageDone(msgspec.Struct, frozen=True):
    """E1: an assistant message is complete (appended already)."""

    message: AssistantMessage


AgentEvent = (
    TextChunk | ThoughtChunk | ToolCallRequested | ToolCallStarted | ToolCallFinished | Retrying | AssistantMessageDone
)
