"""The conformance suite's stdio MCP server (conformance/servers/mcp_stdio.py): run by file path in isolated
mode as the agent under test would, over pipes, and its message handling against hostile lines."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_conformance.servers import mcp_stdio as mcp_stdio_server
from ama_conformance.servers.mcp_stdio import handle
from tests.support.hypothesis_profiles import examples

SERVER = Path(mcp_stdio_server.__file__).resolve()


def run_server(lines: list[bytes], tmp_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Feed `lines` to the server (then EOF); its replies, its log entries and its exit code."""
    log = tmp_path / "mcp.log"
    proc = subprocess.run(
        # -I: no PYTHONPATH, no user site, no cwd on sys.path: only the stdlib is importable, as for an agent
        # that launches it with a bare interpreter from anywhere.
        [sys.executable, "-I", str(SERVER), "--log", str(log)],
        input=b"".join(lines),
        capture_output=True,
        cwd=tmp_path,
        timeout=30,
    )
    assert proc.stderr == b"", proc.stderr.decode()
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    logged = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    return replies, logged, proc.returncode


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def request(id_: Any, method: str, params: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return line(msg)


def test_a_session_as_an_mcp_client_drives_it(tmp_path: Path) -> None:
    replies, logged, code = run_server(
        [
            request(
                1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c"}}
            ),
            line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            request(2, "tools/list", {}),
            request("three", "tools/call", {"name": "conformance_echo", "arguments": {"text": "conformance"}}),
            request(4, "ping"),
            request(5, "resources/list"),
        ],
        tmp_path,
    )
    assert code == 0
    by_id = {r["id"]: r for r in replies}
    assert list(by_id) == [1, 2, "three", 4, 5]  # answered in order, the notification not at all
    assert by_id[1]["result"] == {
        "protocolVersion": "2025-03-26",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "acp-conformance-mcp", "version": "1.0.0"},
    }
    [tool] = by_id[2]["result"]["tools"]
    assert tool["name"] == "conformance_echo"
    assert tool["inputSchema"]["properties"] == {"text": {"type": "string", "description": "The text to echo."}}
    assert by_id["three"]["result"]["content"] == [{"type": "text", "text": "echo: conformance"}]
    assert by_id[4]["result"] == {}
    assert by_id[5]["error"]["code"] == -32601
    assert all(r["jsonrpc"] == "2.0" for r in replies)
    assert [e["method"] for e in logged] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "ping",
        "resources/list",
    ]
    assert logged[3]["params"]["arguments"] == {"text": "conformance"}


def test_hostile_lines_get_errors_and_the_server_carries_on(tmp_path: Path) -> None:
    replies, logged, code = run_server(
        [
            b"this is not json\n",
            b"\xff\xfe{}\n",
            b"\n",
            line([1, 2]),
            line({"jsonrpc": "2.0", "id": 1}),
            line({"jsonrpc": "1.0", "id": 2, "method": "ping"}),
            line({"jsonrpc": "2.0", "id": True, "method": "ping"}),
            request(3, "initialize", {"protocolVersion": 2025}),
            request(4, "tools/list", [1]),
            request(5, "tools/call", {"name": "nope"}),
            request(6, "tools/call", {"name": "conformance_echo", "arguments": {"text": 5}}),
            b"[" * 100_000 + b"\n",
            line({"jsonrpc": "2.0", "id": 99, "result": {}}),  # a response to nothing: ignored
            request(7, "ping"),
        ],
        tmp_path,
    )
    assert code == 0
    codes = [(r["id"], r["error"]["code"]) if "error" in r else (r["id"], "ok") for r in replies]
    assert codes == [
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (1, -32600),
        (2, -32600),
        (None, -32600),
        (3, "ok"),
        (4, -32602),
        (5, -32602),
        (6, -32602),
        (None, -32700),
        (7, "ok"),
    ]
    assert replies[6]["result"]["protocolVersion"] == "2025-06-18"  # not a string: the server's own
    assert len(logged) == 13  # every message but the blank line


def test_eof_at_once_exits_zero_with_no_log_option(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-I", str(SERVER)], input=b"", capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_it_imports_only_the_standard_library() -> None:
    tree = ast.parse(SERVER.read_text(encoding="utf-8"))
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {m.split(".")[0] for m in modules} <= set(sys.stdlib_module_names) | {"__future__"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | json_values,
        "id": st.integers() | st.text(max_size=5) | json_values,
        "method": st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "x"]) | json_values,
        "params": st.fixed_dictionaries(
            {}, optional={"name": st.just("conformance_echo") | json_values, "arguments": json_values}
        )
        | json_values,
        "result": json_values,
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(msg=messages | json_values, raw=st.binary(max_size=40))
def test_handle_never_raises_and_always_answers_a_request(msg: Any, raw: bytes) -> None:
    for data in (json.dumps(msg).encode(), raw):
        reply, entry = handle(data)
        assert "method" in entry
        if reply is not None:
            assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply)
            json.loads(json.dumps(reply, allow_nan=False))  # a reply is always strict JSON
        elif isinstance(msg, dict) and data != raw:
            assert "id" not in msg or "method" not in msg or "result" in msg or "error" in msg
