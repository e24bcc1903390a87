"""MCP servers that attack ama, through the real `ama --mode acp` (docs/tools.md "MCP servers", issue 23):
a 20 MB line without a newline, a stderr flood, a `tools/list_changed` storm, a 5 MB input schema, a URL and
arguments carrying tokens, a `readOnlyHint` that lies, and a server that ignores stdin's end and SIGTERM.

The servers are tests/support/mcp_servers/hostile_server.py (hand-written, so they can send what the SDK would
not and count what they receive) and the SDK-based HTTP test server.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_mcp_failures_e2e import (
    KEY,
    alive,
    call,
    configure,
    no_stray,
    open_session,
    prompt,
    statuses,
    tool_names,
    wait_ready,
)
from tests.support import leaks
from tests.support.harness import Ama, run_ama
from tests.support.llm_server import LLMServer
from tests.support.mcp_servers.http_server import running_http_server
from tests.support.waiting import holds_within, poll_until

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def hostile(name: str, folder: Path, mode: str, *flags: str) -> dict[str, Any]:
    folder.mkdir(exist_ok=True)
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_servers.hostile_server", mode, *flags],
        "env": [{"name": "PYTHONPATH", "value": str(ROOT)}, {"name": "HOSTILE_DIR", "value": str(folder)}],
    }


def killed(pid: int) -> Callable[[], bool]:
    return lambda: not alive(pid)


def cpu_seconds(pid: int) -> float:
    fields = leaks.stat_fields(pid)
    return (int(fields[leaks.UTIME]) + int(fields[leaks.STIME])) / leaks.CLK_TCK


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def notices(conn: AgentProcess, sid: str) -> list[str]:
    return [json.dumps(n) for n in conn.updates_for(sid, "notice")]


async def comes_true_within(condition: Callable[[], object], seconds: float, interval: float = 0.01) -> bool:
    """`holds_within` (tests/support/waiting.py) for a test whose ama runs on its event loop: whether
    `condition()` became true within `seconds` (checked once more at the deadline)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        await anyio.sleep(interval)  # polling a condition over a window, as holds_within does
    return bool(condition())


async def test_a_20_mb_line_without_a_newline_fails_its_server_fast_with_a_clear_reason(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        # A process: its own CPU time and peak memory are measured.
        async with run_ama(ama, options=ClientOptions(notices=True), env=KEY, process=True) as conn:
            started = time.monotonic()
            sid = await open_session(conn, ama, [hostile("long", tmp_path / "h", "long-line", "--mb", "20")])
            await conn.wait_for(lambda: any("longer than 16 MiB" in n for n in notices(conn, sid)), timeout=30)
            took = time.monotonic() - started
            assert conn.pid is not None
            # Linear and bounded: the SDK's reader re-split its growing buffer on every 64 KiB read (tens of
            # seconds of CPU for 20 MB) and kept it all.
            assert took < 15, f"the long line took {took:.1f} s to be refused"
            assert cpu_seconds(conn.pid) < 12
            assert peak_rss_mib(conn.pid) < 400
            told = [n for n in notices(conn, sid) if "'long'" in n]
            assert len(told) == 1 and "line break" in told[0], told


async def test_a_stderr_flood_does_not_pin_a_core(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"tool_calls": [call("c1", "mcp__flood__sleep", seconds=0)]}, {"text": "done"})
        async with run_ama(ama, env=KEY, process=True) as conn:  # a process: its own CPU time is measured
            sid = await open_session(conn, ama, [hostile("flood", tmp_path / "h", "stderr-flood")])
            await wait_ready(conn, sid, "flood")
            assert conn.pid is not None
            before, at = cpu_seconds(conn.pid), time.monotonic()
            holds_within(lambda: False, 2.0)  # the window the CPU time is measured over
            used = (cpu_seconds(conn.pid) - before) / (time.monotonic() - at)
            # Reading a flooding pipe as fast as it fills costs a whole core; a bounded rate costs a few percent.
            assert used < 0.25, f"ama used {used:.0%} of a core while a server flooded its stderr"
            # And the server still works.
            with no_stray([int((tmp_path / "h" / "pid").read_text())]):
                assert await prompt(conn, sid) == "end_turn"
                assert statuses(conn, sid) == {"c1": "completed"}
    assert "bytes of stderr left out" in ama.log_text() or "floods its stderr" in ama.log_text()


async def test_a_list_changed_storm_makes_a_handful_of_relists(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    folder = tmp_path / "h"
    count = folder / "tools_list.count"
    with LLMServer() as llm:
        configure(ama, llm)
        # In-process: the waits below yield to the event loop ama runs on.
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(conn, ama, [hostile("storm", folder, "list-changed", "--count", "2000")])
            await wait_ready(conn, sid, "storm")
            await conn.wait_for(lambda: (folder / "storm.done").exists(), timeout=30)  # the storm ends
            # 2000 notifications over about 2 s: at most one re-list a second, and one after the storm.
            relisted = await comes_true_within(lambda: count.exists() and int(count.read_text() or 0) > 6, 1.5)
            assert not relisted, f"{count.read_text()} tools/list requests for one storm"
            assert int(count.read_text()) >= 2  # the change was heard: at least one re-list after the first


async def test_a_5_mb_input_schema_is_left_out_of_the_request_and_the_person_told_once(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "one"}, {"text": "two"})
        async with run_ama(ama, options=ClientOptions(notices=True), env=KEY) as conn:
            sid = await open_session(conn, ama, [hostile("wide", tmp_path / "h", "big-schema", "--mb", "5")])
            await wait_ready(conn, sid, "wide")
            assert await prompt(conn, sid) == "end_turn"
            assert await prompt(conn, sid, "again") == "end_turn"
            for request in llm.requests:
                names = tool_names(request.body)
                assert "mcp__wide__small" in names and "mcp__wide__echo" in names
                assert "mcp__wide__big" not in names
                assert len(json.dumps(request.body)) < 200_000
            told = [n for n in notices(conn, sid) if "'wide'" in n]
            assert len(told) == 1, told
            assert "'big'" in told[0] and "4.8 MiB" in told[0] and "64 KiB" in told[0]


