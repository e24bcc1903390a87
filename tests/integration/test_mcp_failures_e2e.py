"""The editor's MCP servers through the real `ama --mode acp`, every path but the happy one (docs/tools.md
"MCP servers"; the happy path is test_mcp_e2e.py): a server that never starts or dies at start, one that
crashes mid-call, a cancel during a slow call, permissions by mode and "always", `tools/list_changed`, no
server left after exit (EOF, SIGTERM, session/delete), load and resume with another list of servers,
secrets kept out of the session file and the log, images and resources.

Real MCP servers (tests/support/mcp_servers: the light one over stdio, which answers as the SDK's does, and the
SDK's server side over streamable HTTP), ama's own client, the tests' model server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, agent_text, local_config, permission_asks, run_ama
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer
from tests.support.mcp_servers.http_server import HttpServer, running_http_server
from tests.support.mcp_servers.toolset import PIXEL_PNG
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
KEY = {"LOCAL_TEST_KEY": "k" * 12}
ENV_SECRET = "sk-abcdefghijklmnop1234"
HEADER_SECRET = "sk-headervalue-5678abcdefgh"
# Values of no known key shape (a database password, a private header): the log's and the session file's
# redaction of key-shaped strings cannot hide these, only ama's keeping values out of what it writes.
PLAIN_ENV_SECRET = "plain-env-value-7781"
PLAIN_HEADER_SECRET = "plain-header-value-4419"


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One streamable-HTTP server for the module (its tools are stateless but for add_tool, unused here)."""
    notes = tmp_path_factory.mktemp("web-notes")
    with running_http_server("http", env={"MCP_TEST_DIR": str(notes)}) as server:
        yield server


def stdio(
    name: str, test_dir: Path, *flags: str, pid_file: Path | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    variables = {"PYTHONPATH": str(ROOT), "MCP_TEST_DIR": str(test_dir)}
    if pid_file is not None:
        variables["MCP_TEST_PID_FILE"] = str(pid_file)
    variables.update(env or {})
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-S", "-m", "tests.support.mcp_servers.stdio_server", *flags],  # -S: the light server needs no site
        "env": [{"name": k, "value": v} for k, v in variables.items()],
    }


# A server with a helper process, as servers started through a wrapper (npx, uvx, a shell script) have: the
# helper never reads stdin, so only ama stopping the server's whole process group ends it. The server itself
# is the test server, run in the same process after the helper is started.
WITH_HELPER = """
import os, runpy, subprocess, sys
subprocess.Popen(
    [sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)",
     os.environ["HELPER_PID_FILE"]],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
sys.argv = ["stdio_server"]
runpy.run_module("tests.support.mcp_servers.stdio_server", run_name="__main__")
"""


def stdio_with_helper(name: str, test_dir: Path, pid_file: Path, helper_pid_file: Path) -> dict[str, Any]:
    server = stdio(name, test_dir, pid_file=pid_file, env={"HELPER_PID_FILE": str(helper_pid_file)})
    server["args"] = ["-c", WITH_HELPER]
    return server


def written(f: Path) -> Callable[[], str | bool]:
    return lambda: f.exists() and f.read_text()


def pids_of(*files: Path) -> list[int]:
    return [int(poll_until(written(f), 10, f"{f.name} to be written")) for f in files]


def wait_gone(pids: list[int], what: str, timeout: float = 10.0) -> None:
    try:
        poll_until(lambda: not any(alive(pid) for pid in pids), timeout, what)
    except AssertionError as exc:
        left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120] for pid in pids if alive(pid)}
        raise AssertionError(f"{exc}; still running: {left}") from None


@contextmanager
def no_stray(pids: list[int]) -> Iterator[None]:
    """Whatever the test finds, no process of it outlives the test."""
    try:
        yield
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def http(name: str, server: HttpServer, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "name": name,
        "url": server.url,
        "headers": [{"name": k, "value": v} for k, v in (headers or {}).items()],
    }


def configure(ama: Ama, llm: LLMServer, *, top: str = "", tail: str = "") -> None:
    ama.config.write_text(local_config(llm.openai_url, top=top, tail=tail), encoding="utf-8")


