"""MCP listings the server pages (mcp/connection.py `list_tools`, `list_prompts`): every page while the server
gives a cursor, at most `max_pages` of a cursor that never ends, and prompts no further than `enough`."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types

from ama_acp.mcp.connection import list_prompts, list_tools


class _Pages:
    """A server's listing in pages of two; `endless`: every page names a next one."""

    def __init__(self, total: int, endless: bool = False) -> None:
        self.total, self.endless = total, endless
        self.asked: list[int] = []  # the first entry of each page asked for

    def _page(self, params: types.PaginatedRequestParams | None, make: Any) -> dict[str, Any]:
        start = int(params.cursor) if params is not None and params.cursor else 0
        self.asked.append(start)
        names = [f"n{i}" for i in range(start, min(start + 2, self.total))] if not self.endless else ["n", "n"]
        more = self.endless or start + 2 < self.total
        return {"entries": [make(n) for n in names], "next_cursor": str(start + 2) if more else None}

    async def list_tools(self, params: types.PaginatedRequestParams | None = None) -> types.ListToolsResult:
        page = self._page(params, lambda n: types.Tool(name=n, input_schema={"type": "object"}))
        return types.ListToolsResult(tools=page["entries"], next_cursor=page["next_cursor"])

    async def list_prompts(self, params: types.PaginatedRequestParams | None = None) -> types.ListPromptsResult:
        page = self._page(params, lambda n: types.Prompt(name=n))
        return types.ListPromptsResult(prompts=page["entries"], next_cursor=page["next_cursor"])


def test_every_page_is_read_while_the_server_gives_a_cursor() -> None:
    server = _Pages(5)
    tools = anyio.run(lambda: list_tools(server))  # type: ignore[arg-type]
    assert [t["name"] for t in tools] == ["n0", "n1", "n2", "n3", "n4"] and server.asked == [0, 2, 4]
    assert tools[0]["inputSchema"] == {"type": "object"}  # by alias, as JSON


def test_a_cursor_that_never_ends_is_read_max_pages_times() -> None:
    server = _Pages(0, endless=True)
    tools = anyio.run(lambda: list_tools(server, max_pages=3))  # type: ignore[arg-type]
    assert len(tools) == 6 and len(server.asked) == 3


def test_prompts_are_read_no_further_than_enough() -> None:
    server = _Pages(100)
    prompts = anyio.run(lambda: list_prompts(server, enough=3))  # type: ignore[arg-type]
    assert [p["name"] for p in prompts] == ["n0", "n1", "n2", "n3"] and server.asked == [0, 2]
