"""The editor's MCP servers (a script, not a test): python tests/bench/bench_mcp.py

Four figures, each against a baseline measured in the same run:

1. `session/new` with three stdio MCP servers against `session/new` with none, in the same warm ama process
   (median of 7 each): the servers start in the background, so the answer should not wait for them.
2. The first model request after an open with three servers: the time from `session/new` to the request
   reaching the model server, against the time the slowest of the three takes to become ready on its own
   (measured with the MCP SDK client directly, same machine, same run).
3. One MCP tool call through ama — `tool_call` to its final `tool_call_update` at the client — against the
   same `echo` called directly with the MCP SDK's client over stdio (median of 20 each).
4. Idle memory: RSS of ama after a session without servers (and whether the MCP SDK's modules are mapped)
   against one with three servers.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, clean_env, local_config
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[2]

ROUNDS = 7
CALLS = 20
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def stdio_server(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        # The SDK's server, as docs/performance.md measured.
        "args": ["-m", "tests.support.mcp_servers.stdio_server", "--sdk"],
        "env": [{"name": "PYTHONPATH", "value": str(ROOT)}],
    }


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def sdk_mapped(pid: int) -> bool:
    """pydantic_core (the MCP SDK's model layer) is a shared object: mapped only once the SDK is imported."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


async def direct_calls() -> tuple[float, list[float]]:
    """(seconds to start a server and list its tools, durations of CALLS echo calls) with the SDK's client."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.support.mcp_servers.stdio_server", "--sdk"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    durations = []
    async with AsyncExitStack() as stack:
        t0 = time.perf_counter()
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        await session.list_tools()
        start = time.perf_counter() - t0
        for i in range(CALLS):
            t = time.perf_counter()
            await session.call_tool("echo", {"text": f"call {i}"})
            durations.append(time.perf_counter() - t)
    return start, durations


def call_durations(conn: AgentProcess, sid: str) -> list[float]:
    """From each `tool_call` to its final `tool_call_update`, as the client received them."""
    started: dict[str, float] = {}
    out = []
    for entry in conn.transcript:
        if entry.direction != "in" or '"session/update"' not in entry.raw:
            continue
        msg = json.loads(entry.raw)
        update = msg.get("params", {}).get("update", {})
        if msg["params"].get("sessionId") != sid:
            continue
        kind, cid = update.get("sessionUpdate"), update.get("toolCallId")
        if kind == "tool_call":
            started[cid] = entry.time
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed") and cid in started:
            out.append(entry.time - started.pop(cid))
    return out


async def through_ama(tmp: Path) -> dict[str, Any]:
    ama = Ama(tmp)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url))
        calls = [{"id": f"e{i}", "name": "mcp__s0__echo", "arguments": {"text": f"call {i}"}} for i in range(CALLS)]
        llm.enqueue({"tool_calls": calls}, {"text": "done"})
        conn = AgentProcess(
            ama.command(), ClientOptions(), cwd=str(ama.workspace), env=clean_env(tmp, ENV), stderr=str(ama.stderr)
        )
        async with conn:
            await conn.initialize()
            cwd = str(ama.workspace)
            await conn.request("session/new", {"cwd": cwd, "mcpServers": []})  # warm: the session modules
            plain, with_servers = [], []
            for _ in range(ROUNDS):
                t = time.perf_counter()
                await conn.request("session/new", {"cwd": cwd, "mcpServers": []})
                plain.append(time.perf_counter() - t)
                t = time.perf_counter()
                sid = session_id(
                    await conn.request(
                        "session/new", {"cwd": cwd, "mcpServers": [stdio_server(f"s{i}") for i in range(3)]}
                    )
                )
                with_servers.append(time.perf_counter() - t)
                await conn.request("session/close", {"sessionId": sid})
            # The first request of a fresh open with three servers.
            t_open = time.monotonic()  # the model server stamps requests with time.monotonic()
            sid = session_id(
                await conn.request("session/new", {"cwd": cwd, "mcpServers": [stdio_server(f"s{i}") for i in range(3)]})
            )
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "echo"}]}
            )
            while not llm.requests:  # noqa: ASYNC110 - the model server records on its own thread
                await asyncio.sleep(0.001)
            first_request = llm.requests[0].time - t_open
            # When the last server became ready: its tools changed the prefix, and ama resent the meter.
            ready = [
                e.time
                for e in conn.transcript
                if e.direction == "in" and '"usage_update"' in e.raw and sid in e.raw and e.time <= llm.requests[0].time
            ]
            last_ready = (ready[-1] - t_open) if ready else float("nan")
            await pending.wait(timeout=60)
            ama_calls = call_durations(conn, sid)
            pid = conn.pid
            rss_servers = rss_kb(pid) if pid else -1
        # A fresh process with a session without servers: idle memory, and is the SDK loaded?
        conn = AgentProcess(
            ama.command(), ClientOptions(), cwd=str(ama.workspace), env=clean_env(tmp, ENV), stderr=str(ama.stderr)
        )
        async with conn:
            await conn.initialize()
            await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []})
            pid = conn.pid
            rss_plain = rss_kb(pid) if pid else -1
            mapped = sdk_mapped(pid) if pid else None
    return {
        "plain": plain,
        "with_servers": with_servers,
        "first_request": first_request,
        "last_ready": last_ready,
        "ama_calls": ama_calls,
        "rss_plain": rss_plain,
        "rss_servers": rss_servers,
        "sdk_mapped_without_servers": mapped,
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


async def main() -> None:
    start, direct = await direct_calls()
    with tempfile.TemporaryDirectory() as tmp:
        r = await through_ama(Path(tmp))
    print(f"bench_mcp — {time.strftime('%Y-%m-%d')} · {os.cpu_count()} cores · Python {sys.version.split()[0]}")
    p, s = statistics.median(r["plain"]), statistics.median(r["with_servers"])
    print(f"session/new, no servers:      {ms(p)} (median of {ROUNDS})")
    print(
        f"session/new, 3 stdio servers: {ms(s)}  ratio {s / p:.2f}  (goal < 10 ms)  {'PASS' if s < 0.010 else 'FAIL'}"
    )
    print(f"one stdio server's own start (SDK client, initialize + tools/list): {ms(start)}")
    print(
        f"session/new → the last of 3 servers ready: {ms(r['last_ready'])}; → the first model request: "
        f"{ms(r['first_request'])} (waits {ms(r['first_request'] - r['last_ready'])} past the slowest server)"
    )
    d, a = statistics.median(direct), statistics.median(r["ama_calls"]) if r["ama_calls"] else float("nan")
    print(f"echo, direct SDK call: {ms(d)}; through ama (tool_call → final update): {ms(a)}")
    print(f"  ama adds {ms(a - d)} per call  (goal < 5 ms)  {'PASS' if a - d < 0.005 else 'FAIL'}")
    print(
        f"idle RSS: {r['rss_plain']:,} KB with no servers (MCP SDK mapped: {r['sdk_mapped_without_servers']}), "
        f"{r['rss_servers']:,} KB after sessions with servers"
    )


if __name__ == "__main__":
    asyncio.run(main())