def call(cid: str, tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"id": cid, "name": tool, "arguments": arguments}


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def tool_message(body: dict[str, Any], call_id: str) -> str:
    return str(next(m["content"] for m in body["messages"] if m.get("role") == "tool" and m["tool_call_id"] == call_id))


def finals(conn: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    return {
        u["toolCallId"]: u
        for u in conn.updates_for(sid, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    }


def statuses(conn: AgentProcess, sid: str) -> dict[str, str]:
    return {cid: u["status"] for cid, u in finals(conn, sid).items()}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as gone (whoever its parent is now reaps it)
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


async def open_session(conn: AgentProcess, ama: Ama, servers: list[dict[str, Any]]) -> str:
    await conn.initialize()
    sid = session_id(await conn.new_session(ama.workspace, servers, timeout=10))
    assert isinstance(sid, str)
    return sid


async def server_tools(conn: AgentProcess, sid: str) -> dict[str, int]:
    stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}, timeout=10))
    return {s["name"]: s["tools"] for s in stats.get("mcpServers", [])}


async def wait_ready(conn: AgentProcess, sid: str, *names: str, timeout: float = 30.0) -> None:
    """Until the stats count tools for every server named (each is ready)."""
    deadline = time.monotonic() + timeout
    while True:
        counted = await server_tools(conn, sid)
        if all(counted.get(name, 0) > 0 for name in names):
            return
        assert time.monotonic() < deadline, f"servers {names} not ready after {timeout} s: {counted}"
        await anyio.sleep(0.05)  # polling the stats, with the deadline above


async def prompt(conn: AgentProcess, sid: str, text: str = "go") -> str:
    result = await conn.prompt(sid, text, timeout=30)
    return str(result["stopReason"])


# --- 1. never starts ----------------------------------------------------------------------------------------


async def test_a_server_that_never_starts_is_left_out_after_start_timeout_and_told_once_as_a_notice(
    tmp_path: Path,
) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        configure(ama, llm, tail="[mcp]\nstart_timeout = 1\n")
        llm.enqueue({"text": "first"}, {"text": "second"})
        async with run_ama(ama, options=ClientOptions(notices=True), env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("good", notes), stdio("stuck", notes, "--never-start")])
            await wait_ready(conn, sid, "good")  # so the wait measured below is the stuck server's alone
            sent = time.monotonic()
            assert await prompt(conn, sid) == "end_turn"
            waited = llm.requests[0].time - sent
            assert 0.9 <= waited < 5.0, f"the first request waited {waited:.2f} s for a 1 s start_timeout"
            names = tool_names(llm.requests[0].body)
            assert "mcp__good__echo" in names
            assert not [n for n in names if n.startswith("mcp__stuck__")], names

            sent = time.monotonic()
            assert await prompt(conn, sid, "again") == "end_turn"
            assert llm.requests[1].time - sent < 0.9, "the second request waited for the stuck server again"
            told = [n for n in conn.updates_for(sid, "notice") if "stuck" in json.dumps(n)]
            assert len(told) == 1, told
            assert "stuck" not in agent_text(conn, sid)  # the client shows notices: no agent message as well


# --- 2. dies at start ---------------------------------------------------------------------------------------


async def test_a_server_that_dies_at_start_is_told_once_with_its_stderr_in_the_log_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "still working"})
        async with run_ama(ama, env=KEY) as conn:  # no notices: the person is told in an agent message
            sid = await open_session(conn, ama, [stdio("dead", notes, "--die-at-start", "--stderr-lines", "3")])
            await conn.wait_for(lambda: "'dead'" in agent_text(conn, sid), timeout=30)
            # The server's stderr in ama's log (waited for on the event loop ama runs on).
            await conn.wait_for(lambda: "die-at-start: cannot open the database" in ama.log_text(), timeout=10)
            log = ama.log_text()
            assert "stderr line 2" in log
            assert await prompt(conn, sid) == "end_turn"
            assert not [n for n in tool_names(llm.requests[0].body) if n.startswith("mcp__dead__")]
            assert agent_text(conn, sid).count("'dead'") == 1, agent_text(conn, sid)
            assert "still working" in agent_text(conn, sid)


# --- 3. crash mid-call --------------------------------------------------------------------------------------


