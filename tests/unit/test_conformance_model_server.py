"""The conformance suite's scripted model (conformance/servers/model.py), over real HTTP with httpx in both
dialects, streaming and not: each directive, the choice of tool among hostile declarations, the answer once
the tool result is back, slow answers that stop when the client hangs up, and the 400s the real APIs give."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_conformance.core.directives import Directive, directive_line
from ama_conformance.servers.model import (
    DEFAULT_REPLY,
    ScriptedModel,
    ToolCall,
    choose_call,
    decide,
    neutral_value,
    request_problem,
)
from ama_conformance.servers.model_dialects import declared_tools, prompt_and_results
from tests.support.hypothesis_profiles import examples
from tests.support.waiting import poll_until

DIALECTS = ["openai", "anthropic"]
MODES = [(d, s) for d in DIALECTS for s in (False, True)]
JSON = {"content-type": "application/json"}  # bodies are sent as json.dumps() writes them, to know their size


class _Client:
    """One client for the file, without keep-alive: each request on a connection of its own, closed after its
    answer, as httpx.post() does. httpx.post() builds a client for each request, and with it an SSL context that
    loads the CA bundle: ~40 ms of CPU a request, for plain HTTP to 127.0.0.1. Built at its first use, not at
    import: every process that collects the suite imports this file, and most never run it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # pytest looks for its markers on every name of the module when it collects it
            raise AttributeError(name)
        client = self.__dict__.get("client")
        if client is None:
            client = self.__dict__["client"] = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
        return getattr(client, name)


HTTP = _Client()


@pytest.fixture(name="model")
def model_fixture() -> Iterator[ScriptedModel]:
    with ScriptedModel(slow_seconds=30.0, tick=0.02) as model:
        yield model


# --- a client for both dialects, reading SSE the way the real SDKs do -----------------------------------------


def tool(dialect: str, name: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required or list(properties)}
    if dialect == "openai":
        return {"type": "function", "function": {"name": name, "description": "", "parameters": schema}}
    return {"name": name, "description": "", "input_schema": schema}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call_and_result(dialect: str, call_id: str, result: str) -> list[dict[str, Any]]:
    """An assistant tool call and the message carrying its result, in the dialect's shape."""
    if dialect == "openai":
        call = {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "read_file", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}]},
    ]


def endpoint(model: ScriptedModel, dialect: str) -> str:
    return model.openai_url + "/chat/completions" if dialect == "openai" else model.anthropic_url + "/v1/messages"


def body_for(dialect: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "any-model-name", "messages": messages, "stream": stream}
    if tools:
        body["tools"] = tools
    if dialect == "anthropic":
        body["max_tokens"] = 1000
    elif stream:
        body["stream_options"] = {"include_usage": True}
    return body


def sse_events(lines: Iterator[str]) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, line[len("data: ") :]))
            name = ""
    return events


def parse_openai_stream(events: list[tuple[str, str]]) -> dict[str, Any]:
    assert events[-1] == ("", "[DONE]")
    text, finish, usage = "", "", None
    calls: dict[int, dict[str, Any]] = {}
    for _, data in events[:-1]:
        chunk = json.loads(data)
        assert chunk["object"] == "chat.completion.chunk" and chunk["model"] == "any-model-name"
        if chunk.get("usage"):
            assert chunk["choices"] == []
            usage = chunk["usage"]
            continue
        choice = chunk["choices"][0]
        delta = choice["delta"]
        text += delta.get("content") or ""
        for frag in delta.get("tool_calls") or []:
            entry = calls.setdefault(frag["index"], {"id": frag.get("id"), "name": "", "arguments": ""})
            entry["name"] += frag.get("function", {}).get("name") or ""
            entry["arguments"] += frag.get("function", {}).get("arguments") or ""
        finish = choice["finish_reason"] or finish
    tool_calls = [{**c, "arguments": json.loads(c["arguments"])} for c in calls.values()]
    assert usage is not None, "include_usage asks for a final usage chunk"
    stop = {"stop": "end_turn", "tool_calls": "tool_use"}[finish]
    return {
        "text": text,
        "tool_calls": tool_calls,
        "stop": stop,
        "usage": (usage["prompt_tokens"], usage["completion_tokens"]),
    }


