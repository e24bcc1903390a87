"""Reopening a session with MCP servers gives back the stored figure (issue 22, point 4; docs/context.md
"Session load"), through the real `ama --mode acp`, a real stdio MCP server and the tests' model server.

A response measured the context with the server's tools declared (usage_update U, source `usage`). A load or
resume with the same servers reports U again (E4, D2) while the server is still starting, and nothing more once
it is ready (D1: the tools are those U was measured with) — in the same process and in a new one. When the tools
really differ — the server left out, its tool list changed, or it fails to start — the figure is an estimate
(U9), as a live session's would be.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_mcp_failures_e2e import KEY, configure, open_session, stdio, wait_ready
from tests.support.harness import Ama, run_ama, usage_updates
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

# The test server with one tool more: the same name, another tool list.
WITH_EXTRA_TOOL = """
from tests.support.mcp_servers.light_server import LightServer
server = LightServer()
server.add_echo_tool("extra", "a tool the first run did not have")
server.serve()
"""


def changed_tools(name: str, notes: Path) -> dict[str, Any]:
    server = stdio(name, notes)
    server["args"] = ["-c", WITH_EXTRA_TOOL]
    return server


def source(update: dict[str, Any]) -> str:
    return str(update["_meta"]["ama"]["source"])


class _Since:
    """The usage_updates of a session from a point on (read afresh on each access)."""

    def __init__(self, conn: AgentProcess, sid: str, start: int) -> None:
        self._conn, self._sid, self._start = conn, sid, start

    def all(self) -> list[dict[str, Any]]:
        return usage_updates(self._conn, self._sid)[self._start :]


async def reopen(conn: AgentProcess, method: str, sid: str, ws: str, servers: list[dict[str, Any]]) -> _Since:
    """session/load or session/resume; the usage_updates it brings from then on."""
    before = len(usage_updates(conn, sid))
    await conn.request(method, {"sessionId": sid, "cwd": ws, "mcpServers": servers}, timeout=20)
    await conn.wait_for(lambda: len(usage_updates(conn, sid)) > before, timeout=10)
    return _Since(conn, sid, before)


async def settled(conn: AgentProcess, sid: str, *names: str) -> None:
    """Until the servers are ready, then one more round trip: whatever their readiness made ama send is on the
    wire before the stats' answer (stdout is one ordered stream)."""
    await wait_ready(conn, sid, *names)
    await conn.request("_ama/session_stats", {"sessionId": sid}, timeout=10)


async def close(conn: AgentProcess, sid: str) -> None:
    await conn.request("session/close", {"sessionId": sid}, timeout=20)


async def test_reopening_with_the_same_servers_gives_back_the_stored_figure_and_stays_quiet(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    ws = str(ama.workspace.resolve())
    same = [stdio("files", notes)]
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "measured", "usage": {"input": 3000, "output": 20}})
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, same)
            await wait_ready(conn, sid, "files")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            declared = [t["function"]["name"] for t in llm.requests[0].body["tools"]]
            assert "mcp__files__echo" in declared
            assert declared == sorted(declared)  # seed 001_: declared sorted by name, MCP tools among ama's own
            measured = usage_updates(conn, sid)[-1]
            assert (measured["used"], source(measured)) == (3020, "usage")

            # The same process: close, then load with the same servers.
            await close(conn, sid)
            since = await reopen(conn, "session/load", sid, ws, same)
            assert since.all()[0] == measured
            await settled(conn, sid, "files")
            assert since.all() == [measured], "the meter moved while the same server came up"

        # A new process: load, then resume, each with the same servers.
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            for method in ("session/load", "session/resume"):
                since = await reopen(conn, method, sid, ws, same)
                assert since.all()[0] == measured, method
                await settled(conn, sid, "files")
                assert since.all() == [measured], f"{method}: the meter moved while the same server came up"
                await close(conn, sid)


async def test_reopening_with_other_tools_is_an_estimate(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    ws = str(ama.workspace.resolve())
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "measured", "usage": {"input": 3000, "output": 20}})
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("files", notes)])
            await wait_ready(conn, sid, "files")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            measured = usage_updates(conn, sid)[-1]
            assert (measured["used"], source(measured)) == (3020, "usage")

        async with run_ama(ama, options=ClientOptions(notices=True), env=KEY) as conn:
            await conn.initialize()

            # The server left out: known at once, so the opening report is already the estimate.
            since = await reopen(conn, "session/load", sid, ws, [])
            assert [source(u) for u in since.all()] == ["estimate"]
            assert since.all()[0]["used"] != measured["used"]
            await close(conn, sid)

            # Resume without it: the same.
            since = await reopen(conn, "session/resume", sid, ws, [])
            assert [source(u) for u in since.all()] == ["estimate"]
            await close(conn, sid)

            # Its tool list changed: the stored figure while it starts, then one estimate once its tools are known.
            since = await reopen(conn, "session/load", sid, ws, [changed_tools("files", notes)])
            await settled(conn, sid, "files")
            sources = [source(u) for u in since.all()]
            assert sources in (["usage", "estimate"], ["estimate"]), sources
            await close(conn, sid)

            # It fails to start: its tools are gone for real, so an estimate too.
            since = await reopen(conn, "session/resume", sid, ws, [stdio("files", notes, "--die-at-start")])
            await conn.wait_for(lambda: source(since.all()[-1]) == "estimate", timeout=20)
            sources = [source(u) for u in since.all()]
            assert sources in (["usage", "estimate"], ["estimate"]), sources
            await close(conn, sid)