async def test_a_server_that_crashes_mid_call_fails_that_call_only_and_loses_its_tools(
    tmp_path: Path, web: HttpServer
) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {"tool_calls": [call("c1", "mcp__frail__crash")]},
            {"tool_calls": [call("c2", "mcp__web__echo", text="still here")]},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("frail", notes), http("web", web)])
            await wait_ready(conn, sid, "frail", "web")
            assert await prompt(conn, sid) == "end_turn"
            assert statuses(conn, sid) == {"c1": "failed", "c2": "completed"}
            assert "mcp__frail__crash" in tool_names(llm.requests[0].body)
            after = tool_names(llm.requests[1].body)
            assert not [n for n in after if n.startswith("mcp__frail__")], after
            assert "mcp__web__echo" in after
            assert "still here" in tool_message(llm.requests[2].body, "c2")


# --- 4. cancel during a slow call ---------------------------------------------------------------------------


async def test_cancel_during_a_slow_mcp_call_cancels_it_on_the_server(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"tool_calls": [call("c1", "mcp__s__slow", seconds=60, tag="t4")]})
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("s", notes)])
            await wait_ready(conn, sid, "s")
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: (notes / "t4.started").exists(), timeout=30)
            await conn.cancel(sid)
            result = as_object(await pending.wait(timeout=10))
            assert result["stopReason"] == "cancelled"
            assert statuses(conn, sid) == {"c1": "failed"}
            await conn.wait_for(lambda: (notes / "t4.cancelled").exists(), timeout=10)
            llm.enqueue({"text": "next"})
            assert await prompt(conn, sid, "again") == "end_turn"


# --- 5. permissions -----------------------------------------------------------------------------------------


async def test_read_only_refuses_writing_mcp_tools_and_always_covers_one_tool_of_one_server(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        # The server is trusted, so its echo's readOnlyHint is believed (test_mcp_hostile_e2e.py: untrusted).
        configure(ama, llm, top='mode = "read_only"', tail='[mcp]\ntrusted_servers = ["s"]\n')
        llm.enqueue(
            {
                "tool_calls": [
                    call("r1", "mcp__s__write_note", name="ro.txt", text="x"),
                    call("r2", "mcp__s__echo", text="ro ok"),
                ]
            },
            {"text": "read only done"},
            {"tool_calls": [call("m1", "mcp__s__write_note", name="a.txt", text="a")]},
            {"tool_calls": [call("m2", "mcp__s__write_note", name="b.txt", text="b"), call("m3", "mcp__s__fail")]},
            {"text": "manual done"},
        )
        async with run_ama(ama, options=ClientOptions(permission="allow_always"), env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("s", notes)])
            await wait_ready(conn, sid, "s")
            assert await prompt(conn, sid) == "end_turn"
            assert conn.permission_log == []  # refused by the mode, not asked
            assert statuses(conn, sid) == {"r1": "failed", "r2": "completed"}
            assert not (notes / "ro.txt").exists()
            assert "ro ok" in tool_message(llm.requests[1].body, "r2")

            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "manual"})
            assert await prompt(conn, sid, "now write") == "end_turn"
            asked = [p["toolCall"]["toolCallId"] for p, _ in permission_asks(conn)]
            # "Always" on write_note covered its second call, not the server's other non-read tool.
            assert asked == ["m1", "m3"], asked
            assert (notes / "a.txt").read_text() == "a" and (notes / "b.txt").read_text() == "b"


# --- 6. tools/list_changed ----------------------------------------------------------------------------------


