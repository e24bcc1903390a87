"""The editor's MCP servers through the real `ama --mode acp` (docs/tools.md "MCP servers"), driven by the official
ACP Python SDK's client: one stdio and one streamable-HTTP server (tests/support/mcp_servers, the MCP SDK's
server side) given in `session/new`; the meter counts their declarations before the first prompt; a turn calls
a tool of each (the writing one asked for permission) and ends `end_turn`; `/context` and the stats list them;
closing the session leaves no server process behind."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.integration.test_official_sdk import open_session, poll, sdk_ama, step, write_config
from tests.support.harness import Ama
from tests.support.llm_server import LLMServer
from tests.support.mcp_servers.http_server import running_http_server

# The official ACP SDK is imported where it is used: its models cost ~1 s of CPU to import, in every pytest
# process that collects this file (test_official_sdk.py does the same).
if TYPE_CHECKING:
    from acp.schema import McpServerStdio

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


def stdio_server(name: str, test_dir: Path, pid_file: Path, *flags: str) -> McpServerStdio:
    from acp.schema import EnvVariable, McpServerStdio

    env = {"PYTHONPATH": str(ROOT), "MCP_TEST_DIR": str(test_dir), "MCP_TEST_PID_FILE": str(pid_file)}
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=["-m", "tests.support.mcp_servers.stdio_server", *flags],
        env=[EnvVariable(name=k, value=v) for k, v in env.items()],
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes only once reaped; ama is not its parent, so check its state
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


async def test_stdio_and_http_servers_from_session_new_through_a_turn_to_close(tmp_path: Path) -> None:
    from acp import text_block
    from acp.schema import HttpMcpServer

    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    pid_file = tmp_path / "stdio.pid"
    with LLMServer() as llm, running_http_server("http", env={"MCP_TEST_DIR": str(notes)}) as web:
        write_config(ama, llm, "openai")
        with ama.config.open("a", encoding="utf-8") as f:  # its echo's readOnlyHint is believed: it runs unasked
            f.write('\n[mcp]\ntrusted_servers = ["files"]\n')
        llm.enqueue(
            {
                "tool_calls": [
                    {"id": "c1", "name": "mcp__files__echo", "arguments": {"text": "hello from stdio"}},
                    {"id": "c2", "name": "mcp__web__write_note", "arguments": {"name": "n.txt", "text": "hi"}},
                ],
                "usage": {"input": 3000, "output": 20},
            },
            {"text": "Both done.", "usage": {"input": 3100, "output": 5}},
        )
        async with sdk_ama(ama, "mcp") as (conn, client, _wire, _process):
            plain = await open_session(conn, client, ama)  # the same ama, a session without servers
            baseline = client.of(plain, "usage_update")[-1]["used"]
            new = await step(
                conn.new_session(
                    cwd=str(ama.workspace.resolve()),
                    mcp_servers=[
                        stdio_server("files", notes, pid_file, "--sdk"),  # a real SDK server: interop
                        HttpMcpServer(type="http", name="web", url=web.url, headers=[]),
                    ],
                ),
                "session/new with two MCP servers",
                timeout=3.0,  # answered without waiting for the servers
            )
            sid = new.session_id
            # Before any prompt, the meter grows by the servers' declarations as they become ready.
            await client.wait_for(
                lambda: any(u["used"] > baseline + 50 for u in client.of(sid, "usage_update")),
                "a usage_update counting the MCP servers' tools",
                timeout=30,
            )
            servers: dict[str, Any] = {}

            async def both_counted() -> bool:
                stats = await step(conn.ext_method("ama/session_stats", {"sessionId": sid}), "stats")
                servers.update({s["name"]: s for s in stats["mcpServers"]})
                return set(servers) == {"files", "web"} and all(s["tools"] > 0 for s in servers.values())

            deadline = time.monotonic() + 30
            while not await both_counted():
                assert time.monotonic() < deadline, f"the stats never counted both servers: {servers}"
                await asyncio.sleep(0.05)  # polling the stats, with the deadline above
            assert all(s["tokens"] > 0 for s in servers.values())

            result = await step(conn.prompt(session_id=sid, prompt=[text_block("use both")]), "the turn", 30)
            assert result.stop_reason == "end_turn"
            # One permission: the writing tool of the HTTP server; the read-only echo ran without asking.
            asked = [p["toolCall"]["toolCallId"] for p in client.permission_requests]
            assert asked == ["c2"], client.permission_requests
            finals = {
                u["toolCallId"]: u["status"]
                for u in client.of(sid, "tool_call_update")
                if u.get("status") in ("completed", "failed")
            }
            assert finals == {"c1": "completed", "c2": "completed"}, finals
            assert (notes / "n.txt").read_text() == "hi"
            first = llm.requests[0].body
            assert {"mcp__files__echo", "mcp__web__write_note"} <= set(tool_names(first))
            tool_results = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
            assert "hello from stdio" in json.dumps(tool_results[0])

            await step(conn.prompt(session_id=sid, prompt=[text_block("/context")]), "/context")
            said = "".join(u["content"]["text"] for u in client.of(sid, "agent_message_chunk"))
            assert "| files |" in said and "| web |" in said

            pid = int(pid_file.read_text())
            assert alive(pid)
            await step(conn.close_session(session_id=sid), "session/close")
            await poll(lambda: not alive(pid), "the stdio server to exit with its session", timeout=10)


async def test_a_server_that_crashes_mid_call_fails_that_call_only_under_the_official_client(tmp_path: Path) -> None:
    from acp import text_block
    from acp.schema import HttpMcpServer

    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    pid_file = tmp_path / "frail.pid"
    with LLMServer() as llm, running_http_server("http", env={"MCP_TEST_DIR": str(notes)}) as web:
        write_config(ama, llm, "openai")
        llm.enqueue(
            {
                "tool_calls": [
                    {"id": "k1", "name": "mcp__frail__crash", "arguments": {}},
                    {"id": "k2", "name": "mcp__web__echo", "arguments": {"text": "still here"}},
                ]
            },
            {"text": "One of them crashed."},
            {"text": "and on"},
        )
        async with sdk_ama(ama, "mcp-crash") as (conn, client, _wire, _process):
            await open_session(conn, client, ama)
            new = await step(
                conn.new_session(
                    cwd=str(ama.workspace.resolve()),
                    mcp_servers=[
                        stdio_server("frail", notes, pid_file),
                        HttpMcpServer(type="http", name="web", url=web.url, headers=[]),
                    ],
                ),
                "session/new",
            )
            sid = new.session_id
            result = await step(conn.prompt(session_id=sid, prompt=[text_block("go")]), "the turn", 40)
            assert result.stop_reason == "end_turn"
            finals = {
                u["toolCallId"]: u["status"]
                for u in client.of(sid, "tool_call_update")
                if u.get("status") in ("completed", "failed")
            }
            assert finals == {"k1": "failed", "k2": "completed"}, finals
            # The crashed server is withdrawn from the next request; the session goes on.
            result = await step(conn.prompt(session_id=sid, prompt=[text_block("more")]), "the next turn", 20)
            assert result.stop_reason == "end_turn"
            names = tool_names(llm.requests[-1].body)
            assert "mcp__web__echo" in names and not any(n.startswith("mcp__frail__") for n in names)
