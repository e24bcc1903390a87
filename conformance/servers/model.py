"""The conformance suite's scripted model: an HTTP server on 127.0.0.1 speaking OpenAI Chat Completions and the
Anthropic Messages API, so that any agent pointed at it (by its base-URL environment variable) calls tools.

    with ScriptedModel(slow_seconds=30.0, tick=0.05) as model:
        env = {"OPENAI_BASE_URL": model.openai_url, "ANTHROPIC_BASE_URL": model.anthropic_url}
        ...  # run the agent; every request lands in model.requests

It is stateless: each answer is decided from the request body alone. The latest user prompt's directive
(conformance/core/directives.py) says what to do: reply with text (after some reasoning, for `think`), stream slowly
until the client hangs up (how a cancel looks from here), or make one call to whichever declared tool fits a
read, a write, a command, a plan or an MCP tool — and once the conversation holds that call's result, say "Done:
<result>". Like the real APIs it refuses (400, in the endpoint's error shape) a malformed body and a conversation
whose tool calls and results do not pair up. Nothing an agent sends can stop the server: every failure is an
answer or a closed connection.
"""

from __future__ import annotations

import itertools
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ama_conformance.core.directives import Directive, delegated_prompt, parse_directive
from ama_conformance.servers.background import BackgroundServer, OwnedHTTPServer
from ama_conformance.servers.model_dialects import (
    ModelHandler,
    RecordedRequest,
    anthropic_message,
    anthropic_pairing_error,
    declared_tools,
    invalid_request,
    openai_completion,
    openai_pairing_error,
    prompt_and_results,
    render_anthropic,
    render_openai,
    sse_event,
)

DEFAULT_REPLY = "Conformance reply."
TICK_TEXT = "tick "
MODELS = ("conformance-model", "gpt-4.1", "gpt-4o-mini", "claude-sonnet-4-5", "claude-haiku-4-5")
MAX_BODY = 64 * 1024 * 1024  # a long session's request is megabytes; this is far past any real one

# --- choosing the tool call (pure: the declared tools are written by an unknown agent) -------------------------

PATH_KEYS = ("path", "file_path", "filePath", "file", "filename", "absolute_path", "target_file", "uri")
CONTENT_KEYS = ("content", "text", "contents", "new_content", "file_text", "newText")
COMMAND_KEYS = ("command", "cmd", "script")
# The words a fitting tool's name contains, best first (a name with an earlier word wins).
NAME_WORDS = {
    "read": ("read", "view", "cat", "open"),
    "write": ("write", "create", "save", "edit"),
    "run": ("bash", "shell", "exec", "run", "command", "terminal"),
    "plan": ("todo", "plan", "task"),
    "delegate": ("task", "delegate", "subagent", "agent"),  # ama's, Claude Code's and opencode's are `task`/`Task`
}
# The delegation tool's property for what the sub-agent is asked, and for its short title.
PROMPT_KEYS = ("prompt", "task", "instructions", "message", "query")
TITLE_KEYS = ("description", "title", "name")
# The property of a plan item that holds its words (the rest get their enum's first value or a neutral one).
ITEM_TEXT_KEYS = ("content", "text", "title", "description", "task", "step", "name")
_NEUTRAL: dict[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _first_key(props: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in props), None)


def _types(prop: Any) -> list[str]:
    """The JSON types a property schema names (`"type": "x"` or `"type": ["x", "null"]`)."""
    t = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(t, str):
        return [t]
    return [x for x in t if isinstance(x, str)] if isinstance(t, list) else []


def neutral_value(prop: Any) -> Any:
    """A harmless value a property schema accepts: its const, default or first enum value when it names one
    (a neutral value of the type may not be allowed), else the type's empty value ("" when it has no type)."""
    if isinstance(prop, dict):
        if "const" in prop:
            return prop["const"]
        if "default" in prop:
            return prop["default"]
        enum = prop.get("enum")
        if isinstance(enum, list) and enum:
            return enum[0]
    types = [t for t in _types(prop) if t != "null"]
    if not types:
        return None if _types(prop) == ["null"] else ""
    return _NEUTRAL.get(types[0], "")


def _path_value(key: str, path: str) -> str:
    # A `uri` property wants a URI; an absolute path has an exact file: URI.
    if key == "uri" and path.startswith("/"):
        return PurePosixPath(path).as_uri()
    return path