async def test_a_tools_list_changed_reaches_the_next_request_and_resends_the_meter(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    holder: dict[str, Any] = {}

    def meter_moved() -> bool:
        """A usage_update since add_tool started, above the last one before it (nothing else reports the meter
        between a tool's start and the next call's permission)."""
        updates = holder["conn"].updates_for(holder["sid"])
        start = next(
            i
            for i, u in enumerate(updates)
            if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == "a1" and u.get("status") == "in_progress"
        )
        before = [u["used"] for u in updates[:start] if u["sessionUpdate"] == "usage_update"]
        after = [u["used"] for u in updates[start:] if u["sessionUpdate"] == "usage_update"]
        return bool(before and after) and after[-1] > before[-1]

    async def policy(params: dict[str, Any]) -> str:
        if params["toolCall"]["toolCallId"] == "w1":
            # Hold the turn here until the change is in: the next request then comes after it, by construction.
            await holder["conn"].wait_for(meter_moved, timeout=20)
        return "allow_once"

    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {
                "tool_calls": [
                    call("a1", "mcp__s__add_tool", name="late_tool"),
                    call("w1", "mcp__s__write_note", name="n", text="n"),
                ]
            },
            {"tool_calls": [call("l1", "mcp__s__late_tool", text="hi")]},
            {"text": "done"},
        )
        async with run_ama(ama, options=ClientOptions(permission=policy), env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("s", notes)])
            holder.update(conn=conn, sid=sid)
            await wait_ready(conn, sid, "s")
            before = (await server_tools(conn, sid))["s"]
            assert await prompt(conn, sid) == "end_turn"
            assert "mcp__s__late_tool" not in tool_names(llm.requests[0].body)
            assert "mcp__s__late_tool" in tool_names(llm.requests[1].body)
            assert statuses(conn, sid) == {"a1": "completed", "w1": "completed", "l1": "completed"}
            assert "late_tool: hi" in tool_message(llm.requests[2].body, "l1")
            assert (await server_tools(conn, sid))["s"] == before + 1


# --- 7. no orphans ------------------------------------------------------------------------------------------