def parse_anthropic_stream(events: list[tuple[str, str]]) -> dict[str, Any]:
    kinds = [name for name, _ in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    text, calls, stop, usage_in, usage_out = "", [], None, 0, 0
    for name, data in events:
        obj = json.loads(data)
        assert obj["type"] == name  # the event line names the data's type, as Anthropic frames it
        if name == "message_start":
            assert obj["message"]["model"] == "any-model-name"
            usage_in = obj["message"]["usage"]["input_tokens"]
        elif name == "content_block_start" and obj["content_block"]["type"] == "tool_use":
            calls.append({"id": obj["content_block"]["id"], "name": obj["content_block"]["name"], "arguments": ""})
        elif name == "content_block_delta":
            delta = obj["delta"]
            if delta["type"] == "text_delta":
                text += delta["text"]
            else:
                calls[-1]["arguments"] += delta["partial_json"]
        elif name == "message_delta":
            stop, usage_out = obj["delta"]["stop_reason"], obj["usage"]["output_tokens"]
    tool_calls = [{**c, "arguments": json.loads(c["arguments"])} for c in calls]
    return {"text": text, "tool_calls": tool_calls, "stop": stop, "usage": (usage_in, usage_out)}


def parse_whole(dialect: str, obj: dict[str, Any]) -> dict[str, Any]:
    assert obj["model"] == "any-model-name"
    if dialect == "openai":
        assert obj["object"] == "chat.completion"
        message = obj["choices"][0]["message"]
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
            for c in message.get("tool_calls") or []
        ]
        stop = {"stop": "end_turn", "tool_calls": "tool_use"}[obj["choices"][0]["finish_reason"]]
        usage = (obj["usage"]["prompt_tokens"], obj["usage"]["completion_tokens"])
        return {"text": message["content"] or "", "tool_calls": calls, "stop": stop, "usage": usage}
    assert obj["type"] == "message" and obj["role"] == "assistant"
    text = "".join(b["text"] for b in obj["content"] if b["type"] == "text")
    calls = [
        {"id": b["id"], "name": b["name"], "arguments": b["input"]} for b in obj["content"] if b["type"] == "tool_use"
    ]
    usage = (obj["usage"]["input_tokens"], obj["usage"]["output_tokens"])
    return {"text": text, "tool_calls": calls, "stop": obj["stop_reason"], "usage": usage}


