"""ACP `mcpServers` items → McpServerSpec, and a worded problem for every item that cannot be used."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.mcp.config import McpServerSpec, parse_servers
from tests.support.hypothesis_profiles import examples

SECRET = "sk-live-abcdefghijklmnop"


def stdio(name: str = "files", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": "/usr/bin/files-mcp", "args": ["--root", "/w"], "env": [], **extra}


def test_stdio_http_and_sse_items_decode() -> None:
    specs, problems = parse_servers(
        [
            stdio(env=[{"name": "API_TOKEN", "value": SECRET}]),
            {
                "type": "http",
                "name": "web",
                "url": "https://mcp.example/mcp",
                "headers": [{"name": "X-Key", "value": "v"}],
            },
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": None},
        ]
    )
    assert problems == []
    assert [s.transport for s in specs] == ["stdio", "http", "sse"]
    assert specs[0] == McpServerSpec(
        name="files",
        transport="stdio",
        command="/usr/bin/files-mcp",
        args=("--root", "/w"),
        env=(("API_TOKEN", SECRET),),
    )
    assert specs[1].headers == (("X-Key", "v"),)
    assert specs[2].headers == ()


def test_null_args_and_env_are_the_empty_default() -> None:
    specs, problems = parse_servers([{"name": "a", "command": "a-mcp", "args": None, "env": None}])
    assert problems == [] and specs[0].args == () and specs[0].env == ()


def test_a_relative_command_is_accepted() -> None:
    specs, problems = parse_servers([stdio(command="npx")])
    assert problems == [] and specs[0].command == "npx"


def test_bad_items_are_refused_one_by_one_with_a_reason() -> None:
    raw: list[Any] = [
        "not an object",
        {"command": "x", "args": [], "env": []},
        stdio(name="  "),
        stdio(name="nocommand", command=""),
        {"type": "websocket", "name": "ws", "url": "ws://x"},
        stdio(name="badargs", args=["ok", 3]),
        stdio(name="badenv", env=[{"name": "A"}]),
        stdio(name="nul", args=["a\x00b"]),
        {"type": "http", "name": "ftp", "url": "ftp://x/y", "headers": []},
        {"type": "http", "name": "badheader", "url": "http://h/", "headers": [{"name": "Bad Name", "value": "v"}]},
        {"type": "http", "name": "crlf", "url": "http://h/", "headers": [{"name": "X", "value": "a\r\nInjected: 1"}]},
        stdio(name="good"),
    ]
    specs, problems = parse_servers(raw)
    assert [s.name for s in specs] == ["good"]
    assert len(problems) == len(raw) - 1
    assert problems[0].startswith("MCP server #1: is not an object")
    assert "has no 'name'" in problems[1]
    assert "empty name" in problems[2]
    assert "empty command" in problems[3]
    assert "unknown transport type 'websocket'" in problems[4]
    assert "argument 2 is not a string" in problems[5]
    assert "environment variable 'A' has no string value" in problems[6]
    assert "NUL" in problems[7]
    assert "not http(s)" in problems[8]
    assert "not a valid HTTP header name" in problems[9]
    assert "line break" in problems[10] and "Injected" not in problems[10]


def test_a_second_server_of_the_same_name_is_refused() -> None:
    specs, problems = parse_servers([stdio("dup", command="first"), stdio("dup", command="second")])
    assert [s.command for s in specs] == ["first"]
    assert problems == ["MCP server #2 ('dup'): ignored, an earlier MCP server has the same name"]


def test_not_a_list() -> None:
    assert parse_servers({"name": "x"}) == ([], ["mcpServers is not a list: no MCP servers were started"])


def test_secrets_stay_out_of_repr_public_and_problems() -> None:
    specs, problems = parse_servers(
        [
            stdio(env=[{"name": "API_TOKEN", "value": SECRET}]),
            {
                "type": "http",
                "name": "web",
                "url": f"https://user:{SECRET}@mcp.example/mcp?token={SECRET}",
                "headers": [{"name": "Authorization", "value": f"Bearer {SECRET}"}],
            },
            stdio(name="badvalue", env=[{"name": "K", "value": SECRET + "\x00"}]),
        ]
    )
    assert len(specs) == 2 and len(problems) == 1
    for spec in specs:
        for shown in (repr(spec), str(spec), f"{spec!r}", repr([spec]), str(spec.public()), str(spec.__rich_repr__())):
            assert SECRET not in shown
    assert specs[0].public()["env"] == ["API_TOKEN"]
    assert specs[1].public()["headers"] == ["Authorization"]
    url = specs[1].public()["url"]
    assert isinstance(url, str) and url.startswith("https://mcp.example/mcp")
    assert SECRET not in problems[0]
    # The values are still there for the server itself.
    assert specs[0].env == (("API_TOKEN", SECRET),)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
item_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["stdio", "http", "sse", "x"]) | json_values,
        "name": st.text(max_size=10) | json_values,
        "command": st.text(max_size=10) | json_values,
        "args": st.lists(st.text(max_size=5)) | json_values,
        "env": st.lists(st.fixed_dictionaries({"name": st.text(max_size=5), "value": st.text(max_size=5)}))
        | json_values,
        "url": st.sampled_from(["http://127.0.0.1:1/mcp", "https://h/x", "nope", "http://:99999/"]) | json_values,
        "headers": st.lists(st.fixed_dictionaries({"name": st.text(max_size=5), "value": st.text(max_size=5)}))
        | json_values,
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(item_like | json_values, max_size=6))
def test_any_json_gives_specs_or_problems_never_an_exception(raw: list[Any]) -> None:
    specs, problems = parse_servers(raw)
    assert len(specs) + len(problems) == len(raw)
    assert len({s.name for s in specs}) == len(specs)
    for spec in specs:
        assert spec.name.strip()
        if spec.transport == "stdio":
            assert spec.command
        else:
            assert spec.url and spec.url.startswith(("http://", "https://"))


def test_the_sdk_is_imported_only_when_servers_start() -> None:
    """A session without servers may build specs and a hub without loading the SDK (startup and idle RSS)."""
    code = (
        "import sys\n"
        "from ama_acp.mcp.config import parse_servers\n"
        "from ama_acp.mcp.hub import McpHub\n"
        "import ama_acp.mcp.results, ama_acp.mcp.tools\n"
        "McpHub(parse_servers([{'name': 'a', 'command': 'x', 'args': [], 'env': []}])[0]).tools()\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types', 'pydantic'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