async def test_session_delete_and_stdin_eof_leave_no_server_process(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    files = [tmp_path / f"{n}.pid" for n in ("one", "one-helper", "two", "two-helper")]
    with LLMServer() as llm:
        configure(ama, llm)
        async with run_ama(ama, env=KEY, process=True) as conn:  # a process: its exit status after stdin EOF
            first = await open_session(conn, ama, [stdio_with_helper("one", notes, files[0], files[1])])
            second = session_id(
                await conn.new_session(ama.workspace, [stdio_with_helper("two", notes, files[2], files[3])])
            )
            await wait_ready(conn, first, "one")
            await wait_ready(conn, second, "two")
            pids = pids_of(*files)
            with no_stray(pids):
                assert all(alive(pid) for pid in pids)
                await conn.request("session/delete", {"sessionId": first})
                wait_gone(pids[:2], "the deleted session's server and its helper to end")
                assert alive(pids[2]) and alive(pids[3])
                started = time.monotonic()
                assert await conn.close(timeout=10) == 0  # stdin EOF: ama ends by itself
                assert time.monotonic() - started < 10
                wait_gone(pids[2:], "the server and its helper to end with ama")


async def test_sigterm_to_ama_leaves_no_server_process(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    files = [tmp_path / "s.pid", tmp_path / "s-helper.pid"]
    with LLMServer() as llm:
        configure(ama, llm)
        async with run_ama(ama, env=KEY, process=True) as conn:  # a process: it gets a SIGTERM
            sid = await open_session(conn, ama, [stdio_with_helper("s", notes, *files)])
            await wait_ready(conn, sid, "s")
            pids = pids_of(*files)
            with no_stray(pids):
                assert all(alive(pid) for pid in pids) and conn.pid is not None
                os.kill(conn.pid, signal.SIGTERM)
                await conn.wait_for(lambda: conn.exited, timeout=15)
                poll_until(lambda: conn.returncode is not None, 10, "ama to exit on SIGTERM")
                wait_gone(pids, "the server and its helper to end with ama")


# --- 8. load and resume -------------------------------------------------------------------------------------


async def test_load_and_resume_use_the_editors_new_servers_and_replay_the_mcp_call(
    tmp_path: Path, web: HttpServer
) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    ws = str(ama.workspace.resolve())
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"tool_calls": [call("c1", "mcp__alpha__echo", text="from alpha")]}, {"text": "echoed"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, [stdio("alpha", notes)])
            await wait_ready(conn, sid, "alpha")
            assert await prompt(conn, sid) == "end_turn"
            live_call = next(u for u in conn.updates_for(sid, "tool_call") if u["toolCallId"] == "c1")
            assert statuses(conn, sid) == {"c1": "completed"}

        llm.enqueue({"text": "with beta"}, {"text": "with web"})
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": ws, "mcpServers": [stdio("beta", notes)]})
            replayed = [u for u in conn.updates_for(sid, "tool_call") if u["toolCallId"] == "c1"]
            assert len(replayed) == 1
            assert {k: replayed[0].get(k) for k in ("title", "kind")} == {
                k: live_call.get(k) for k in ("title", "kind")
            }
            final = finals(conn, sid)["c1"]
            assert final["status"] == "completed" and "from alpha" in json.dumps(final.get("content"))

            await wait_ready(conn, sid, "beta")
            assert await prompt(conn, sid) == "end_turn"
            names = tool_names(llm.requests[2].body)
            assert "mcp__beta__echo" in names and not [n for n in names if n.startswith("mcp__alpha__")], names
            assert set(await server_tools(conn, sid)) == {"beta"}

            await conn.request("session/close", {"sessionId": sid})
            await conn.request("session/resume", {"sessionId": sid, "cwd": ws, "mcpServers": [http("web", web)]})
            await wait_ready(conn, sid, "web")
            assert await prompt(conn, sid, "again") == "end_turn"
            names = tool_names(llm.requests[3].body)
            assert "mcp__web__echo" in names and not [n for n in names if n.startswith("mcp__beta__")], names


# --- 9. secrets ---------------------------------------------------------------------------------------------


async def test_env_and_header_secrets_never_reach_the_session_file_the_log_or_stderr(
    tmp_path: Path, web: HttpServer
) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {"tool_calls": [call("e1", "mcp__s__environ"), call("e2", "mcp__web__echo", text="via http")]},
            {"text": "done"},
        )
        servers = [
            stdio("s", notes, env={"MCP_SECRET": ENV_SECRET, "MCP_PLAIN": PLAIN_ENV_SECRET}),
            http("web", web, {"Authorization": f"Bearer {HEADER_SECRET}", "X-Plain": PLAIN_HEADER_SECRET}),
        ]
        async with run_ama(ama, env=KEY, process=True) as conn:  # a process: all it writes to stderr is read
            sid = await open_session(conn, ama, servers)
            await wait_ready(conn, sid, "s", "web")
            assert await prompt(conn, sid) == "end_turn"
            assert statuses(conn, sid) == {"e1": "completed", "e2": "completed"}
            environ = tool_message(llm.requests[1].body, "e1")
            assert "MCP_SECRET" in environ and "MCP_PLAIN" in environ  # the server got the env as given
            assert "via http" in tool_message(llm.requests[1].body, "e2")  # and the HTTP server the request

    files = [p for p in (ama.data / "sessions").rglob("*") if p.is_file()]
    assert files
    stored = "".join(p.read_text(encoding="utf-8", errors="replace") for p in files)
    assert "tests.support.mcp_servers.stdio_server" in stored and web.url in stored  # the record is there
    places = {"the session file": stored, "the log": ama.log_text(), "stderr": ama.stderr.read_text()}
    for where, text in places.items():
        for secret in (ENV_SECRET, HEADER_SECRET, PLAIN_ENV_SECRET, PLAIN_HEADER_SECRET):
            assert secret not in text, f"{secret} in {where}"


# --- 10. images and resources -------------------------------------------------------------------------------


async def test_an_image_reaches_the_model_and_the_editor_and_a_resource_as_text(
    tmp_path: Path, web: HttpServer
) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {"tool_calls": [call("i1", "mcp__web__image"), call("r1", "mcp__web__resource")]},
            {"text": "seen"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, [http("web", web)])
            await wait_ready(conn, sid, "web")
            assert await prompt(conn, sid) == "end_turn"
            done = finals(conn, sid)
            assert {cid: u["status"] for cid, u in done.items()} == {"i1": "completed", "r1": "completed"}
            shown = [c["content"] for c in done["i1"]["content"] if c["type"] == "content"]
            assert {"type": "image", "data": PIXEL_PNG, "mimeType": "image/png"} in shown, shown
            assert "resource body" in json.dumps(done["r1"]["content"])

            body = llm.requests[1].body
            parts = [p for m in body["messages"] if isinstance(m.get("content"), list) for p in m["content"]]
            urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
            assert urls == [f"data:image/png;base64,{PIXEL_PNG}"], urls
            assert "resource body" in tool_message(body, "r1")