def ask(
    model: ScriptedModel,
    dialect: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """POST a conversation and return the answer as {text, tool_calls, stop, usage (input, output)}."""
    body = body_for(dialect, messages, tools or [], stream)
    url = endpoint(model, dialect)
    if not stream:
        response = HTTP.post(url, content=json.dumps(body), headers=JSON, timeout=10)
        assert response.status_code == 200, response.text
        return parse_whole(dialect, response.json())
    with HTTP.stream("POST", url, content=json.dumps(body), headers=JSON, timeout=10) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        events = sse_events(response.iter_lines())
    return parse_openai_stream(events) if dialect == "openai" else parse_anthropic_stream(events)


def prompt(verb: str, *args: str) -> list[dict[str, Any]]:
    return [user("Please do this.\n" + directive_line(verb, *args))]


# --- the directives over HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect,stream", MODES)
def test_no_directive_and_reply(model: ScriptedModel, dialect: str, stream: bool) -> None:
    plain = ask(model, dialect, [user("hello")], stream=stream)
    assert (plain["text"], plain["tool_calls"], plain["stop"]) == (DEFAULT_REPLY, [], "end_turn")
    said = ask(model, dialect, prompt("reply", "Hello there, editor."), stream=stream)
    assert (said["text"], said["stop"]) == ("Hello there, editor.", "end_turn")


@pytest.mark.parametrize("dialect,stream", MODES)
def test_usage_is_reported_from_the_sizes(model: ScriptedModel, dialect: str, stream: bool) -> None:
    answer = ask(model, dialect, prompt("reply", "x" * 400), stream=stream)
    body_chars = len(json.dumps(body_for(dialect, prompt("reply", "x" * 400), [], stream)))
    assert answer["usage"][0] == body_chars // 4
    assert answer["usage"][1] == 100
    tiny = ask(model, dialect, prompt("reply", "x"), stream=stream)
    assert tiny["usage"][1] == 1  # never 0


@pytest.mark.parametrize("dialect,stream", MODES)
def test_read_calls_the_read_tool_with_neutral_extras(model: ScriptedModel, dialect: str, stream: bool) -> None:
    tools = [
        tool(dialect, "run_command", {"command": {"type": "string"}}),
        tool(dialect, "read_file", {"path": {"type": "string"}, "limit": {"type": "integer"}}, ["path", "limit"]),
    ]
    first = ask(model, dialect, prompt("read", "/tmp/x/notes.txt"), tools, stream)
    assert first["stop"] == "tool_use" and first["text"] == ""
    [call] = first["tool_calls"]
    assert call["name"] == "read_file" and call["arguments"] == {"path": "/tmp/x/notes.txt", "limit": 0}
    second = ask(model, dialect, prompt("read", "/tmp/x/notes.txt"), tools, stream)
    assert call["id"].startswith("call_") and second["tool_calls"][0]["id"] != call["id"]


@pytest.mark.parametrize("dialect,stream", MODES)
def test_write_prefers_a_write_tool_over_an_edit_tool(model: ScriptedModel, dialect: str, stream: bool) -> None:
    tools = [
        tool(dialect, "edit_file", {"path": {"type": "string"}, "new_content": {"type": "string"}}),
        tool(dialect, "create_directory", {"path": {"type": "string"}}),
        tool(dialect, "WriteFile", {"file_path": {"type": "string"}, "content": {"type": "string"}}),
    ]
    answer = ask(model, dialect, prompt("write", "/tmp/x/new.txt", "some text to write"), tools, stream)
    [call] = answer["tool_calls"]
    assert call["name"] == "WriteFile"
    assert call["arguments"] == {"file_path": "/tmp/x/new.txt", "content": "some text to write"}


@pytest.mark.parametrize("dialect,stream", MODES)
def test_run_and_mcp(model: ScriptedModel, dialect: str, stream: bool) -> None:
    tools = [
        tool(dialect, "terminal_output", {"terminal_id": {"type": "string"}}),
        tool(
            dialect, "exec", {"argv": {"type": "array"}, "cmd": {"type": "array", "items": {"type": "string"}}}, ["cmd"]
        ),
        tool(dialect, "mcp__conformance__conformance_echo", {"text": {"type": "string"}}),
    ]
    ran = ask(model, dialect, prompt("run", "echo conformance"), tools, stream)
    assert ran["tool_calls"][0]["name"] == "exec"
    assert ran["tool_calls"][0]["arguments"] == {"cmd": ["sh", "-c", "echo conformance"]}
    echoed = ask(model, dialect, prompt("mcp", "conformance_echo"), tools, stream)
    assert echoed["tool_calls"][0]["name"] == "mcp__conformance__conformance_echo"
    assert echoed["tool_calls"][0]["arguments"] == {"text": "conformance"}


@pytest.mark.parametrize("dialect,stream", MODES)
def test_no_fitting_tool_still_ends_the_turn(model: ScriptedModel, dialect: str, stream: bool) -> None:
    tools = [tool(dialect, "read_file", {"path": {"type": "string"}})]
    answer = ask(model, dialect, prompt("run", "ls"), tools, stream)
    assert (answer["text"], answer["stop"], answer["tool_calls"]) == ("No tool fits the directive run.", "end_turn", [])
    nothing = ask(model, dialect, prompt("mcp", "conformance_echo"), None, stream)
    assert nothing["text"] == "No tool fits the directive mcp."


@pytest.mark.parametrize("dialect,stream", MODES)
def test_after_the_tool_result_it_says_done(model: ScriptedModel, dialect: str, stream: bool) -> None:
    tools = [tool(dialect, "read_file", {"path": {"type": "string"}})]
    result = "line one of the file\n" + "y" * 300
    conversation = prompt("read", "/tmp/a.txt") + call_and_result(dialect, "call_7", result)
    answer = ask(model, dialect, conversation, tools, stream)
    assert (answer["text"], answer["stop"], answer["tool_calls"]) == ("Done: " + result[:200], "end_turn", [])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_prompt_is_the_latest_user_text_not_an_earlier_one(model: ScriptedModel, dialect: str) -> None:
    tools = [tool(dialect, "read_file", {"path": {"type": "string"}})]
    earlier = prompt("read", "/tmp/a.txt") + call_and_result(dialect, "call_1", "old result")
    earlier += [{"role": "assistant", "content": "Done: old result"}]
    # The next prompt, as content parts/blocks: its own directive counts, not the earlier one's result.
    parts = [{"type": "text", "text": "now this"}, {"type": "text", "text": directive_line("read", "/tmp/b.txt")}]
    answer = ask(model, dialect, [*earlier, {"role": "user", "content": parts}], tools)
    assert answer["tool_calls"][0]["arguments"] == {"path": "/tmp/b.txt"}


# --- slow answers and the client hanging up ---------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_slow_stops_when_the_client_hangs_up(model: ScriptedModel, dialect: str) -> None:
    body = body_for(dialect, prompt("slow"), [], True)
    started = time.monotonic()
    ticks = 0
    with HTTP.stream("POST", endpoint(model, dialect), json=body, timeout=10) as response:
        for line in response.iter_lines():
            ticks += '"tick "' in line
            if ticks == 3:
                break
    # Leaving the block closes the connection mid-body: how a cancelled turn looks to a model server.
    poll_until(lambda: model.active == 0, 5, "the slow answer to stop after the client hung up")
    assert time.monotonic() - started < 10  # far before slow_seconds (30)
    assert ask(model, dialect, [user("still there?")])["text"] == DEFAULT_REPLY


@pytest.mark.parametrize("dialect,stream", MODES)
def test_slow_finishes_normally_after_slow_seconds(dialect: str, stream: bool) -> None:
    with ScriptedModel(slow_seconds=0.2, tick=0.05) as model:
        started = time.monotonic()
        answer = ask(model, dialect, prompt("slow"), stream=stream)
        assert time.monotonic() - started >= 0.2
    assert answer["stop"] == "end_turn"
    assert answer["text"] == "tick " * 5  # one now, then one every tick for slow_seconds


def test_slow_without_streaming_stops_when_the_client_hangs_up(model: ScriptedModel) -> None:
    with pytest.raises(httpx.ReadTimeout):
        HTTP.post(endpoint(model, "openai"), json=body_for("openai", prompt("slow"), [], False), timeout=0.3)
    poll_until(lambda: model.active == 0, 5, "the waiting slow answer to notice the hang-up")


# --- what the real APIs refuse --------------------------------------------------------------------------------


def post_raw(model: ScriptedModel, dialect: str, content: bytes) -> httpx.Response:
    response = HTTP.post(endpoint(model, dialect), content=content, headers={"content-type": "application/json"})
    assert isinstance(response, httpx.Response)  # HTTP builds its client at first use: its attributes are Any
    return response


def assert_dialect_error(dialect: str, response: httpx.Response, status: int = 400) -> str:
    assert response.status_code == status, response.text
    obj = response.json()
    if dialect == "anthropic":
        assert obj["type"] == "error" and obj["error"]["type"] == "invalid_request_error"
    else:
        assert obj["error"]["type"] == "invalid_request_error" and "param" in obj["error"]
    message: str = obj["error"]["message"]
    return message


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_call_without_its_result_or_a_result_without_its_call_is_400(model: ScriptedModel, dialect: str) -> None:
    call, result = call_and_result(dialect, "call_9", "r")
    for messages in ([user("q"), call], [user("q"), call, user("next")], [user("q"), result]):
        response = HTTP.post(endpoint(model, dialect), json=body_for(dialect, messages, [], False))
        assert "call_9" in assert_dialect_error(dialect, response)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"messages": [{"role": "user", "content": "hi"}]}',
        b'{"model": "m", "messages": []}',
        b'{"model": "m", "messages": "hi"}',
        b'{"model": "m", "messages": [3]}',
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}',
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": {}}',
        b'{"model": "m", "messages": [{"role": "assistant", "tool_calls": 5}, {"role": "tool"}]}',
    ],
)
def test_a_malformed_body_is_400_in_the_dialect_shape(model: ScriptedModel, dialect: str, content: bytes) -> None:
    assert_dialect_error(dialect, post_raw(model, dialect, content))
    assert ask(model, dialect, [user("hi")])["text"] == DEFAULT_REPLY  # and the server carries on


