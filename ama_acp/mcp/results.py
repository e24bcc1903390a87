"""A tools/call result, mapped from the server's JSON into what ama shows the model and the editor.

Input is the result as JSON (the SDK's model dumped by alias), read defensively: an item of a kind ama does
not know, or one missing its fields, becomes a line of text saying so rather than an exception.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Literal

import msgspec

__all__ = ["MAX_IMAGE_BYTES", "MAX_RESULT_ITEMS", "McpCallResult", "McpContent", "map_result"]

MAX_RESULT_ITEMS = 256  # content items kept from one result; the rest are counted
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # base64 text of one image; providers refuse larger ones anyway


class McpContent(msgspec.Struct, frozen=True):
    kind: Literal["text", "image", "resource"]
    text: str = ""  # text, a resource's text, or a short description of what could not be shown
    data: str | None = None  # base64, for images
    mime_type: str | None = None
    uri: str | None = None


class McpCallResult(msgspec.Struct, frozen=True):
    content: list[McpContent]
    is_error: bool

    @property
    def text(self) -> str:
        """Everything the model reads as text: images are noted as "[image]" (their data travels apart)."""
        parts: list[str] = []
        for item in self.content:
            if item.kind == "image":
                parts.append("[image]")
            elif item.kind == "resource" and item.uri:
                parts.append(f"[resource {item.uri}]\n{item.text}" if item.text else f"[resource {item.uri}]")
            elif item.text:
                parts.append(item.text)
        return "\n".join(parts)


def map_result(raw: object) -> McpCallResult:
    """A CallToolResult as JSON → McpCallResult. Never raises."""
    if not isinstance(raw, dict):
        return McpCallResult(
            content=[McpContent(kind="text", text="(the server's result was not an object)")], is_error=True
        )
    items = raw.get("content")
    content: list[McpContent] = []
    if isinstance(items, list):
        for item in items[:MAX_RESULT_ITEMS]:
            content.append(_item(item))
        if len(items) > MAX_RESULT_ITEMS:
            content.append(McpContent(kind="text", text=f"({len(items) - MAX_RESULT_ITEMS} more items left out)"))
    structured = raw.get("structuredContent")
    if not content and structured is not None:
        # A tool that returns only structured content: the model still needs to read it.
        try:
            content.append(McpContent(kind="text", text=msgspec.json.encode(structured).decode()))
        except (TypeError, msgspec.EncodeError, RecursionError):
            content.append(McpContent(kind="text", text="(structured content that could not be shown)"))
    return McpCallResult(content=content, is_error=raw.get("isError") is True)


def str_or_none(value: object) -> str | None:
    """`value` when it is a string (an MCP server's JSON field); else None."""
    return value if isinstance(value, str) else None


def _item(item: object) -> McpContent:
    if not isinstance(item, dict):
        return McpContent(kind="text", text="(a content item that is not an object)")
    kind = item.get("type")
    read = _ITEM_KINDS.get(kind) if isinstance(kind, str) else None
    if read is None:
        shown = kind[:40] if isinstance(kind, str) else type(kind).__name__
        return McpContent(kind="text", text=f"(a content item of unknown type {shown!r})")
    return read(item)


def _text_item(item: dict[str, object]) -> McpContent:
    return McpContent(kind="text", text=str_or_none(item.get("text")) or "")


def _image_item(item: dict[str, object]) -> McpContent:
    data, mime = str_or_none(item.get("data")), str_or_none(item.get("mimeType"))
    if data is None or mime is None or not mime.startswith("image/"):
        return McpContent(kind="text", text="(an image without data or an image MIME type)")
    if len(data) > MAX_IMAGE_BYTES:
        return McpContent(kind="text", text=f"(an image of {len(data)} base64 characters, too large to show)")
    if not is_base64(data):
        return McpContent(kind="text", text="(an image whose data is not base64)")
    return McpContent(kind="image", data=data, mime_type=mime)


def _audio_item(item: dict[str, object]) -> McpContent:
    return McpContent(kind="text", text=f"(audio, {str_or_none(item.get('mimeType')) or 'unknown type'}: not shown)")


def _resource_item(item: dict[str, object]) -> McpContent:
    resource = item.get("resource")
    if not isinstance(resource, dict):
        return McpContent(kind="text", text="(an embedded resource without contents)")
    uri, mime = str_or_none(resource.get("uri")), str_or_none(resource.get("mimeType"))
    text = str_or_none(resource.get("text"))
    if text is not None:
        return McpContent(kind="resource", text=text, mime_type=mime, uri=uri)
    blob = str_or_none(resource.get("blob"))
    size = f"{len(blob) * 3 // 4} bytes" if blob is not None else "no data"
    return McpContent(
        kind="resource", text=f"(binary resource, {mime or 'unknown type'}, {size})", mime_type=mime, uri=uri
    )


def _resource_link_item(item: dict[str, object]) -> McpContent:
    uri = str_or_none(item.get("uri"))
    name = str_or_none(item.get("name")) or uri or "resource"
    return McpContent(kind="resource", text=f"(a link to {name})", mime_type=str_or_none(item.get("mimeType")), uri=uri)


# The content item types of MCP's CallToolResult, each with what ama makes of one.
_ITEM_KINDS: dict[str, Callable[[dict[str, object]], McpContent]] = {
    "text": _text_item,
    "image": _image_item,
    "audio": _audio_item,
    "resource": _resource_item,
    "resource_link": _resource_link_item,
}


def is_base64_image(data: str, mime: str) -> bool:
    """Whether a server's image (a prompt's, a resource's) goes to the model as one: an image type, data that is
    base64 (bad data would fail the request) and not past MAX_IMAGE_BYTES."""
    return mime.startswith("image/") and len(data) <= MAX_IMAGE_BYTES and is_base64(data)


def is_base64(data: str) -> bool:
    """Whether an image's `data` decodes as base64 (what a model request carries as is: bad data fails it)."""
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True
