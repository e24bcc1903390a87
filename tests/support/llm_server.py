"""A scripted model server on 127.0.0.1 that speaks OpenAI Chat Completions and the Anthropic Messages API,
streaming, over real HTTP — so provider tests exercise httpx, SSE framing, timeouts and retries for real.

    with LLMServer() as server:
        server.enqueue({"text": "hello", "usage": {"input": 12, "output": 3}})
        ...  # point a provider at server.openai_url or server.anthropic_url
        assert server.requests[0].body["model"] == "gpt-test"

Each POST takes the next reply from the queue and renders it in the dialect of the endpoint it hit
(`/v1/chat/completions` → OpenAI, `/v1/messages` → Anthropic). Reply dicts (every key optional):

  normal reply
    thinking: str              reasoning text (OpenAI: `reasoning_content` deltas; Anthropic: a thinking block)
    signature: str             Anthropic thinking signature (default "sig-" + a hash of the thinking)
    redacted_thinking: str     Anthropic: a redacted_thinking block with this data, before the thinking
    reasoning_field: str       OpenAI: delta field for thinking ("reasoning_content" default, or "reasoning")
    text: str                  answer text, streamed in pieces
    tool_calls: [{"id", "name", "arguments": dict | str}]   arguments streamed in fragments
    interleave: bool           OpenAI: interleave the fragments of parallel tool calls
    usage: {"input", "output", "cache_read", "cache_write", "reasoning"} | None   (None: send no usage;
                               missing keys default to input 10, output 5, the rest 0)
    stop: "end_turn" | "tool_use" | "max_tokens" | "refusal"   (default: tool_use when tool_calls, else end_turn)
    finish_reason, stop_reason: str   send this raw OpenAI finish_reason / Anthropic stop_reason instead
    chunk_size: int            characters per text/argument delta (default 5)
    delay: float               seconds between events (default 0)
    crlf: bool                 end SSE lines with \\r\\n
    events: [dict | str]       send exactly these SSE data objects instead (Anthropic: `event:` = obj["type"];
                               OpenAI: a str is sent verbatim, e.g. "[DONE]")
    break_after: int           send only the first N events, then drop the connection mid-body
    clean_eof: bool            with break_after: end the body properly instead (a stream without a finish)
  error reply
    status: int                answer with this HTTP status and a JSON error body in the endpoint's dialect
    retry_after: str           Retry-After header
    headers: dict              extra response headers (any reply)
    body: dict | str           the error body (default: the dialect's usual error object)
    message: str               the error message inside the default body
  hang: float                  read the request, then send nothing for this many seconds
  hostile replies (any bytes, to test what ama does with a server that misbehaves)
    raw: str | bytes           send exactly this body (status `status`, default 200; `content_type`, default
                               text/event-stream), chunked in pieces of `raw_chunk` bytes, `delay` apart
    sse_lines: [str | bytes]   send these lines verbatim, each ended by "\n" (or "\r\n" with crlf), one chunk each
    keepalive: float           send the first `break_after` events (default none), then `: keepalive` comments
                               this many seconds apart, forever (until the client leaves or the server closes)
    huge: int                  a body of this many bytes (status `status`, default 500, JSON-looking error text),
                               streamed in 64 KiB pieces and never held in memory
    content_type: str          the content-type of any reply

Like the real APIs, the server rejects (HTTP 400 in the endpoint's error shape, without taking a reply from
the queue) a request whose conversation has a tool call without its result or a tool result without its call:
OpenAI wants every `tool_calls[].id` answered by `role: tool` messages before the next other message;
Anthropic wants every `tool_use` answered by a `tool_result` in the next user message. Such rejections are
also listed in `server.rejections`. `LLMServer(check_pairing=False)` turns the check off, for a test that
deliberately sends such a conversation.

An empty queue answers 500 with a body saying the script ran out. Every request is recorded in
`server.requests` (`RecordedRequest`: path, headers with lower-case names, parsed JSON body, the monotonic
`time` it arrived, for checking retry delays, and `sent`: body bytes written to the client so far).
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_OPENAI_STOPS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None when the body was not JSON
    time: float = field(default_factory=time.monotonic)
    sent: int = 0  # body bytes written to the client (hostile replies count them)


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _arguments(call: dict[str, Any]) -> str:
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def _stop(reply: dict[str, Any]) -> str:
    return reply.get("stop") or ("tool_use" if reply.get("tool_calls") else "end_turn")


def _usage(reply: dict[str, Any]) -> dict[str, int] | None:
    if "usage" in reply and reply["usage"] is None:
        return None
    u = {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0, "reasoning": 0}
    u.update(reply.get("usage") or {})
    return u


# --- OpenAI dialect ----------------------------------------------------------------------------------------


def render_openai(reply: dict[str, Any], model: str, include_usage: bool) -> list[tuple[str, str]]:
    if "events" in reply:
        return [("", e if isinstance(e, str) else json.dumps(e)) for e in reply["events"]]
    size = reply.get("chunk_size", 5)
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, str]:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return ("", json.dumps(body))

    out = [chunk({"role": "assistant", "content": ""})]
    field_name = reply.get("reasoning_field", "reasoning_content")
    out += [chunk({field_name: p}) for p in _pieces(reply.get("thinking", ""), size)]
    out += [chunk({"content": p}) for p in _pieces(reply.get("text", ""), size)]
    calls = reply.get("tool_calls") or []
    streams: list[list[dict[str, Any]]] = []
    for i, call in enumerate(calls):
        first = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": ""}}
        frags = [{"index": i, "function": {"arguments": p}} for p in _pieces(_arguments(call), size)]
        streams.append([first, *frags])
    if reply.get("interleave"):
        longest = max((len(s) for s in streams), default=0)
        order = [s[k] for k in range(longest) for s in streams if k < len(s)]
    else:
        order = [frag for s in streams for frag in s]
    out += [chunk({"tool_calls": [frag]}) for frag in order]
    out.append(chunk({}, reply.get("finish_reason") or _OPENAI_STOPS.get(_stop(reply), "stop")))
    usage = _usage(reply)
    if include_usage and usage is not None:
        prompt = usage["input"] + usage["cache_read"]
        out.append(
            (
                "",
                json.dumps(
                    {
                        **base,
                        "choices": [],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": usage["output"],
                            "total_tokens": prompt + usage["output"],
                            "prompt_tokens_details": {"cached_tokens": usage["cache_read"]},
                            "completion_tokens_details": {"reasoning_tokens": usage["reasoning"]},
                        },
                    }
                ),
            )
        )
    out.append(("", "[DONE]"))
    return out


def openai_error(status: int, message: str) -> dict[str, Any]:
    kind = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


# --- Anthropic dialect -------------------------------------------------------------------------------------


def render_anthropic(reply: dict[str, Any], model: str) -> list[tuple[str, str]]:
    def ev(obj: dict[str, Any]) -> tuple[str, str]:
        return (obj["type"], json.dumps(obj))

    if "events" in reply:
        return [ev(e) if isinstance(e, dict) else ("", e) for e in reply["events"]]
    size = reply.get("chunk_size", 5)
    usage = _usage(reply) or {}
    out = [
        ev(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage.get("input", 0),
                        "cache_read_input_tokens": usage.get("cache_read", 0),
                        "cache_creation_input_tokens": usage.get("cache_write", 0),
                        "output_tokens": 1,
                    },
                },
            }
        ),
        ev({"type": "ping"}),
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(ev({"type": "content_block_start", "index": index, "content_block": start}))
        out.extend(ev({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas)
        out.append(ev({"type": "content_block_stop", "index": index}))
        index += 1

    if reply.get("redacted_thinking"):
        block({"type": "redacted_thinking", "data": reply["redacted_thinking"]}, [])
    if reply.get("thinking"):
        thinking = reply["thinking"]
        sig = reply.get("signature") or "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:16]
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(thinking, size)]
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [*deltas, {"type": "signature_delta", "signature": sig}],
        )
    if reply.get("text"):
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(reply["text"], size)])
    for call in reply.get("tool_calls") or []:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(_arguments(call), size)]
        block({"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}, deltas)
    out.append(
        ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.get("stop_reason") or _stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": usage.get("output", 0)},
            }
        )
    )
    out.append(ev({"type": "message_stop"}))
    return out


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# --- what the real APIs check before answering ------------------------------------------------------------


def openai_pairing_error(body: Any) -> str | None:
    """OpenAI's check: each assistant `tool_calls[].id` must be answered by `role: tool` messages before the
    next other message, and each tool message must answer such a call. The wording is OpenAI's."""
    messages = body.get("messages") if isinstance(body, dict) else None
    pending: list[Any] = []
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "tool":
            if msg.get("tool_call_id") not in pending:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                    f"'tool_calls'. (messages.[{i}], tool_call_id {msg.get('tool_call_id')!r})"
                )
            pending.remove(msg.get("tool_call_id"))
            continue
        if pending:
            break
        if msg.get("role") == "assistant":
            pending = [c.get("id") for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(map(str, pending))}"
        )
    return None