def raw_http(model: ScriptedModel, request: bytes) -> bytes:
    """Send bytes on a fresh connection and read the answer until the server closes it."""
    port = int(model.placeholders()["port"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_hostile_framing_gets_an_answer_and_the_server_carries_on(model: ScriptedModel) -> None:
    bad_length = raw_http(model, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: \xc2\xb2\r\n\r\n{}")
    assert bad_length.startswith(b"HTTP/1.1 400")
    huge = raw_http(model, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{}")
    assert huge.startswith(b"HTTP/1.1 413")
    bad_chunk = raw_http(model, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert bad_chunk.startswith(b"HTTP/1.1 400")
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": [user("hi")]}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    ok = raw_http(model, b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
    assert ok.startswith(b"HTTP/1.1 200") and DEFAULT_REPLY.encode() in ok
    raw_http(model, b"garbage\r\n\r\n")  # the stdlib's own handling of a request line that is not one
    assert ask(model, "openai", [user("hi")])["text"] == DEFAULT_REPLY


def test_models_unknown_paths_and_the_record(model: ScriptedModel) -> None:
    for path in ("/v1/models", "/models"):
        listed = HTTP.get(model.url + path).json()
        assert listed["object"] == "list" and listed["has_more"] is False
        assert all(m["id"] and m["type"] == "model" and m["object"] == "model" for m in listed["data"])
    assert HTTP.post(model.url + "/v1/embeddings", json={}).status_code == 404
    assert HTTP.post(model.url + "/messages", json=body_for("anthropic", [user("x")], [], False)).status_code == 200
    assert HTTP.post(model.url + "/chat/completions", json=body_for("openai", [user("x")], [], False)).is_success
    paths = [r.path for r in model.requests]
    assert paths == ["/v1/models", "/models", "/v1/embeddings", "/messages", "/chat/completions"]
    assert model.requests[-1].body["model"] == "any-model-name" and "host" in model.requests[-1].headers
    port = model.placeholders()["port"]
    assert model.placeholders() == {
        "url": f"http://127.0.0.1:{port}",
        "openai": f"http://127.0.0.1:{port}/v1",
        "anthropic": f"http://127.0.0.1:{port}",
        "port": port,
    }


# --- the pure parts: choosing a tool ----------------------------------------------------------------------------


def tools_of(*specs: tuple[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return list(specs)


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_read_needs_a_path_like_property_and_prefers_read_in_the_name() -> None:
    tools = tools_of(
        ("open_url", obj(url={"type": "string"})),
        ("view_image", obj(uri={"type": "string"})),
        ("cat", obj(filename={"type": "string"})),
        ("Read", obj(absolute_path={"type": "string"})),
    )
    call = choose_call(Directive("read", path="/a/b.txt"), tools)
    assert call == ToolCall("Read", {"absolute_path": "/a/b.txt"})
    assert choose_call(Directive("read", path="/a/b.txt"), tools[:2]) == ToolCall(
        "view_image", {"uri": "file:///a/b.txt"}
    )
    assert choose_call(Directive("read", path="/a"), tools_of(("open_url", obj(url={})))) is None


def test_run_prefers_bash_and_passes_a_string_command() -> None:
    tools = tools_of(
        ("run_tests", obj(command={"type": "string"})), ("Bash", obj(command={"type": ["string", "null"]}))
    )
    assert choose_call(Directive("run", text="ls -l"), tools) == ToolCall("Bash", {"command": "ls -l"})


def test_mcp_prefers_the_exact_name_over_a_suffix() -> None:
    tools = tools_of(("mcp__a__echo", obj()), ("echo", obj(text={"type": "string"})))
    assert choose_call(Directive("mcp", text="echo"), tools) == ToolCall("echo", {"text": "conformance"})
    assert choose_call(Directive("mcp", text="echo"), tools[:1]) == ToolCall("mcp__a__echo", {"text": "conformance"})
    assert choose_call(Directive("reply", text="x"), tools) is None


def test_neutral_values() -> None:
    assert [neutral_value({"type": t}) for t in ("string", "integer", "number", "boolean", "array", "object")] == [
        "",
        0,
        0,
        False,
        [],
        {},
    ]
    assert neutral_value({"type": ["null", "integer"]}) == 0
    assert neutral_value({"type": "null"}) is None
    assert neutral_value({"enum": ["a", "b"], "type": "string"}) == "a"
    assert neutral_value({"default": 3}) == 3
    assert neutral_value(None) == "" and neutral_value({"type": 7}) == ""


def test_required_properties_are_filled_even_undeclared_ones() -> None:
    schema = {"properties": {"path": {}, "n": {"type": "number"}}, "required": ["path", "n", "ghost", 5]}
    call = choose_call(Directive("read", path="/p"), tools_of(("read", schema)))
    assert call == ToolCall("read", {"path": "/p", "n": 0, "ghost": ""})


def test_a_user_message_carrying_tool_results_is_not_the_prompt() -> None:
    body = {
        "messages": [
            user(directive_line("read", "/x")),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "r", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "the text"}]},
                    {"type": "text", "text": "a reminder the agent added"},
                ],
            },
        ]
    }
    assert prompt_and_results("anthropic", body) == (directive_line("read", "/x"), ["the text"])
    assert decide("anthropic", body, lambda: "call_x")[0].text == "Done: the text"


# --- hostile input never raises ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
key_names = st.sampled_from(["path", "file_path", "uri", "content", "text", "command", "cmd", "x"]) | st.text(
    max_size=8
)
schemas = st.fixed_dictionaries(
    {},
    optional={
        "type": json_values,
        "properties": st.dictionaries(key_names, json_values, max_size=5) | json_values,
        "required": st.lists(key_names | json_values, max_size=4) | json_values,
    },
)
tool_names = st.sampled_from(["read_file", "Write", "bash", "mcp__s__echo", "echo", "edit"]) | st.text(max_size=10)
openai_tools = st.lists(
    st.fixed_dictionaries(
        {"function": st.fixed_dictionaries({"name": tool_names | json_values, "parameters": schemas | json_values})}
    )
    | json_values,
    max_size=5,
)
anthropic_tools = st.lists(
    st.fixed_dictionaries({"name": tool_names | json_values, "input_schema": schemas | json_values}) | json_values,
    max_size=5,
)
directives = st.builds(
    Directive,
    st.sampled_from(["reply", "slow", "read", "write", "run", "mcp"]),
    st.text(max_size=10),
    st.text(max_size=10),
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]) | json_values},
        optional={"content": json_values | st.text(max_size=40), "tool_calls": json_values},
    )
    | json_values,
    max_size=5,
)


