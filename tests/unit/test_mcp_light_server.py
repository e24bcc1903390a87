"""The light stdio MCP test server (tests/support/mcp_servers/light_server.py, the standard library only) answers
as the official SDK's (toolset.py's `MCPServer`, `stdio_server --sdk`) does: the same conversation is held with
each, over raw newline-delimited JSON-RPC (tests/support/mcp_servers/wire.py), and what each sent is compared,
message for message. Normalised, as legitimately different: the process id the `pid` tool answers (each its
own) and the pydantic version in the links of the argument errors. The SDK server is started once.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp_servers.light_server import LightServer
from tests.support.mcp_servers.toolset import PIXEL_PNG
from tests.support.mcp_servers.wire import Wire
from tests.support.waiting import poll_until

STDIO_SERVER = ["-m", "tests.support.mcp_servers.stdio_server", "--name", "wired"]
LIGHT = [sys.executable, "-S", *STDIO_SERVER]  # as the MCP tests start it: without site-packages
SDK = [sys.executable, *STDIO_SERVER, "--sdk"]
CLIENT_INFO = {"name": "wire-test", "version": "1"}


def init(version: Any) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}


def call(tool: str, arguments: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool}
    if arguments is not None:
        params["arguments"] = arguments
    return params


# (label, method, params): requests answered in turn, before and after `notifications/initialized`.
BEFORE_INITIALIZE = [
    ("ping first", "ping", None),
    ("tools/list before initialize", "tools/list", None),
    ("tools/call before initialize", "tools/call", call("echo", {"text": "early"})),
    ("unknown method before initialize", "no/such", None),
    ("initialize without params", "initialize", None),
    ("initialize without clientInfo", "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}),
    ("initialize with a number for a version", "initialize", init(5)),
    ("initialize 2026-07-28 (not a handshake version)", "initialize", init("2026-07-28")),
    ("initialize with an unknown version", "initialize", init("1999-01-01")),
    ("initialize 2024-11-05", "initialize", init("2024-11-05")),
    ("initialize 2025-03-26", "initialize", init("2025-03-26")),
    ("initialize 2025-11-25", "initialize", init("2025-11-25")),
    ("initialize 2025-06-18", "initialize", init("2025-06-18")),
]
LONG = "x" * 80
REQUESTS = [
    ("ping", "ping", None),
    ("ping with params", "ping", {}),
    ("tools/list", "tools/list", None),
    ("tools/list with a cursor", "tools/list", {"cursor": "abc"}),
    ("tools/list with a bad cursor", "tools/list", {"cursor": 5}),
    ("resources/list", "resources/list", None),
    ("resources/templates/list", "resources/templates/list", None),
    ("prompts/list", "prompts/list", None),
    ("resources/read of no resource", "resources/read", {"uri": "file:///nowhere"}),
    ("resources/read without a uri", "resources/read", {}),
    ("prompts/get of no prompt", "prompts/get", {"name": "nothing"}),
    ("logging/setLevel (no handler)", "logging/setLevel", {"level": "debug"}),
    ("an unknown method", "no/such", {"a": 1}),
    ("tools/call without params", "tools/call", None),
    ("tools/call without a name", "tools/call", {}),
    ("tools/call with a number for a name", "tools/call", {"name": 5}),
    ("tools/call with a string for arguments", "tools/call", call("echo", "text")),
    ("an unknown tool", "tools/call", call("nope", {})),
    ("echo", "tools/call", call("echo", {"text": "héllo\nworld"})),
    ("echo with an extra argument", "tools/call", call("echo", {"text": "a", "extra": 1})),
    ("echo with null arguments", "tools/call", {"name": "echo", "arguments": None}),
    ("echo without its text", "tools/call", call("echo", {})),
    ("echo with a number", "tools/call", call("echo", {"text": 5})),
    ("echo with null", "tools/call", call("echo", {"text": None})),
    ("echo with a bool", "tools/call", call("echo", {"text": True})),
    ("echo with a list", "tools/call", call("echo", {"text": ["a", {"b": LONG}]})),
    ("echo with a long value left out", "tools/call", call("echo", {"other": LONG})),
    ("pid", "tools/call", call("pid")),
    ("environ", "tools/call", call("environ", {})),
    ("write_note", "tools/call", call("write_note", {"name": "../up/note.txt", "text": "written\n"})),
    ("write_note into the directory itself", "tools/call", call("write_note", {"name": "", "text": "x"})),
    ("write_note without arguments", "tools/call", call("write_note", {})),
    ("write_note with wrong types", "tools/call", call("write_note", {"name": 1, "text": [LONG]})),
    ("fail", "tools/call", call("fail")),
    ("fail with a reason", "tools/call", call("fail", {"why": "because"})),
    ("image", "tools/call", call("image")),
    ("resource", "tools/call", call("resource", {})),
    ("slow", "tools/call", call("slow", {"seconds": 0.01, "tag": "quick"})),
    ("slow, an int", "tools/call", call("slow", {"seconds": 0, "tag": "zero"})),
    ("slow, a numeric string", "tools/call", call("slow", {"seconds": " 0.02 ", "tag": "text"})),
    ("slow, a bool", "tools/call", call("slow", {"seconds": False, "tag": "bool"})),
    ("slow, not a number", "tools/call", call("slow", {"seconds": "soon"})),
    ("slow, a long string", "tools/call", call("slow", {"seconds": LONG})),
    ("slow, a list", "tools/call", call("slow", {"seconds": [1]})),
    ("slow, negative", "tools/call", call("slow", {"seconds": -1, "tag": "negative"})),
    ("add_tool", "tools/call", call("add_tool", {"name": "extra"})),
    ("add_tool of a tool there is", "tools/call", call("add_tool", {"name": "echo"})),
    ("add_tool without a name", "tools/call", call("add_tool", {})),
    ("tools/list after add_tool", "tools/list", None),
    ("the added tool", "tools/call", call("extra", {"text": "x"})),
    ("echo is still echo", "tools/call", call("echo", {"text": "x"})),
]
# Lines that are no JSON-RPC request the SDK answers: dropped without a word.
DROPPED = [
    b"not json",
    b"[1, 2",
    b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
    b'"a string"',
    b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}',
    b'{"id": 1, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": null, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
    b'{"jsonrpc": "2.0", "id": 1, "result": {}}',
    b'{"jsonrpc": "2.0", "method": "notifications/unknown"}',
    b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}}',
    b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}',
]


PYDANTIC_LINK = re.compile(r"errors\.pydantic\.dev/[0-9.]+/")


def normalised(value: Any, pid: int) -> Any:
    """`value` with the server's own pid (the `pid` tool's answer) and the pydantic version in links replaced."""
    if isinstance(value, dict):
        return {key: normalised(item, pid) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalised(item, pid) for item in value]
    if isinstance(value, str):
        return "<pid>" if value == str(pid) else PYDANTIC_LINK.sub("errors.pydantic.dev/<v>/", value)
    return value


def converse(server: list[str], test_dir: Path) -> dict[str, Any]:
    """The same conversation with a server: what it sent, request by request, the files its tools left, and how
    it ended (stdin closed during a slow call)."""
    wire = Wire(server, env={"MCP_TEST_DIR": str(test_dir)})
    heard: dict[str, Any] = {}
    try:
        request_id = 0

        def ask(label: str, method: str, params: Any) -> None:
            nonlocal request_id
            request_id += 1
            assert label not in heard
            heard[label] = wire.request(request_id, method, params)

        for label, method, params in BEFORE_INITIALIZE:
            ask(label, method, params)
        wire.notify("notifications/initialized")
        for label, method, params in REQUESTS:
            ask(label, method, params)
        for line in DROPPED:
            wire.send(line)
        ask("ping after the dropped lines", "ping", None)  # the only answer since the last one
        # A cancelled call: its marker, and no answer to it.
        wire.send({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": call("slow", {"tag": "c"})})
        poll_until((test_dir / "c.started").exists, 30, "c.started")
        wire.notify("notifications/cancelled", {"requestId": "slow-1", "reason": "the test cancels"})
        poll_until((test_dir / "c.cancelled").exists, 30, "c.cancelled")
        ask("ping after the cancel", "ping", None)
        # A call running when stdin ends is cancelled too.
        wire.send({"jsonrpc": "2.0", "id": "slow-2", "method": "tools/call", "params": call("slow", {"tag": "e"})})
        poll_until((test_dir / "e.started").exists, 30, "e.started")
        heard["exit status, and what came after stdin closed"] = wire.close()[:2]
        assert heard["pid"][0]["result"]["content"][0]["text"] == str(wire.process.pid)
        heard["files"] = {p.name: p.read_text(encoding="utf-8") for p in sorted(test_dir.iterdir())}
        return {label: normalised(messages, wire.process.pid) for label, messages in heard.items()}
    finally:
        wire.kill()


@pytest.fixture(scope="module")
def sdk_answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return converse(SDK, tmp_path_factory.mktemp("sdk"))


def test_the_light_server_answers_every_request_as_the_sdk_server_does(
    sdk_answers: dict[str, Any], tmp_path: Path
) -> None:
    light = converse(LIGHT, tmp_path)
    assert list(light) == list(sdk_answers)
    for label, expected in sdk_answers.items():
        assert light[label] == expected, label


def test_the_conversation_covers_what_the_tests_rely_on(sdk_answers: dict[str, Any]) -> None:
    """What the MCP tests count on, read from the SDK server's answers (so the comparison above means it)."""
    first = sdk_answers["initialize 2025-06-18"][0]["result"]
    assert first["protocolVersion"] == "2025-06-18" and first["serverInfo"]["name"] == "wired"
    assert sdk_answers["initialize with an unknown version"][0]["result"]["protocolVersion"] == "2025-11-25"
    listed = [t["name"] for t in sdk_answers["tools/list after add_tool"][0]["result"]["tools"]]
    assert listed == [*LightServer().tools, "extra"]
    assert sdk_answers["add_tool"][0] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert sdk_answers["image"][0]["result"]["content"][1]["data"] == PIXEL_PNG
    assert sdk_answers["fail"][0]["result"]["isError"] is True
    assert sdk_answers["an unknown method"][0]["error"]["code"] == -32601
    assert len(sdk_answers["ping after the dropped lines"]) == 1  # the dropped lines had no answer
    assert len(sdk_answers["ping after the cancel"]) == 1  # nor the cancelled call
    closed = {"jsonrpc": "2.0", "id": "slow-2", "error": {"code": -32000, "message": "Connection closed"}}
    assert sdk_answers["exit status, and what came after stdin closed"] == [0, [closed]]
    assert sdk_answers["files"]["c.cancelled"] == sdk_answers["files"]["e.cancelled"] == "cancelled"
    assert sdk_answers["files"]["note.txt"] == "written\n"


def test_crash_exits_7_mid_call_with_its_reason_on_stderr_as_toolset_py_does(tmp_path: Path) -> None:
    source = (Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "toolset.py").read_text()
    assert 'sys.stderr.write("crash: exiting mid-call\\n")' in source and "os._exit(7)" in source
    wire = Wire(LIGHT, env={"MCP_TEST_DIR": str(tmp_path)})
    try:
        wire.request(1, "initialize", init("2025-06-18"))
        wire.notify("notifications/initialized")
        wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call("crash")})
        assert wire.rest() == []  # stdout ends with no answer
        assert wire.process.wait(timeout=30) == 7
        poll_until(lambda: "crash: exiting mid-call\n" in wire.stderr(), 30, "the crash's line on stderr")
    finally:
        wire.kill()
