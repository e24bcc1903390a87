"""What the agent loop reports. One module (session/editor/updates.py) maps these to ACP `session/update`s. The
context meter and its reporter are not fed from this stream: the loop calls its host (`TurnHost`) for the
accounting, and the session reports the meter's figures. The loop never imports the protocol.
"""

from __future__ import annotations

import uuid

import msgspec

from ama_acp.providers.base import (
    Retrying as Retrying,  # re-exported, passed on as the provider said it: a partial message is void
)
from ama_acp.tools.base import Location, ToolResult


def new_message_id() -> str:
    """The `messageId` of one thing ama says: a model reply, a command's output, a notice told as a message. Unique
    across processes and resumes (a per-process counter would repeat `m1` in every run), and never of the `r<n>`
    form a replay derives for an entry stored without one (session/restore.py)."""
    return f"m-{uuid.uuid4().hex}"


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
    raw_input: object  # the arguments as the model wrote them (a JSON object when they parsed); an MCP call's go to
    # the editor scrubbed (mcp/shown.py `shown_input`)


class ToolCallStarted(msgspec.Struct, frozen=True):
    wire_id: str


class ToolCallFinished(msgspec.Struct, frozen=True):
    wire_id: str
    result: ToolResult
    title: str | None = None
    # What the person is shown instead of `result.text` (which is for the model), e.g. "You rejected this call."
    shown: str | None = None


AgentEvent = TextChunk | ThoughtChunk | ToolCallRequested | ToolCallStarted | ToolCallFinished | Retrying
