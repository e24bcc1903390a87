"""What a web_fetch call does (docs/tools.md "web_fetch"): one GET, redirects followed here one by one (each
Location parsed, its scheme and address checked like the first URL: tools/web/request.py, tools/web/netguard.py), the
body read up to a cap, the whole fetch bounded in time; then HTML becomes Markdown, text and JSON pass as they
are, other types are refused (tools/web/page.py), and the model is told the final URL and the title.
"""

from __future__ import annotations

import ssl
from typing import Protocol

import anyio
import httpx

from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.tools.common import human_size
from ama_acp.tools.context import redirect_judge, result_chars
from ama_acp.tools.web.netguard import AllowList
from ama_acp.tools.web.origin import Origin, url_origin
from ama_acp.tools.web.page import SNIFF_BYTES, Page, decode, kind_of, looks_binary, media_type, to_page
from ama_acp.tools.web.request import (
    Resolver,
    addresses_for,
    pinned_get,
    read_body,
    system_resolver,
    url_problem,
)

MAX_REDIRECTS = 10
ERROR_BODY_BYTES = 64 * 1024  # read of an error page, of which the model sees the start
ERROR_BODY_CHARS = 2_000
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class FetchSettings(Protocol):
    """What a fetch needs of its tool (tools/web/fetch.py `WebFetchTool`)."""

    timeout: float
    max_bytes: int
    max_chars_limit: int  # the schema's maximum of `max_chars`, which the model is told when a page is cut
    resolver: Resolver | None
    tls: ssl.SSLContext | None

    @property
    def allow(self) -> AllowList: ...


async def fetch(tool: FetchSettings, url_text: str, max_chars: int, raw: bool) -> ToolResult:
    try:
        url = httpx.URL(url_text.strip())
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ToolError(f"`url` is not a valid URL: {exc}.") from None
    try:
        with anyio.fail_after(tool.timeout):
            return await _Fetch(tool, max_chars, raw).follow(url)
    except TimeoutError:
        raise ToolError(f"Fetching {url} took longer than {tool.timeout:g} s and was stopped.") from None
    except (httpx.HTTPError, httpx.InvalidURL, ssl.SSLError) as exc:  # a transport failure, a malformed response
        raise ToolError(f"Fetching {url} failed: {_said(exc)}.") from None