async def test_tokens_in_urls_and_args_reach_no_log_stderr_session_file_or_update(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    query_token = "querytokenvalue4411"
    password = "userpassword5522"
    path_key = "sk-pathkeyABCdef0123456789"
    arg_key = "argkeyvalue-77xy"
    eq_token = "eqtokenvalue-88zw"
    shaped = "Zx9KqP2mW7vR4tY8uB3n"
    with LLMServer() as llm, running_http_server("http") as web:
        configure(ama, llm)
        base = web.url.replace("http://", f"http://person:{password}@")
        servers = [
            {"type": "http", "name": "web", "url": f"{base}?token={query_token}#frag", "headers": []},
            # This one fails (404): its error names the URL, and the person is told.
            {
                "type": "http",
                "name": "gone",
                "url": base.replace("/mcp", f"/nowhere/{path_key}") + f"?token={query_token}",
                "headers": [],
            },
        ]
        stdio = hostile("argy", tmp_path / "h", "serve", "--api-key", arg_key, f"--token={eq_token}", shaped)
        # A process: all it writes to stderr is read.
        async with run_ama(ama, options=ClientOptions(notices=True), env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [*servers, stdio])
            await wait_ready(conn, sid, "web", "argy")
            await conn.wait_for(lambda: any("'gone'" in n for n in notices(conn, sid)), timeout=30)
            # The client's own requests carry the URLs (they are the editor's): what ama sent back is what counts.
            said = "\n".join(str(e.raw) for e in conn.transcript if e.direction == "in")
            shown = [n for n in notices(conn, sid) if "'gone'" in n][0]
    files = [p for p in (ama.data / "sessions").rglob("*") if p.is_file()]
    stored = "".join(p.read_text(encoding="utf-8", errors="replace") for p in files)
    assert "hostile_server" in stored and "127.0.0.1" in stored  # the record is there
    places = {
        "the session file": stored,
        "the log": ama.log_text(),
        "stderr": ama.stderr.read_text(),
        "what ama sent the client": said,
    }
    for where, text in places.items():
        for secret in (query_token, password, path_key, arg_key, eq_token, shaped):
            assert secret not in text, f"{secret} in {where}"
    assert "nowhere" in shown or "did not start" in shown, shown


async def test_read_only_hint_is_believed_only_from_a_trusted_server(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    liar, trusted = tmp_path / "liar", tmp_path / "trusted"
    with LLMServer() as llm:
        configure(ama, llm, top='mode = "read_only"', tail='[mcp]\ntrusted_servers = ["friend"]\n')
        llm.enqueue(
            {
                "tool_calls": [
                    call("u1", "mcp__stranger__echo", text="written anyway"),
                    call("t1", "mcp__friend__echo", text="trusted"),
                ]
            },
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await open_session(
                conn, ama, [hostile("stranger", liar, "serve"), hostile("friend", trusted, "serve")]
            )
            await wait_ready(conn, sid, "stranger", "friend")
            assert await prompt(conn, sid) == "end_turn"
            assert conn.permission_log == []  # read_only refuses, it does not ask
            assert statuses(conn, sid) == {"u1": "failed", "t1": "completed"}
            assert not (liar / "echo.written").exists()
            assert (trusted / "echo.written").read_text() == "trusted"
            kinds = {u["toolCallId"]: u.get("kind") for u in conn.updates_for(sid, "tool_call")}
            assert kinds == {"u1": "execute", "t1": "read"}, kinds


async def test_eof_ends_ama_within_a_second_whatever_its_server_does(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    folder = tmp_path / "h"
    with LLMServer() as llm:
        configure(ama, llm)
        async with run_ama(ama, env=KEY, process=True) as conn:  # a process: its exit after stdin EOF
            sid = await open_session(conn, ama, [hostile("mule", folder, "stubborn")])
            await wait_ready(conn, sid, "mule")
            pid = int((folder / "pid").read_text())
            with no_stray([pid]):
                started = time.monotonic()
                assert await conn.close(timeout=10) == 0
                took = time.monotonic() - started
                assert took < 1.5, f"ama took {took:.2f} s to exit after EOF with a server that ignores it"
                poll_until(lambda: not alive(pid), 5, "the stubborn server to be killed")


async def test_eof_ends_ama_within_a_second_with_a_stubborn_server_in_each_of_three_sessions(tmp_path: Path) -> None:
    # The sessions' servers are stopped side by side (SessionManager.shutdown): one after another, three stubborn
    # servers took three times a server's stop time.
    ama = Ama(tmp_path)
    folders = [tmp_path / f"h{n}" for n in range(3)]
    with LLMServer() as llm:
        configure(ama, llm)
        async with run_ama(ama, env=KEY, process=True) as conn:  # a process: its exit after stdin EOF
            for n, folder in enumerate(folders):
                sid = await open_session(conn, ama, [hostile(f"mule{n}", folder, "stubborn")])
                await wait_ready(conn, sid, f"mule{n}")
            pids = [int((folder / "pid").read_text()) for folder in folders]
            with no_stray(pids):
                started = time.monotonic()
                assert await conn.close(timeout=10) == 0
                took = time.monotonic() - started
                assert took < 1.5, f"ama took {took:.2f} s to exit after EOF with three stubborn servers"
                for pid in pids:
                    poll_until(killed(pid), 5, "each stubborn server to be killed")
