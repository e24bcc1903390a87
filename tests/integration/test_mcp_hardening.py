"""The parts of MCP hardening a real-pipe test cannot reach cheaply (docs/tools.md "MCP servers"): the line
splitter's bound and linearity, what scrub.py keeps out, and `[mcp] call_timeout` reaching the tool registry's
deadline (a 90 s call would make the suite wait 61 s, so the generic deadline is lowered instead)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.mcp.config import parse_servers
from ama_acp.mcp.hub import McpHub
from ama_acp.mcp.lines import LineSplitter, LineTooLong
from ama_acp.mcp.scrub import public_args, public_url, url_secrets
from ama_acp.session.mcp import McpToolAdapter
from ama_acp.tools import registry

ROOT = Path(__file__).resolve().parents[2]


@given(st.lists(st.binary(max_size=50), max_size=30))
def test_lines_come_out_as_split_whatever_the_chunking(chunks: list[bytes]) -> None:
    splitter = LineSplitter(limit=10_000)
    out = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert out == b"".join(chunks).split(b"\n")[:-1]


def test_a_long_line_is_refused_with_a_bounded_buffer_in_linear_time() -> None:
    splitter = LineSplitter()  # 16 MiB
    chunk = b"x" * 65536
    started = time.process_time()
    with pytest.raises(LineTooLong, match="longer than 16 MiB"):
        for _ in range(20_000_000 // len(chunk) + 1):
            splitter.feed(chunk)
    assert splitter.peak <= splitter.limit + len(chunk)
    assert time.process_time() - started < 2.0  # the SDK's re-split took tens of seconds for this


def test_scrub_keeps_credentials_out_of_urls_and_arguments() -> None:
    url = "https://me:hunter2pass@host.example:8443/mcp/sk-abcdefghijklmnop1234/sse?token=qwertyuiop123#x"
    assert public_url(url) == "https://host.example:8443/mcp/[redacted]/sse?…"
    assert {"hunter2pass", "qwertyuiop123", "sk-abcdefghijklmnop1234", url} <= set(url_secrets(url))
    args = [
        "-y",
        "@scope/server",
        "--api-key",
        "VALUE123",
        "--token=tok456",
        "--port",
        "8080",
        "ghp_abcdefghijklmnop12",
    ]
    assert public_args(args) == [
        "-y",
        "@scope/server",
        "--api-key",
        "[redacted]",
        "--token=[redacted]",
        "--port",
        "8080",
        "[redacted]",
    ]
    assert public_args(["tests.support.mcp_servers.stdio_server", "/home/me/project-2024"]) == [
        "tests.support.mcp_servers.stdio_server",
        "/home/me/project-2024",
    ]


@pytest.mark.anyio
async def test_call_timeout_above_the_generic_deadline_reaches_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "DEFAULT_DEADLINE_SECONDS", 1.0)  # stands for the generic 60 s
    specs, _ = parse_servers(
        [
            {
                "name": "h",
                "command": sys.executable,
                "args": ["-m", "tests.support.mcp_servers.hostile_server", "serve"],
                "env": [{"name": "PYTHONPATH", "value": str(ROOT)}, {"name": "HOSTILE_DIR", "value": str(tmp_path)}],
            }
        ]
    )
    hub = McpHub(specs, call_timeout=3.0, start_timeout=60.0, cwd=str(tmp_path))
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        try:
            assert await hub.wait_ready(60) == []
            tool = hub.tool("mcp__h__sleep")
            assert tool is not None
            adapter = McpToolAdapter(tool, hub)
            assert registry.deadline_for(adapter, {}) >= 3.0
            result = await registry.run_with_deadline(adapter, {"seconds": 2}, cast(Any, None))
            assert result.text == "slept 2.0" and not result.is_error
        finally:
            await hub.aclose()
            tg.cancel_scope.cancel()