def _fill(schema: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """`given`, plus a neutral value for every other required property."""
    props = _properties(schema)
    required = schema.get("required")
    args = dict(given)
    for key in required if isinstance(required, list) else []:
        if isinstance(key, str) and key not in args:
            args[key] = neutral_value(props.get(key))
    return args


def _by_name(tools: list[tuple[str, dict[str, Any]]], words: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """The tools whose name contains one of `words` (case-insensitive), best word first, then in order."""
    ranked: list[tuple[int, int, str, dict[str, Any]]] = []
    for n, (name, schema) in enumerate(tools):
        lowered = name.lower()
        rank = next((i for i, w in enumerate(words) if w in lowered), None)
        if rank is not None:
            ranked.append((rank, n, name, schema))
    return [(name, schema) for _, _, name, schema in sorted(ranked, key=lambda r: (r[0], r[1]))]


def _mcp_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    # MCP tools reach the model under a prefixed name (e.g. mcp__server__NAME): an exact name first.
    exact = [t for t in tools if t[0] == directive.text]
    fits = exact or [t for t in tools if t[0].endswith(directive.text)]
    if not fits:
        return None
    name, schema = fits[0]
    return ToolCall(name, _fill(schema, {"text": "conformance"}))


def _read_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    for name, schema in _by_name(tools, NAME_WORDS["read"]):
        key = _first_key(_properties(schema), PATH_KEYS)
        if key is not None:
            return ToolCall(name, _fill(schema, {key: _path_value(key, directive.path)}))
    return None


def _write_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    for name, schema in _by_name(tools, NAME_WORDS["write"]):
        props = _properties(schema)
        key, content_key = _first_key(props, PATH_KEYS), _first_key(props, CONTENT_KEYS)
        if key is not None and content_key is not None:
            return ToolCall(name, _fill(schema, {key: _path_value(key, directive.path), content_key: directive.text}))
    return None


def _run_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    for name, schema in _by_name(tools, NAME_WORDS["run"]):
        props = _properties(schema)
        key = _first_key(props, COMMAND_KEYS)
        if key is None:
            continue
        command: Any = directive.text
        if "array" in _types(props[key]) and "string" not in _types(props[key]):
            command = ["sh", "-c", directive.text]
        return ToolCall(name, _fill(schema, {key: command}))
    return None


def _delegate_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    """A call to a delegation (task) tool whose sub-agent is asked to reply the directive's text
    (directives.delegated_prompt)."""
    for name, schema in _by_name(tools, NAME_WORDS["delegate"]):
        props = _properties(schema)
        key = _first_key(props, PROMPT_KEYS)
        if key is None or "string" not in _types(props[key]):
            continue
        given = {key: delegated_prompt(directive.text)}
        title = _first_key({k: v for k, v in props.items() if k != key}, TITLE_KEYS)
        if title is not None:
            given[title] = "Conformance delegation"
        return ToolCall(name, _fill(schema, given))
    return None


def _plan_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    """A call to a plan (todo) tool with one item: the first array property whose items are objects gets one,
    its text property set to the step and every other required property its enum's first value or a neutral one."""
    step = directive.text or "Conformance step"
    for name, schema in _by_name(tools, NAME_WORDS["plan"]):
        for key, prop in _properties(schema).items():
            items = prop.get("items") if isinstance(prop, dict) and "array" in _types(prop) else None
            if not isinstance(items, dict) or "object" not in _types(items):
                continue
            text_key = _first_key(_properties(items), ITEM_TEXT_KEYS)
            if text_key is None:
                continue
            return ToolCall(name, _fill(schema, {key: [_fill(items, {text_key: step})]}))
    return None


# Each verb that calls a tool, and how its call is chosen.
_CALLS: dict[str, Callable[[Directive, list[tuple[str, dict[str, Any]]]], ToolCall | None]] = {
    "mcp": _mcp_call,
    "plan": _plan_call,
    "delegate": _delegate_call,
    "read": _read_call,
    "write": _write_call,
    "run": _run_call,
}


def choose_call(directive: Directive, tools: list[tuple[str, dict[str, Any]]]) -> ToolCall | None:
    """The one tool call that carries out `directive` with the best fitting of `tools` ((name, input schema)
    pairs), or None when none fits (or the directive calls no tool)."""
    chooser = _CALLS.get(directive.verb)
    return chooser(directive, tools) if chooser is not None else None


# --- deciding the answer -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    text: str = ""
    call: ToolCall | None = None
    slow: bool = False
    thinking: str = ""  # reasoning streamed before the text (OpenAI `reasoning_content`, Anthropic thinking)


def decide(dialect: str, body: Any, next_id: Callable[[], str]) -> tuple[Answer, str]:
    """What to answer `body` with, and the tool call id it uses ("" when none)."""
    prompt, results = prompt_and_results(dialect, body)
    directive = parse_directive(prompt) if prompt is not None else None
    if directive is None:
        return Answer(DEFAULT_REPLY), ""
    if directive.verb == "reply":
        return Answer(directive.text or DEFAULT_REPLY), ""
    if directive.verb == "slow":
        return Answer(slow=True), ""
    if directive.verb == "think":
        return Answer(DEFAULT_REPLY, thinking=directive.text or "Thinking it over."), ""
    if results:
        return Answer("Done: " + results[-1][:200]), ""
    call = choose_call(directive, declared_tools(dialect, body))
    if call is None:
        return Answer(f"No tool fits the directive {directive.verb}."), ""
    return Answer(call=call), next_id()


_ROLES = {
    "openai": frozenset({"system", "developer", "user", "assistant", "tool", "function"}),
    "anthropic": frozenset({"user", "assistant"}),  # the system prompt is a top-level parameter there
}


Problem = tuple[str, str | None]  # why a real API refuses a body, and the parameter at fault
# The optional parameters each dialect checks the type of, when present.
_TYPED: dict[str, tuple[tuple[str, type, str], ...]] = {
    "openai": (("stream", bool, "a boolean"), ("tools", list, "an array"), ("stream_options", dict, "an object")),
    "anthropic": (("stream", bool, "a boolean"), ("tools", list, "an array")),
}


def _model_problem(dialect: str, body: dict[str, Any]) -> Problem | None:
    model = body.get("model")
    return None if isinstance(model, str) and model else ("model: a non-empty string is required.", "model")


def _messages_problem(dialect: str, body: dict[str, Any]) -> Problem | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty array is required.", "messages"
    roles = _ROLES[dialect]
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if not isinstance(role, str) or role not in roles:
            return f"messages.{i}: an object with a role among {', '.join(sorted(roles))} is required.", "messages"
    return None


def _typed_problem(dialect: str, body: dict[str, Any]) -> Problem | None:
    for key, kind, what in _TYPED[dialect]:
        if body.get(key) is not None and not isinstance(body[key], kind):
            return f"{key}: {what} is required.", key
    return None


def _pairing_problem(dialect: str, body: dict[str, Any]) -> Problem | None:
    pairing = (openai_pairing_error if dialect == "openai" else anthropic_pairing_error)(body)
    return (pairing, "messages") if pairing is not None else None


def request_problem(dialect: str, body: Any) -> Problem | None:
    """Why a real API would refuse `body` as malformed (message, offending parameter), or None."""
    if not isinstance(body, dict):
        return "The request body must be a JSON object.", None
    for check in (_model_problem, _messages_problem, _typed_problem, _pairing_problem):
        problem = check(dialect, body)
        if problem is not None:
            return problem
    return None


def _tokens(chars: int) -> int:
    return max(1, chars // 4)


def models_list() -> dict[str, Any]:
    """GET /v1/models, readable as either API's list (OpenAI's `object`/`owned_by`, Anthropic's `type`/`has_more`)."""
    data = [
        {
            "id": m,
            "object": "model",
            "created": 0,
            "owned_by": "conformance",
            "type": "model",
            "display_name": m,
            "created_at": "2025-01-01T00:00:00Z",
        }
        for m in MODELS
    ]
    return {"object": "list", "data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}


class _BadBody(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_DIALECTS = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
}
_MODELS_PATHS = ("/v1/models", "/models")
_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]{1,8}")
_LENGTH = re.compile(r"[0-9]{1,12}")  # str.isdigit() would take "²", and int() refuses thousands of digits


def _parsed(dialect: str, text: str) -> tuple[Any, Problem | None]:
    """A request body's JSON (None when it is none), and why a real API would refuse it, if it would."""
    try:
        body = json.loads(text) if text else None
    except ValueError:
        return None, ("The request body is not valid JSON.", None)
    return body, request_problem(dialect, body)


def _reply(answer: Answer, call_id: str, ticks: int, input_tokens: int) -> dict[str, Any]:
    """The reply (model_dialects' shape) that carries `answer`; a slow one's text is one tick (sent `ticks` times)."""
    reply: dict[str, Any] = {"chunk_size": 16}
    if answer.slow:
        reply.update(text=TICK_TEXT, chunk_size=len(TICK_TEXT))  # one delta, repeated `ticks` times
        out_chars = len(TICK_TEXT) * ticks
    elif answer.call is not None:
        reply["tool_calls"] = [{"id": call_id, "name": answer.call.name, "arguments": answer.call.arguments}]
        out_chars = len(answer.call.name) + len(json.dumps(answer.call.arguments))
    else:
        reply["text"] = answer.text
        out_chars = len(answer.text)
        if answer.thinking:
            reply["thinking"] = answer.thinking
            out_chars += len(answer.thinking)
    reply["usage"] = {"input": input_tokens, "output": _tokens(out_chars)}
    return reply


def _is_tick(data: str) -> bool:
    """Whether an SSE data payload is the text delta of a slow answer (OpenAI chunk or Anthropic event)."""
    try:
        obj = json.loads(data)
    except ValueError:
        return False  # OpenAI's [DONE]
    if not isinstance(obj, dict):
        return False
    delta = obj.get("delta")
    if isinstance(delta, dict) and delta.get("type") == "text_delta":
        return delta.get("text") == TICK_TEXT
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        return isinstance(delta, dict) and delta.get("content") == TICK_TEXT
    return False


class _Handler(ModelHandler):
    server: OwnedHTTPServer
    timeout = 60  # a client that stops sending mid-request frees its thread

    @property
    def owner(self) -> ScriptedModel:
        owner: ScriptedModel = self.server.owner
        return owner

    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def _guarded(self, work: Callable[[], None]) -> None:
        """Run `work`; whatever goes wrong becomes an answer or a closed connection, never a traceback."""
        with self.owner._lock:
            self.owner._active += 1
        try:
            work()
        except (OSError, ValueError):
            self.close_connection = True  # the client went away (or timed out): nothing to tell it
        except Exception as exc:  # a bug here must not look like the agent's fault, nor kill the thread noisily
            self.close_connection = True
            try:
                self.send_json(500, {"error": {"message": f"scripted model: internal error: {exc!r}"}})
            except OSError:
                pass
        finally:
            with self.owner._lock:
                self.owner._active -= 1

    def _get(self) -> None:
        path = self.path.split("?")[0]
        self.owner._record(RecordedRequest(self.path, self._headers(), None))
        if path in _MODELS_PATHS:
            self.send_json(200, models_list())
        else:
            self.send_json(404, {"error": {"message": f"scripted model: no endpoint GET {path}", "type": "not_found"}})

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            return self._read_chunked()
        length = (self.headers.get("content-length") or "0").strip()
        if not _LENGTH.fullmatch(length):
            self.close_connection = True  # where this body ends is unknown
            raise _BadBody(400, f"Content-Length {length[:40]!r} is not a length.")
        if int(length) > MAX_BODY:
            self.close_connection = True  # the body is left unread
            raise _BadBody(413, f"The request body is over {MAX_BODY} bytes.")
        return self.rfile.read(int(length))

    def _read_chunked(self) -> bytes:
        data = bytearray()
        while True:
            line = self.rfile.readline(1024).strip().split(b";")[0]
            if not _CHUNK_SIZE.fullmatch(line):
                self.close_connection = True
                raise _BadBody(400, "A malformed chunk in the request body.")
            size = int(line, 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers, up to the blank line
                    pass
                return bytes(data)
            if len(data) + size > MAX_BODY:
                self.close_connection = True
                raise _BadBody(413, f"The request body is over {MAX_BODY} bytes.")
            data += self.rfile.read(size)
            self.rfile.readline(16)

    def _post(self) -> None:
        path = self.path.split("?")[0]
        dialect = _DIALECTS.get(path, "")
        try:
            raw = self._read_body()
        except _BadBody as bad:
            self.owner._record(RecordedRequest(self.path, self._headers(), None))
            self.send_json(bad.status, invalid_request(dialect or "openai", str(bad), None))
            return
        text = raw.decode("utf-8", errors="replace")
        body, problem = _parsed(dialect or "openai", text)
        self.owner._record(RecordedRequest(self.path, self._headers(), body))
        if not dialect:
            self.send_json(404, {"error": {"message": f"scripted model: no endpoint POST {path}", "type": "not_found"}})
            return
        if problem is not None:
            self.send_json(400, invalid_request(dialect, problem[0], problem[1]))
            return
        assert isinstance(body, dict)  # request_problem() refuses anything else
        answer, call_id = decide(dialect, body, self.owner._next_call_id)
        self._answer(dialect, body, answer, call_id, _tokens(len(text)))

    def _answer(self, dialect: str, body: dict[str, Any], answer: Answer, call_id: str, input_tokens: int) -> None:
        # One tick now, then one every `tick` seconds for `slow_seconds` (bounded: an absurd ratio is not a crash).
        ticks = 1 + int(min(self.owner.slow_seconds / self.owner.tick, 1e9)) if answer.slow else 0
        reply = _reply(answer, call_id, ticks, input_tokens)
        if body.get("stream") is not True:
            self._answer_whole(dialect, body["model"], answer, reply, ticks)
            return
        if dialect == "openai":
            options = body.get("stream_options") or {}
            events = render_openai(reply, body["model"], bool(options.get("include_usage")))
        else:
            events = render_anthropic(reply, body["model"])
        self.start_chunked(200, "text/event-stream", {"cache-control": "no-cache"})
        for name, data in events:
            event = sse_event(name, data)
            self.write_chunk(event)
            # The one tick delta of a slow answer: again every `tick` seconds until the client hangs up.
            if answer.slow and _is_tick(data) and self._tick_on(ticks - 1, event):
                return
        self.end_chunks()

    def _answer_whole(self, dialect: str, model: str, answer: Answer, reply: dict[str, Any], ticks: int) -> None:
        """The answer to a request that does not stream: a slow one after `slow_seconds`, all its ticks at once."""
        if answer.slow:
            if self._wait_or_gone(self.owner.slow_seconds):
                return
            reply["text"] = TICK_TEXT * ticks
        whole = openai_completion(reply, model) if dialect == "openai" else anthropic_message(reply, model)
        self.send_json(200, whole)

    def _tick_on(self, more: int, event: bytes) -> bool:
        """A slow answer's tick `more` times again, one every `tick` seconds; True when the client hung up."""
        for _ in range(more):
            if self._wait_or_gone(self.owner.tick):
                return True
            self.write_chunk(event)
        return False

    def _wait_or_gone(self, seconds: float) -> bool:
        """Wait `seconds`; True as soon as the client hangs up (or the server closes) meanwhile."""
        deadline = time.monotonic() + seconds
        while not self.owner._closing.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if not ready:
                continue
            try:
                peeked = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                return True
            if not peeked:
                return True  # EOF: the client closed its side
            self.owner._closing.wait(min(left, 0.05))  # bytes from the client, not a hang-up: poll calmly
        return True


class ScriptedModel(BackgroundServer):
    """The suite's model. `requests` lists every request (RecordedRequest: path, lower-cased headers, parsed
    JSON body or None, arrival time); `active` counts the requests being answered right now."""

    handler_class = _Handler
    thread_name = "scripted-model"

    def __init__(
        self, host: str = "127.0.0.1", *, port: int = 0, slow_seconds: float = 30.0, tick: float = 0.05
    ) -> None:
        super().__init__(host, port)
        self.slow_seconds = max(0.0, slow_seconds)
        self.tick = max(0.001, tick)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._active = 0

    @property
    def active(self) -> int:
        with self._lock:
            return self._active

    def placeholders(self) -> dict[str, str]:
        """What `{url}`, `{openai}`, `{anthropic}` and `{port}` stand for in the suite's --model-env values."""
        assert self._httpd is not None, "server not started"
        return {
            "url": self.url,
            "openai": self.openai_url,
            "anthropic": self.anthropic_url,
            "port": str(self._httpd.server_address[1]),
        }

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def _next_call_id(self) -> str:
        with self._lock:
            return f"call_{next(self._ids)}"