def _blocks_of(msg: Any, kind: str) -> list[tuple[int, dict[str, Any]]]:
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return []
    return [(j, b) for j, b in enumerate(content) if isinstance(b, dict) and b.get("type") == kind]


def anthropic_pairing_error(body: Any) -> str | None:
    """Anthropic's check: each `tool_use` block must be answered by a `tool_result` with its id in the next
    message (a user message), and each `tool_result` must answer a `tool_use` of the previous message."""
    messages = body.get("messages") if isinstance(body, dict) else None
    expected: list[Any] = []
    for i, msg in enumerate(messages if isinstance(messages, list) else []):
        role = msg.get("role") if isinstance(msg, dict) else None
        results = _blocks_of(msg, "tool_result")
        answered = [b.get("tool_use_id") for _, b in results]
        missing = [t for t in expected if role != "user" or t not in answered]
        if missing:
            return (
                f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding `tool_result` "
                "block in the next message."
            )
        for j, block in results:
            if block.get("tool_use_id") not in expected:
                return (
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message."
                )
        expected = [b.get("id") for _, b in _blocks_of(msg, "tool_use")] if role == "assistant" else []
    if expected:
        return (
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(map(str, expected))}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        )
    return None


# --- the server --------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked bodies, like the real APIs
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.recorded = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        owner._record(self.recorded)
        path = self.path.split("?")[0]
        if path.endswith("/chat/completions"):
            dialect = "openai"
        elif path.endswith("/v1/messages"):
            dialect = "anthropic"
        else:
            self._json(404, {"error": {"message": f"llm_server: no endpoint {path}"}})
            return
        if owner.check_pairing:
            problem = (openai_pairing_error if dialect == "openai" else anthropic_pairing_error)(body)
            if problem is not None:
                owner._reject(self.recorded, problem)
                if dialect == "openai":
                    err = {
                        "error": {
                            "message": problem,
                            "type": "invalid_request_error",
                            "param": "messages",
                            "code": None,
                        }
                    }
                else:
                    err = {"type": "error", "error": {"type": "invalid_request_error", "message": problem}}
                self._json(400, err)
                return
        reply = owner._next()
        if reply is None:
            n = len(owner.requests)
            self._json(
                500, {"error": {"message": f"llm_server: the script ran out of replies (request #{n} to {path})"}}
            )
            return
        if "hang" in reply:
            owner._closing.wait(float(reply["hang"]))
            self.close_connection = True
            return
        if "raw" in reply or "sse_lines" in reply:
            self._raw(reply)
            return
        if "huge" in reply:
            self._huge(reply)
            return
        if "keepalive" in reply:
            model = (body or {}).get("model", "test-model") if isinstance(body, dict) else "test-model"
            include = dialect == "openai"
            events = render_openai(reply, model, include) if dialect == "openai" else render_anthropic(reply, model)
            self._keepalive(events, reply)
            return
        if "status" in reply:
            self._error(dialect, reply)
            return
        model = (body or {}).get("model", "test-model") if isinstance(body, dict) else "test-model"
        if dialect == "openai":
            include_usage = bool(((body or {}).get("stream_options") or {}).get("include_usage"))
            events = render_openai(reply, model, include_usage)
        else:
            events = render_anthropic(reply, model)
        self._stream(events, reply)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, dialect: str, reply: dict[str, Any]) -> None:
        status = int(reply["status"])
        message = reply.get("message") or f"llm_server: scripted HTTP {status}"
        body = reply.get("body") or (openai_error if dialect == "openai" else anthropic_error)(status, message)
        headers = dict(reply.get("headers") or {})
        if "retry_after" in reply:
            headers["retry-after"] = str(reply["retry_after"])
        self._json(status, body, headers)

    # --- hostile replies

    def _start_chunked(self, status: int, content_type: str, reply: dict[str, Any]) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        for k, v in (reply.get("headers") or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True

    def _chunk(self, payload: bytes) -> None:
        if payload:
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()
            self.recorded.sent += len(payload)

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _raw(self, reply: dict[str, Any]) -> None:
        nl = b"\r\n" if reply.get("crlf") else b"\n"
        if "sse_lines" in reply:
            pieces = [(x.encode() if isinstance(x, str) else x) + nl for x in reply["sse_lines"]]
        else:
            raw = reply["raw"]
            data = raw.encode() if isinstance(raw, str) else raw
            size = int(reply.get("raw_chunk") or max(1, len(data)))
            pieces = [data[i : i + size] for i in range(0, len(data), size)]
        self._start_chunked(int(reply.get("status", 200)), reply.get("content_type", "text/event-stream"), reply)
        delay = float(reply.get("delay", 0.0))
        try:
            for n, piece in enumerate(pieces):
                if delay and n and self.server.owner._closing.wait(delay):
                    return
                self._chunk(piece)
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on the body, as it should for a hostile one

    def _huge(self, reply: dict[str, Any]) -> None:
        total = int(reply["huge"])
        self._start_chunked(int(reply.get("status", 500)), reply.get("content_type", "application/json"), reply)
        head = b'{"error": {"message": "'
        piece = b"x" * 65536
        try:
            self._chunk(head)
            left = total - len(head)
            while left > 0 and not self.server.owner._closing.is_set():
                self._chunk(piece[:left])
                left -= len(piece)
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bounded reader does

    def _keepalive(self, events: list[tuple[str, str]], reply: dict[str, Any]) -> None:
        nl = "\r\n" if reply.get("crlf") else "\n"
        interval = float(reply["keepalive"])
        self._start_chunked(200, reply.get("content_type", "text/event-stream"), reply)
        try:
            for name, data in events[: int(reply.get("break_after") or 0)]:
                self._chunk(((f"event: {name}{nl}" if name else "") + f"data: {data}{nl}{nl}").encode())
            while not self.server.owner._closing.wait(interval):
                self._chunk(f": keepalive{nl}{nl}".encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its deadline passed)

    def _stream(self, events: list[tuple[str, str]], reply: dict[str, Any]) -> None:
        nl = "\r\n" if reply.get("crlf") else "\n"
        self.send_response(200)
        self.send_header("content-type", reply.get("content_type", "text/event-stream"))
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for k, v in (reply.get("headers") or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True
        limit = reply.get("break_after")
        delay = float(reply.get("delay", 0.0))
        try:
            for n, (name, data) in enumerate(events):
                if limit is not None and n >= limit:
                    if reply.get("clean_eof"):
                        break
                    # Drop the connection mid-body: the client sees an incomplete chunked read.
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if delay and n:
                    time.sleep(delay)
                text = (f"event: {name}{nl}" if name else "") + f"data: {data}{nl}{nl}"
                payload = text.encode()
                self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a timeout or a cancelled request); nothing to tell it


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a hanging handler must not hold up close()
    owner: LLMServer


class LLMServer:
    """The scripted server. Start with `start()` or `with`; `url` is `http://127.0.0.1:PORT`."""

    def __init__(self, host: str = "127.0.0.1", *, check_pairing: bool = True) -> None:
        self._host = host
        self.check_pairing = check_pairing  # reject dangling tool calls/results, as the real APIs do
        self.rejections: list[tuple[RecordedRequest, str]] = []
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- scripting

    def enqueue(self, *replies: dict[str, Any]) -> LLMServer:
        with self._lock:
            self._queue.extend(replies)
        return self

    def clear(self) -> None:
        """Drop the replies not yet taken (a cancelled turn leaves its later replies unasked for)."""
        with self._lock:
            self._queue.clear()

    @property
    def pending(self) -> int:
        """Replies not yet taken."""
        with self._lock:
            return len(self._queue)

    def _next(self) -> dict[str, Any] | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def _reject(self, req: RecordedRequest, problem: str) -> None:
        with self._lock:
            self.rejections.append((req, problem))

    # --- addresses

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://{self._host}:{self._httpd.server_address[1]}"

    @property
    def openai_url(self) -> str:
        """Base URL for an `openai` kind provider."""
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """Base URL for an `anthropic` kind provider."""
        return self.url

    # --- lifetime

    def start(self) -> LLMServer:
        self._httpd = _Server((self._host, 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="llm-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes hanging handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def llm_server_fixture():
    """Body for a pytest fixture: `server = pytest.fixture(name="server")(llm_server_fixture)`."""
    with LLMServer() as server:
        yield server


def collect(stream_factory: Any) -> list[Any]:
    """Run `stream_factory()` (e.g. `lambda: provider.stream(request)`) to its end and return its events."""
    import anyio

    async def main() -> list[Any]:
        return [event async for event in stream_factory()]

    return anyio.run(main)
