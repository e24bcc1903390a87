"""An MCP server's resources as the model reads them: resources/list (and resources/templates/list) as bounded
lines, a resources/read result as bounded text (docs/tools.md "MCP resources").

Input is JSON already decoded (the SDK's models dumped by alias), read as hostile: an entry of the wrong shape is
skipped and counted, every field and the whole answer are cut with a marker, and nothing raises. Binary contents
are described, never inlined; a small image is handed on as an image (the model sees it as it sees an MCP tool's).
"""

from __future__ import annotations

import msgspec

from ama_acp.conversation.messages import ImagePart
from ama_acp.mcp.results import is_base64_image, str_or_none
from ama_acp.mcp.tools import clip_description

__all__ = [
    "MAX_LISTING_CHARS",
    "MAX_READ_CHARS",
    "MAX_RESOURCES_PER_SERVER",
    "ResourceText",
    "listing",
    "listing_lines",
    "read_text",
]

MAX_RESOURCES_PER_SERVER = 200  # entries of one server's listing shown (resources and templates each)
MAX_FIELD = 300  # characters of one name, URI or description in a listing line
MAX_LISTING_CHARS = 32_000  # the whole listing the model reads
MAX_READ_CHARS = 100_000  # the text of one resources/read the model reads (about 25K tokens)
MAX_CONTENTS = 64  # content items of one read


class ResourceText(msgspec.Struct, frozen=True):
    text: str
    images: list[ImagePart] = []


def _field(value: object, limit: int = MAX_FIELD) -> str:
    text = " ".join(value.split()) if isinstance(value, str) else ""
    return clip_description(text, limit)


def listing_lines(server: str, resources: object, templates: object) -> list[str]:
    """One line a resource (`- <uri> — <name> (<mime>): <description>`) and a template (`- template <uriTemplate>
    — …`), at most MAX_RESOURCES_PER_SERVER of each; a line saying what was left out or unreadable."""
    lines: list[str] = []
    for kind, raw, key in (("", resources, "uri"), ("template ", templates, "uriTemplate")):
        if raw is None:
            continue
        if not isinstance(raw, list):
            lines.append(f"- ({kind or 'resource '}list of {server[:80]!r} is not a list)")
            continue
        skipped = 0
        for entry in raw[:MAX_RESOURCES_PER_SERVER]:
            address = _field(entry.get(key), 2000) if isinstance(entry, dict) else ""
            if not isinstance(entry, dict) or not address:
                skipped += 1
                continue
            lines.append(_line(kind, address, entry))
        if skipped:
            lines.append(f"- ({skipped} {kind}entries without a {key} left out)")
        if len(raw) > MAX_RESOURCES_PER_SERVER:
            lines.append(f"- ({len(raw) - MAX_RESOURCES_PER_SERVER} more {kind or 'resource '}entries left out)")
    return lines


def _line(kind: str, address: str, entry: dict[str, object]) -> str:
    name = _field(entry.get("title")) or _field(entry.get("name"))
    mime = _field(entry.get("mimeType"), 100)
    description = _field(entry.get("description"))
    line = f"- {kind}{address}"
    if name:
        line += f" — {name}"
    if mime:
        line += f" ({mime})"
    if description:
        line += f": {description}"
    return line


def listing(blocks: list[tuple[str, list[str]]]) -> str:
    """Each server's lines under its name, the whole cut at MAX_LISTING_CHARS with a marker."""
    if not blocks:
        return "No MCP server of this session offers resources."
    text = "\n\n".join("\n".join([f"## {server}", *(lines or ["- (none)"])]) for server, lines in blocks)
    return bounded(text, MAX_LISTING_CHARS, "the listing (ask for one `server` at a time)")


def bounded(text: str, limit: int, what: str) -> str:
    """`text` whole when it fits, else its first `limit` characters and a marker naming what was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters of {what} left out: the limit is {limit}]"


def read_text(raw: object, uri: str) -> ResourceText:
    """A ReadResourceResult as JSON → what the model reads. Never raises."""
    contents = raw.get("contents") if isinstance(raw, dict) else None
    if not isinstance(contents, list):
        return ResourceText(f"(the server's answer for {uri[:300]} holds no contents)")
    pieces: list[str] = []
    images: list[ImagePart] = []
    for item in contents[:MAX_CONTENTS]:
        if not isinstance(item, dict):
            pieces.append("(a content item that is not an object)")
            continue
        address = _field(item.get("uri"), 2000) or uri[:2000]
        mime = _field(item.get("mimeType"), 100)
        text = str_or_none(item.get("text"))
        if text is not None:
            head = f"[resource {address}{f' ({mime})' if mime else ''}]"
            pieces.append(f"{head}\n{text}" if len(contents) > 1 else text)
            continue
        blob = str_or_none(item.get("blob"))
        if blob is not None and not images and is_base64_image(blob, mime):
            images.append(ImagePart(blob, mime))
            pieces.append(f"[image {address} ({mime})]")
            continue
        size = f"{len(blob) * 3 // 4} bytes" if blob is not None else "no data"
        pieces.append(f"[binary resource {address} ({mime or 'unknown type'}, {size}): not shown]")
    if len(contents) > MAX_CONTENTS:
        pieces.append(f"({len(contents) - MAX_CONTENTS} more content items left out)")
    text = "\n".join(pieces) if pieces else f"(the resource {uri[:300]} is empty)"
    return ResourceText(bounded(text, MAX_READ_CHARS, "the resource"), images)
