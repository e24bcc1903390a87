"""web_fetch: a web page for the model, as Markdown (docs/tools.md "web_fetch").

This module is the declaration the model sees (schema, title, kind, deadline); the fetch itself is
tools/web/fetcher.py, imported with httpx when the first call runs (start-up time). Its kind is `fetch`: every
mode but Full access asks the person first (permissions.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from ama_acp.tools.base import JSONObject, Location, ToolArgs, ToolKind, ToolResult
from ama_acp.tools.common import arg_str, closed_object, short, validate
from ama_acp.tools.context import ToolContext

if TYPE_CHECKING:
    import ssl

    from ama_acp.tools.web.netguard import AllowList
    from ama_acp.tools.web.request import Resolver

TIMEOUT = 30.0  # seconds for the whole fetch: every lookup, connection, redirect and the body
MAX_BYTES = 5 * 1024 * 1024  # of the body, decompressed; the rest is not downloaded
DEFAULT_CHARS = 50_000
MAX_CHARS = 200_000
TITLE_URL_CHARS = 2_000  # of the URL in the title (what the person is asked about); past it, cut with a marker


class FetchArgs(TypedDict):
    url: str
    max_chars: int  # the default filled in
    raw: NotRequired[bool]


class WebFetchTool:
    name = "web_fetch"
    kind: ToolKind = "fetch"
    max_chars_limit = MAX_CHARS
    description = (
        "Fetch a web page (http or https URL) and get it as Markdown: scripts, styles and navigation are dropped, "
        "links made absolute. Text and JSON come back as they are; images, PDFs and other binary types are "
        "refused. Redirects are followed. The result starts with the final URL and the page title. Use it for "
        "documentation, issues or pages the person points you at; the person may be asked first. "
        "Local and private network addresses are refused unless the person allowed them."
    )
    parameters: JSONObject = closed_object(
        {
            "url": {"type": "string", "description": "The full URL, with http:// or https://."},
            "max_chars": {
                "type": "integer",
                "minimum": 1_000,
                "maximum": MAX_CHARS,
                "default": DEFAULT_CHARS,
                "description": f"At most this many characters of the page are returned (default {DEFAULT_CHARS:,}).",
            },
            "raw": {
                "type": "boolean",
                "description": "Return an HTML page's source instead of Markdown (default false).",
            },
        },
        "url",
    )

    def __init__(
        self,
        allow_hosts: list[str] | None = None,
        *,
        timeout: float = TIMEOUT,
        max_bytes: int = MAX_BYTES,
        resolver: Resolver | None = None,  # None: the system's (tests give their own: no DNS, no network)
    ) -> None:
        self.allow_hosts = list(allow_hosts or [])
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.resolver = resolver
        self._allow: AllowList | None = None
        self.tls: ssl.SSLContext | None = None  # made by the first https fetch, then kept

    @property
    def allow(self) -> AllowList:
        if self._allow is None:
            from ama_acp.tools.web.netguard import AllowList

            self._allow = AllowList.parse(self.allow_hosts)
        return self._allow

    def title(self, args: ToolArgs) -> str:
        # The whole URL (up to a bound): what its query carries is part of what the person is asked about.
        url = short(arg_str(args, "url"), TITLE_URL_CHARS)
        return f"Fetch {url}" if url else "Fetch a web page"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []

    def deadline_seconds(self, args: object) -> float:
        return self.timeout + 5.0  # its own timeout ends it first, with a clearer message

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        from ama_acp.tools.web.fetcher import fetch

        checked = validate(self.parameters, args, FetchArgs)
        return await fetch(self, checked["url"], checked["max_chars"], bool(checked.get("raw")))