@settings(max_examples=examples(200), deadline=None)
@given(directive=directives, openai=openai_tools, anthropic=anthropic_tools)
def test_choosing_never_raises_on_any_declared_tools(directive: Directive, openai: Any, anthropic: Any) -> None:
    for dialect, tools in (("openai", openai), ("anthropic", anthropic)):
        declared = declared_tools(dialect, {"tools": tools})
        call = choose_call(directive, declared)
        if call is not None:
            assert call.name in [name for name, _ in declared]
            json.dumps(call.arguments)  # it goes on the wire


@settings(max_examples=examples(200), deadline=None)
@given(
    body=st.fixed_dictionaries(
        {"model": st.just("m") | json_values, "messages": messages, "tools": openai_tools | anthropic_tools}
    )
    | json_values
)
def test_deciding_never_raises_on_any_body(body: Any) -> None:
    for dialect in DIALECTS:
        request_problem(dialect, body)
        prompt_and_results(dialect, body)
        answer, call_id = decide(dialect, body, lambda: "call_1")
        assert (answer.call is None) == (call_id == "")


@pytest.mark.parametrize(
    ("error", "printed"),
    [
        (ConnectionResetError(104, "Connection reset by peer"), False),
        (BrokenPipeError(32, "Broken pipe"), False),
        (ValueError("a bug in a handler"), True),
    ],
)
def test_the_servers_are_quiet_about_a_client_that_hung_up_and_only_about_that(
    error: BaseException, printed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """background_server.OwnedHTTPServer (the scripted model's, the tests' model and web servers'): a client gone
    mid-request is how connections end, not a traceback in the run's stderr; any other error in a handler still is."""
    from ama_conformance.servers.background import OwnedHTTPServer

    server = OwnedHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        try:
            raise error
        except (
            ConnectionError,
            ValueError,
        ):  # handle_error reads the exception being handled, as socketserver calls it
            server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    err = capsys.readouterr().err
    assert (type(error).__name__ in err and "Traceback" in err) == printed, err


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_each_reply_has_an_id_of_its_own(model: ScriptedModel, dialect: str) -> None:
    """As the real APIs do: an agent that tells replies apart by id must not see a run's replies as one."""
    url = endpoint(model, dialect)
    whole = [
        HTTP.post(url, content=json.dumps(body_for(dialect, [user("hi")], [], False)), headers=JSON, timeout=10).json()
        for _ in range(2)
    ]
    streamed: list[set[str]] = []
    for _ in range(2):
        body = json.dumps(body_for(dialect, [user("hi")], [], True))
        with HTTP.stream("POST", url, content=body, headers=JSON, timeout=10) as response:
            objs = [json.loads(data) for _, data in sse_events(response.iter_lines()) if data != "[DONE]"]
        ids = {o["id"] for o in objs if "id" in o} | {o["message"]["id"] for o in objs if "message" in o}
        streamed.append(ids)
    assert whole[0]["id"] != whole[1]["id"]
    assert all(len(ids) == 1 for ids in streamed)  # one reply, one id, in every chunk that carries it
    assert streamed[0] != streamed[1]
