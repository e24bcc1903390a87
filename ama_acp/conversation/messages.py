"""The conversation as ama keeps it: provider-neutral, immutable once appended.

Providers translate these to their own wire formats; the context meter estimates them; the session
store writes them. Field names are snake_case here (this is not the ACP wire).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


def valid_unicode(text: str) -> str:
    """`text` as valid Unicode: what the conversation, the wire and the session file can all encode.

    File names reach tool results as the OS gives them: undecodable bytes become lone surrogates
    (surrogateescape), which no JSON encoder will write. Those bytes are shown as U+FFFD instead; a lone
    surrogate of any other origin likewise. Text that is already valid is returned as it is (one encode).
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:  # an escaped byte becomes the byte again, then one U+FFFD
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that escapes no byte
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class Usage(msgspec.Struct, omit_defaults=True, frozen=True):
    """Token figures one model request reported. None means the provider did not say."""

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    total: int | None = None
    reasoning: int | None = None


class TextPart(msgspec.Struct, tag="text", frozen=True):
    text: str


class ImagePart(msgspec.Struct, tag="image", frozen=True):
    data: str  # base64
    mime_type: str


class ThinkingPart(msgspec.Struct, tag="thinking", frozen=True, omit_defaults=True):
    text: str
    # Anthropic signs thinking blocks; the signature must travel back with the block next request.
    signature: str | None = None
    redacted: bool = False


class ToolCallPart(msgspec.Struct, tag="tool_call", frozen=True):
    id: str  # the provider's id (the wire id may differ: session/turn/toolcalls.py `ToolCallRecords.wire_id`)
    name: str
    arguments: str  # JSON text exactly as the model produced it

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as an object; ValueError when the model's JSON is not one (or not even a string)."""
        if not isinstance(self.arguments, str):
            raise ValueError("arguments must be JSON text")
        import json  # a tool call's arguments only: not on a first text answer's path

        try:
            value = json.loads(self.arguments or "{}")
            # JSON may escape a lone surrogate ("\\ud800"); no encoder of ours can write one back out (the
            # tool call's rawInput, the session file), so such arguments are not valid text.
            msgspec.json.encode(value)
        except RecursionError:
            # The decoder's depth is bounded by the recursion limit; hostile nesting ends there, as bad JSON.
            raise ValueError("arguments are nested too deeply") from None
        except UnicodeEncodeError:
            raise ValueError("arguments hold text that is not valid Unicode (a lone surrogate)") from None
        if not isinstance(value, dict):
            raise ValueError("arguments must be a JSON object")
        return value


Origin = Literal["person", "ama"]


class UserMessage(msgspec.Struct, tag="user", frozen=True, omit_defaults=True):
    """A user-role message. `origin` "ama" marks what ama itself put in the conversation for the model (a
    mode reminder, a compaction handoff): the model reads it like any user message, but it is not the person's
    and is neither replayed to the editor as theirs nor listed among their messages."""

    content: list[TextPart | ImagePart]
    origin: Origin = "person"


class AssistantMessage(msgspec.Struct, tag="assistant", frozen=True, omit_defaults=True):
    content: list[TextPart | ThinkingPart | ToolCallPart]
    model: str = ""
    stop: str = "end_turn"  # end_turn | tool_use | max_tokens | refusal | cancelled | error
    usage: Usage | None = None

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.content if isinstance(p, ToolCallPart)]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


class ToolResultMessage(msgspec.Struct, tag="tool_result", frozen=True, omit_defaults=True):
    tool_call_id: str  # the provider's id, so the next request pairs it with its call
    name: str
    content: list[TextPart | ImagePart]
    is_error: bool = False

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


Message = UserMessage | AssistantMessage | ToolResultMessage