class _Fetch:
    def __init__(self, tool: FetchSettings, max_chars: int, raw: bool) -> None:
        self.tool = tool
        self.max_chars = max_chars
        self.raw = raw
        self.chain: list[httpx.URL] = []  # every URL asked for, the first one first
        self.origins: set[Origin | None] = set()  # those the call may reach: its own, and redirects approved

    async def follow(self, url: httpx.URL) -> ToolResult:
        while True:
            problem = url_problem(url)
            if problem is not None:
                where = f" (redirected to from {self.chain[-1]})" if self.chain else ""
                raise ToolError(f"Cannot fetch {str(url)[:300]}{where}: {problem}.")
            await self._judged(url)
            self.chain.append(url)
            addresses = await addresses_for(url, self.tool.allow, self.tool.resolver or system_resolver)
            async with pinned_get(url, addresses, self._tls(url.scheme == "https"), self.tool.timeout) as response:
                location = response.headers.get("location")
                if response.status_code in REDIRECTS and location:
                    url = _next_url(url, location, self.chain)
                    continue
                return await self._result(response)

    async def _judged(self, url: httpx.URL) -> None:
        """A redirect to an origin this call was not approved for is judged as a fetch of its own (the rules, the
        mode, the "always" answers, a question) before anything is looked up or sent there."""
        origin = url_origin(str(url))
        if not self.chain:
            self.origins.add(origin)  # the call's own URL: approved before the tool ran
            return
        if origin in self.origins:
            return
        judge = redirect_judge.get()
        came_from = self.chain[-1]
        why = "nobody can be asked about it" if judge is None else await judge(str(url), str(came_from))
        if why is not None:
            raise ToolError(f"{came_from} redirects to {str(url)[:300]}, another site, which was not fetched: {why}")
        self.origins.add(origin)

    def _tls(self, needed: bool) -> ssl.SSLContext:
        if not needed:
            # An http hop never uses TLS: a context that verifies and trusts nothing, rather than loading the
            # certificate bundle (~0.1 s) for no use.
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.tool.tls is None:
            self.tool.tls = httpx.create_ssl_context()  # certifi's roots, as the providers use
        return self.tool.tls

    async def _result(self, response: httpx.Response) -> ToolResult:
        url = self.chain[-1]
        mime, charset = media_type(response.headers.get("content-type"))
        if response.status_code >= 400:
            return await _error_page(response, url, mime, charset)
        if kind_of(mime, b"x") is None:  # refused on its type alone; a vague or absent type waits for the bytes
            size = response.headers.get("content-length", "")
            told = f", {human_size(int(size))}" if size.isdigit() and len(size) < 16 else ""
            raise ToolError(
                f"{url} is {mime}{told}: web_fetch reads only HTML, text and JSON, so it was not downloaded."
            )
        body = await read_body(response, self.tool.max_bytes, lambda head: kind_of(mime, head) is None)
        kind = kind_of(mime, body.data[:SNIFF_BYTES])
        if kind is None:
            raise ToolError(
                f"{url} is binary data ({mime or 'no content type'}), not text: web_fetch reads only "
                "HTML, text and JSON."
            )
        text = decode(body.data, charset, kind)
        if looks_binary(text):
            raise ToolError(f"{url} says it is {mime or 'text'} but holds binary data (NUL bytes); not shown.")
        page = await to_page(text, kind, str(url), self.raw)
        head = self._head(page, mime, kind)
        if body.cut:
            cap = human_size(self.tool.max_bytes)
            head.append(f"[The body is longer than {cap}: only its first {cap} were read.]")
        return ToolResult(text="\n".join(head) + "\n\n" + self._clipped(page.text))

    def _head(self, page: Page, mime: str, kind: str) -> list[str]:
        lines = [f"URL: {self.chain[-1]}"]
        if len(self.chain) > 1:
            lines.append(f"Redirected from: {self.chain[0]}")
        if page.title:
            lines.append(f"Title: {page.title}")
        shown_as = ""
        if kind == "html":
            shown_as = " (its HTML source)" if self.raw or not page.converted else " (as Markdown)"
        lines.append(f"Content-Type: {mime or 'not given'}{shown_as}")
        if page.note:
            lines.append(f"[{page.note}]")
        return lines

    def _clipped(self, text: str) -> str:
        if not text.strip():
            return "(the page has no text)"
        room = min(self.max_chars, result_chars.get() or self.max_chars)
        if len(text) <= room:
            return text
        return text[:room] + (
            f"\n\n[… {len(text) - room:,} more characters not shown. Call web_fetch again with a larger max_chars "
            f"(at most {self.tool.max_chars_limit:,}) to read on.]"
        )


async def _error_page(response: httpx.Response, url: httpx.URL, mime: str, charset: str | None) -> ToolResult:
    """An HTTP error, with the start of what the page says when it is text (an API's JSON error, say)."""
    head = f"{url} answered HTTP {response.status_code} {response.reason_phrase[:100]}".rstrip() + "."
    kind = kind_of(mime, b"x")
    if kind is None:
        return ToolResult(text=head, is_error=True)
    body = await read_body(response, ERROR_BODY_BYTES)
    text = decode(body.data, charset, kind)
    if looks_binary(text) or not text.strip():
        return ToolResult(text=head, is_error=True)
    shown = (await to_page(text, kind, str(url), False)).text.strip()
    cut = "\n[…]" if len(shown) > ERROR_BODY_CHARS else ""
    return ToolResult(text=f"{head} The page says:\n\n{shown[:ERROR_BODY_CHARS]}{cut}", is_error=True)


def _next_url(url: httpx.URL, location: str, chain: list[httpx.URL]) -> httpx.URL:
    """Where a redirect leads, parsed here (it is the server's text, any text); loops and long chains stop."""
    try:
        target = url.join(location.strip()).copy_with(fragment=None)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ToolError(f"{url} redirects to {location[:200]!r}, which is not a valid URL ({exc}).") from None
    if any(str(target) == str(seen) for seen in chain):
        hops = " → ".join(str(u) for u in [*chain, target])
        raise ToolError(f"Redirect loop: {hops[:1000]}.")
    if len(chain) > MAX_REDIRECTS:
        raise ToolError(
            f"{chain[0]} redirected more than {MAX_REDIRECTS} times (last to {str(target)[:300]}); stopped."
        )
    return target


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split()).rstrip(".")
    return text[:300] or type(exc).__name__
