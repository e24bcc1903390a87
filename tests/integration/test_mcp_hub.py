"""McpHub against real MCP servers (tests/support/mcp_servers/): stdio subprocesses (the light server, which answers
as the SDK's does), the SDK's server over streamable HTTP and SSE on 127.0.0.1. Every wait polls a condition with
a deadline."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.errors import ToolError
from ama_acp.mcp.config import McpServerSpec, parse_servers
from ama_acp.mcp.hub import McpHub, ServerProblem
from tests.support.json_values import as_object
from tests.support.mcp_servers.http_server import running_http_server

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-never-in-a-log-0123456789"
READY = 60.0  # a loaded 2-core machine can take seconds to start a Python MCP server


def stdio(name: str, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-S", "-m", "tests.support.mcp_servers.stdio_server", *flags],  # -S: the light server needs no site
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }


def specs_of(*items: dict[str, Any]) -> list[McpServerSpec]:
    specs, problems = parse_servers(list(items))
    assert problems == []
    return specs


async def until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = anyio.current_time() + timeout
    while not predicate() and anyio.current_time() < deadline:  # noqa: ASYNC110 - files and pids, no event to wait on
        await anyio.sleep(0.02)
    assert predicate(), f"timed out after {timeout} s waiting for {what}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent's wait is missing.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


class Hub:
    def __init__(self, hub: McpHub, problems: list[ServerProblem], changes: list[int]) -> None:
        self.hub, self.problems, self.changes = hub, problems, changes


@asynccontextmanager
async def running(specs: list[McpServerSpec], **kwargs: Any) -> AsyncIterator[Hub]:
    problems: list[ServerProblem] = []
    changes: list[int] = []

    async def on_problem(problem: ServerProblem) -> None:
        problems.append(problem)

    async def on_tools_changed() -> None:
        changes.append(hub.version)

    kwargs.setdefault("start_timeout", READY)
    hub = McpHub(specs, cwd=str(ROOT), on_problem=on_problem, on_tools_changed=on_tools_changed, **kwargs)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        try:
            yield Hub(hub, problems, changes)
        finally:
            with anyio.fail_after(20):
                await hub.aclose()
            tg.cancel_scope.cancel()


async def test_stdio_tools_are_listed_and_called(tmp_path: Path) -> None:
    specs = specs_of(stdio("files", env={"MCP_TEST_DIR": str(tmp_path)}))
    async with running(specs) as h:
        assert await h.hub.wait_ready(READY) == []
        assert h.hub.servers() == [("files", "ready")]
        tools = {t.name: t for t in h.hub.tools()}
        assert {"echo", "write_note", "slow", "fail", "crash", "image", "resource", "add_tool"} <= set(tools)
        assert tools["echo"].wire_name == "mcp__files__echo" and tools["echo"].read_only
        assert not tools["write_note"].read_only
        schema = tools["echo"].input_schema
        assert schema["type"] == "object" and "text" in as_object(schema["properties"])
        assert h.hub.tool("mcp__files__echo") == tools["echo"]

        echoed = await h.hub.call("mcp__files__echo", {"text": "hello"})
        assert (echoed.text, echoed.is_error) == ("hello", False)
        await h.hub.call("mcp__files__write_note", {"name": "n.txt", "text": "written"})
        assert (tmp_path / "n.txt").read_text() == "written"
        failed = await h.hub.call("mcp__files__fail", {"why": "no such row"})
        assert failed.is_error and failed.text == "no such row"
        image = await h.hub.call("mcp__files__image", {})
        assert [c.kind for c in image.content] == ["text", "image"] and image.content[1].mime_type == "image/png"
        assert image.text == "a pixel\n[image]"
        resource = await h.hub.call("mcp__files__resource", {})
        assert resource.content[0].kind == "resource" and resource.content[0].uri == "file:///notes/readme.txt"
        assert "resource body" in resource.text

        with pytest.raises(ToolError, match="no MCP tool"):
            await h.hub.call("mcp__files__nope", {})
        refused = await h.hub.call("mcp__files__echo", {"wrong": 1})  # the server checks arguments itself
        assert refused.is_error
        assert h.problems == []


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_http_and_sse_servers(tmp_path: Path, transport: str) -> None:
    with running_http_server(transport, env={"MCP_TEST_DIR": str(tmp_path)}) as server:
        kind = {"http": "http", "sse": "sse"}[transport]
        specs = specs_of(
            {"type": kind, "name": "web", "url": server.url, "headers": [{"name": "X-Api-Key", "value": SECRET}]}
        )
        async with running(specs) as h:
            assert await h.hub.wait_ready(READY) == []
            assert (await h.hub.call("mcp__web__echo", {"text": "over http"})).text == "over http"
            await h.hub.call("mcp__web__write_note", {"name": "w.txt", "text": "w"})
            assert (tmp_path / "w.txt").read_text() == "w"
            assert (await h.hub.call("mcp__web__fail", {})).is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_cancelling_a_call_cancels_it_on_the_server(tmp_path: Path, transport: str) -> None:
    """The turn's cancel scope ends the call at once, and the server sees notifications/cancelled (its
    handler is cancelled and leaves a marker)."""
    env = {"MCP_TEST_DIR": str(tmp_path)}
    with running_http_server("http", env=env) as web:
        item = (
            stdio("s", env=env)
            if transport == "stdio"
            else {"type": "http", "name": "s", "url": web.url, "headers": []}
        )
        async with running(specs_of(item)) as h:
            assert await h.hub.wait_ready(READY) == []
            with anyio.CancelScope() as scope:

                async def cancel_once_started() -> None:
                    await until(lambda: (tmp_path / "c.started").exists(), 30, "the slow call to start")
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_once_started)
                    await h.hub.call("mcp__s__slow", {"seconds": 60, "tag": "c"})
            assert scope.cancelled_caught
            await until(lambda: (tmp_path / "c.cancelled").exists(), 30, "the server to see the cancel")
            # The server goes on serving.
            assert (await h.hub.call("mcp__s__echo", {"text": "still here"})).text == "still here"


async def test_a_call_past_its_timeout_fails_and_is_cancelled_on_the_server(tmp_path: Path) -> None:
    async with running(specs_of(stdio("s", env={"MCP_TEST_DIR": str(tmp_path)})), call_timeout=1.0) as h:
        assert await h.hub.wait_ready(READY) == []
        with pytest.raises(ToolError, match="did not answer 'slow' within 1 s"):
            await h.hub.call("mcp__s__slow", {"seconds": 60, "tag": "t"})
        await until(lambda: (tmp_path / "t.cancelled").exists(), 30, "the server to see the cancel")


async def test_a_crash_mid_call_fails_that_call_only(tmp_path: Path) -> None:
    specs = specs_of(stdio("a", env={"MCP_TEST_DIR": str(tmp_path)}), stdio("b"))
    async with running(specs) as h:
        assert await h.hub.wait_ready(READY) == []
        version = h.hub.version
        with pytest.raises(ToolError, match="'a' closed its connection during 'crash'"):
            await h.hub.call("mcp__a__crash", {})
        await until(lambda: h.problems, 30, "the crash to be reported")
        [problem] = h.problems
        assert problem.server == "a" and problem.reason.startswith("crashed")
        assert "crash: exiting mid-call" in problem.stderr_tail
        assert h.hub.servers() == [("a", "failed"), ("b", "ready")]
        assert h.hub.version > version and all(t.server == "b" for t in h.hub.tools())
        assert h.hub.tool("mcp__a__echo") is None
        with pytest.raises(ToolError):
            await h.hub.call("mcp__a__echo", {"text": "x"})
        assert (await h.hub.call("mcp__b__echo", {"text": "fine"})).text == "fine"
        assert len(h.problems) == 1  # reported once


# A test-sized start bound. The good server must be ready well inside it, so it is the conformance suite's stdlib
# MCP server (up in ~0.05 s of CPU; the SDK-based test server takes ~1 s and needed a bound of 8 s under load).
START_BOUND = 3.0
QUICK_SERVER = Path(__file__).resolve().parents[2] / "conformance" / "servers" / "mcp_stdio.py"


async def test_a_server_that_never_starts_is_waited_for_up_to_the_bound_then_failed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    good = {"name": "good", "command": sys.executable, "args": [str(QUICK_SERVER)], "env": []}
    specs = specs_of(good, stdio("stuck", "--never-start", env={"MCP_TEST_PID_FILE": str(pid_file)}))
    async with running(specs, start_timeout=START_BOUND) as h:
        await until(lambda: ("good", "ready") in h.hub.servers(), READY, "the good server")
        assert await h.hub.wait_ready(0.2) == ["stuck"]
        await until(lambda: h.problems, 30, "the start bound to fail the server")
        assert h.problems[0].server == "stuck" and f"did not answer within {START_BOUND:g} s" in h.problems[0].reason
        assert await h.hub.wait_ready(0) == []
        assert ("stuck", "failed") in h.hub.servers()
        pid = int(pid_file.read_text())
        await until(lambda: not pid_alive(pid), 20, "the stuck server's process to be gone")
        assert [t.server for t in h.hub.tools()] == ["good"] * len(h.hub.tools())


async def test_a_server_that_dies_at_start_is_reported_with_its_stderr_tail() -> None:
    async with running(specs_of(stdio("dies", "--die-at-start", "--stderr-lines", "30"))) as h:
        assert await h.hub.wait_ready(READY) == []
        await until(lambda: h.problems, 10, "the problem report")
        [problem] = h.problems
        assert problem.reason == "did not start: the process exited"
        assert len(problem.stderr_tail) == 20
        assert problem.stderr_tail[-1] == "die-at-start: cannot open the database"
        assert problem.stderr_tail[0] == "stderr line 11"
        assert h.hub.servers() == [("dies", "failed")] and h.hub.tools() == []


async def test_a_server_that_sends_garbage_is_failed() -> None:
    async with running(specs_of(stdio("noisy", "--garbage"), stdio("good"))) as h:
        assert await h.hub.wait_ready(READY) == []
        await until(lambda: h.problems, 10, "the problem report")
        assert h.problems[0].server == "noisy" and h.problems[0].reason.startswith("sent garbage")
        assert h.hub.servers() == [("noisy", "failed"), ("good", "ready")]


async def test_a_command_that_does_not_exist() -> None:
    specs = specs_of({"name": "ghost", "command": "/nonexistent/mcp-server", "args": [], "env": []})
    async with running(specs) as h:
        assert await h.hub.wait_ready(READY) == []
        await until(lambda: h.problems, 10, "the problem report")
        assert h.problems[0].reason == "did not start: '/nonexistent/mcp-server' does not exist"  # tools/programs.py


async def test_tools_list_changed_relists_and_bumps_the_version() -> None:
    async with running(specs_of(stdio("s"))) as h:
        assert await h.hub.wait_ready(READY) == []
        version, changes = h.hub.version, len(h.changes)
        assert h.hub.tool("mcp__s__late") is None
        await h.hub.call("mcp__s__add_tool", {"name": "late"})
        await until(lambda: h.hub.tool("mcp__s__late") is not None, 30, "the new tool to be listed")
        assert h.hub.version > version and len(h.changes) > changes
        assert (await h.hub.call("mcp__s__late", {"text": "x"})).text == "late: x"


async def test_aclose_leaves_no_process_and_is_idempotent(tmp_path: Path) -> None:
    pid_file = tmp_path / "stuck.pid"
    specs = specs_of(stdio("s"), stdio("stuck", "--never-start", env={"MCP_TEST_PID_FILE": str(pid_file)}))
    hub = McpHub(specs, cwd=str(ROOT), start_timeout=READY)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        await until(lambda: ("s", "ready") in hub.servers() and pid_file.exists(), READY, "both servers running")
        pid = int((await hub.call("mcp__s__pid", {})).text)
        stuck = int(pid_file.read_text())
        assert pid_alive(pid) and pid_alive(stuck)
        with anyio.fail_after(15):
            await hub.aclose()  # while "stuck" is still starting
        assert hub.servers() == [("s", "closed"), ("stuck", "closed")] and hub.tools() == []
        assert not pid_alive(pid) and not pid_alive(stuck)
        await hub.aclose()
        with pytest.raises(ToolError):
            await hub.call("mcp__s__echo", {"text": "x"})


async def test_aclose_before_run_starts_nothing() -> None:
    hub = McpHub(specs_of(stdio("s")), cwd=str(ROOT))
    await hub.aclose()
    await hub.run()  # returns at once
    assert hub.servers() == [("s", "closed")]


async def test_secrets_stay_out_of_logs_and_ama_keys_out_of_the_server(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ama-own-key-must-not-leak-000")
    monkeypatch.setenv("LANG", "C.UTF-8")
    caplog.set_level(logging.DEBUG)
    specs = specs_of(
        stdio("s", env={"SERVER_TOKEN": SECRET}),
        stdio("dies", "--die-at-start", env={"DB_PASSWORD": SECRET}),
    )
    async with running(specs) as h:
        assert await h.hub.wait_ready(READY) == []
        environ = (await h.hub.call("mcp__s__environ", {})).text.splitlines()
        assert "SERVER_TOKEN" in environ and "PATH" in environ and "LANG=C.UTF-8" in environ
        assert "OPENAI_API_KEY" not in environ
        await until(lambda: h.problems, 10, "the failing server's report")
        assert SECRET not in repr(h.hub.servers()) + repr(specs) + repr(h.problems)
    assert SECRET not in caplog.text
    assert "did not start" in caplog.text  # the log does say what happened


async def test_callbacks_that_raise_do_not_end_the_hub() -> None:
    async def bad_problem(problem: ServerProblem) -> None:
        raise RuntimeError("callback bug")

    async def bad_change() -> None:
        raise RuntimeError("callback bug")

    hub = McpHub(
        specs_of(stdio("dies", "--die-at-start"), stdio("s")),
        cwd=str(ROOT),
        start_timeout=READY,
        on_problem=bad_problem,
        on_tools_changed=bad_change,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        assert await hub.wait_ready(READY) == []
        await until(lambda: hub.servers()[0][1] == "failed", 10, "the failed server")
        assert (await hub.call("mcp__s__echo", {"text": "ok"})).text == "ok"
        await hub.aclose()


async def test_cancelling_the_task_running_the_hub_stops_its_servers() -> None:
    """The session's task group going away (close, ama exiting) stops the servers even without aclose()."""
    hub = McpHub(specs_of(stdio("s")), cwd=str(ROOT), start_timeout=READY)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hub.run)
        assert await hub.wait_ready(READY) == []
        pid = int((await hub.call("mcp__s__pid", {})).text)
        tg.cancel_scope.cancel()
    assert not pid_alive(pid)
    assert hub.servers() == [("s", "closed")] and hub.tools() == []
