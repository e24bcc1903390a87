"""What web_fetch makes of a response body (docs/tools.md "web_fetch"): HTML becomes Markdown without its
scripts, styles and navigation; text and JSON pass as they are; anything else is refused as binary.

HTML → Markdown is html-to-markdown (pyproject.toml says why: measured against markdownify, html2text and
trafilatura). It is imported when the first page is converted, and converts in a worker thread: a big page
takes up to a second, and the turn's cancel must not wait for it. A page nested deeper than NESTING_LIMIT
(tools/web/nesting.py) is converted in a process of its own instead (tools/web/isolated.py): a native crash
there costs that call, not the process every session runs in.
"""

from __future__ import annotations

import codecs
import html
import logging
import re
from dataclasses import dataclass
from typing import Literal

import anyio

from ama_acp.tools.web.isolated import ConversionFailed, convert_apart
from ama_acp.tools.web.markdown import markdown_of
from ama_acp.tools.web.nesting import NESTING_LIMIT, nesting

log = logging.getLogger(__name__)

Kind = Literal["html", "text", "json"]

_HTML = {"text/html", "application/xhtml+xml"}
_JSON = {"application/json", "application/ld+json", "application/x-ndjson", "application/geo+json"}
# Types that are text although not text/*: code and data formats a model reads.
_TEXT = {
    "application/javascript", "application/ecmascript", "application/x-javascript", "application/xml",
    "application/yaml", "application/x-yaml", "application/toml", "application/x-sh", "application/sql",
    "application/graphql", "application/csv", "application/x-www-form-urlencoded", "image/svg+xml",
}  # fmt: skip
SNIFF_BYTES = 8192


def media_type(header: str | None) -> tuple[str, str | None]:
    """A Content-Type header as (type/subtype in lower case, charset or None); ("", None) when absent."""
    if not header:
        return "", None
    parts = header.split(";")
    mime = parts[0].strip().lower()
    charset = None
    for p in parts[1:]:
        name, _, value = p.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip("\"'").strip() or None
    return mime, charset


def kind_of(mime: str, head: bytes) -> Kind | None:
    """How to read a body of this type (None: binary, refused); `head` (its first bytes) decides when the
    server names no type or a vague one."""
    if mime in _HTML:
        return "html"
    if mime in _JSON or mime.endswith("+json"):
        return "json"
    if mime.startswith("text/") or mime in _TEXT or mime.endswith("+xml"):
        return "text"
    if mime in ("", "application/octet-stream", "binary/octet-stream", "unknown/unknown"):
        return _sniff(head)
    return None


def _sniff(head: bytes) -> Kind | None:
    if b"\0" in head:
        return None
    start = head.lstrip()[:256].lower()
    if start.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "html"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sniffed bytes
            return None
    return "text"


def looks_binary(text: str) -> bool:
    """Text that holds NUL characters is not text, whatever its header says."""
    return "\0" in text[:SNIFF_BYTES]


_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]{1,40})""", re.I)


def decode(data: bytes, charset: str | None, kind: Kind) -> str:
    """The body as text: a BOM first, then the header's charset, then an HTML page's own <meta charset>,
    else UTF-8; undecodable bytes become U+FFFD, and an encoding name Python does not know counts as absent."""
    for bom, enc in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(enc, "replace")
    names = [charset] if charset else []
    if kind == "html":
        found = _META_CHARSET.search(data[:2048])
        if found:
            names.append(found.group(1).decode("ascii"))
    for name in names:
        try:
            codec = codecs.lookup(name)
            if not getattr(codec, "_is_text_encoding", True):  # rot13, base64, …: not a page's charset
                continue
            return data.decode(codec.name, "replace")
        except (LookupError, ValueError, TypeError):
            continue
    return data.decode("utf-8", "replace")


_WS = re.compile(r"\s+")


def html_title(page: str) -> str | None:
    """The page's <title>, as a browser's tab shows it (entities decoded, white space collapsed), or None.
    Searched with str.find only: linear, whatever the page holds."""
    lower = page[:262_144].lower()
    start = lower.find("<title")
    while start != -1 and lower[start + 6 : start + 7] not in (">", " ", "\t", "\n", "\r", "/"):
        start = lower.find("<title", start + 6)  # <titlebar> is not <title>
    if start == -1:
        return None
    open_end = lower.find(">", start)
    close = lower.find("</title", open_end)
    if open_end == -1 or close == -1:
        return None
    title = _WS.sub(" ", html.unescape(page[open_end + 1 : close])).strip()
    return title[:300] or None


@dataclass(frozen=True)
class Page:
    text: str
    title: str | None
    note: str | None = None  # said to the model before the text, when the conversion did not go as planned
    converted: bool = True  # False: an HTML page's source stands in for its Markdown


async def to_page(text: str, kind: Kind, url: str, raw: bool) -> Page:
    if kind != "html":
        return Page(text, None)
    title = html_title(text)
    if raw:
        return Page(text, title)
    try:
        markdown = await anyio.to_thread.run_sync(_converted_here, text, url, abandon_on_cancel=True)
    except Exception as exc:  # the library's own errors (InvalidInputError, …): the source is better than nothing
        note = f"The page could not be turned into Markdown ({str(exc)[:200]}); its HTML follows."
        return Page(text, title, note, converted=False)
    if markdown is not None:
        return Page(markdown, title)
    deep = f"The page nests its elements more than {NESTING_LIMIT:,} levels deep"
    try:
        markdown = await convert_apart(text, url)
    except ConversionFailed as exc:
        log.warning("web_fetch: %s failed to convert in its own process: %s", url[:300], exc.reason)
        return Page(
            text, title, f"{deep} and could not be turned into Markdown ({exc.reason}); its HTML follows.", False
        )
    return Page(markdown.strip() + "\n", title, f"{deep}: it was turned into Markdown in a separate process.")


def _converted_here(page: str, url: str) -> str | None:
    """The page's Markdown, or None when it nests too deep to convert in this process. A page with no more
    tags than the limit cannot nest deeper: not scanned."""
    if page.count("<") > NESTING_LIMIT and nesting(page).depth > NESTING_LIMIT:
        return None
    return markdown_of(page, url)
