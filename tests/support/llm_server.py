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
                               missing keys default to input 10, output 5, the rest 0) | "cache": the
                               figures `server.prompt_cache` computes from the request, billed like the real
                               APIs with prefix caching (tests/support/prompt_cache.py)
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
  wait: threading.Event        answer (the rest of the reply) only once the test sets it: a turn held mid-way
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

The vendors' own endpoints a running agent asks for a model's window (`GET /props`, `/api/v0/models`, `/api/ps`,
`POST /api/show`, another model list) answer what a test puts in `server.stated` (see `LLMServer.__init__`).

GET `/v1/models` (or `/models`) answers `{"object": "list", "data": server.models}` when a test sets
`server.models` (a list of entries, e.g. `[{"id": "m", "max_model_len": 32768}]`, as `ama setup` reads them);
left None, as by default, a GET is not served (501), as before.

An empty queue answers 500 with a body saying the script ran out. Every request is recorded in
`server.requests` (`RecordedRequest`: path, headers with lower-case names, parsed JSON body, the monotonic
`time` it arrived, for checking retry delays, and `sent`: body bytes written to the client so far).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

# The dialects (rendering, error bodies, the pairing checks) and the HTTP plumbing are the conformance suite's
# scripted model's too: one copy, so both servers speak the same wire.
from ama_conformance.servers.background import BackgroundServer, OwnedHTTPServer
from ama_conformance.servers.model_dialects import (
    ModelHandler,
    RecordedRequest,
    anthropic_error,
    anthropic_pairing_error,
    invalid_request,
    openai_error,
    openai_pairing_error,
    render_anthropic,
    render_openai,
    sse_event,
)
from tests.support.prompt_cache import PromptCache

if TYPE_CHECKING:
    from ama_acp.providers.base import ProviderEvent

__all__ = [
    "LLMServer",
    "RecordedRequest",
    "anthropic_error",
    "anthropic_pairing_error",
    "collect",
    "llm_server_fixture",
    "openai_error",
    "openai_pairing_error",
    "render_anthropic",
    "render_openai",
]


# --- the server --------------------------------------------------------------------------------------------


# The local servers' own endpoints: answered 404 unless a test states something there (`server.stated`).
_VENDOR_PATHS = frozenset({"/props", "/api/v0/models", "/api/show", "/api/ps"})


class _Handler(ModelHandler):
    server: OwnedHTTPServer

    def do_GET(self) -> None:
        if self._stated("GET"):
            return
        models = self.server.owner.models
        if models is None:
            self.send_error(501, "Unsupported method ('GET')")  # what the server answered before it had a list
            return
        path = self.path.split("?")[0]
        if path in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": models})
        else:
            self.send_json(404, openai_error(404, f"llm-server: no endpoint GET {path}"))

    def do_POST(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self._stated("POST", raw):
            return
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
            self.send_json(404, {"error": {"message": f"llm_server: no endpoint {path}"}})
            return
        if owner.check_pairing:
            problem = (openai_pairing_error if dialect == "openai" else anthropic_pairing_error)(body)
            if problem is not None:
                owner._reject(self.recorded, problem)
                self.send_json(400, invalid_request(dialect, problem))
                return
        reply = owner._next()
        if reply is None:
            n = len(owner.requests)
            self.send_json(
                500, {"error": {"message": f"llm_server: the script ran out of replies (request #{n} to {path})"}}
            )
            return
        if isinstance(held := reply.get("wait"), threading.Event):
            while not held.wait(0.05):  # a test holds this answer until it has seen what comes before it
                if owner._closing.is_set():
                    self.close_connection = True
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
        if reply.get("usage") == "cache":  # billed by the prompt cache (tests/support/prompt_cache.py)
            if owner.prompt_cache is None:
                self.send_json(500, {"error": {"message": "llm_server: usage 'cache' without server.prompt_cache"}})
                return
            reply = {**reply, "usage": owner.prompt_cache.usage(dialect, body, reply)}
        if dialect == "openai":
            include_usage = bool(((body or {}).get("stream_options") or {}).get("include_usage"))
            events = render_openai(reply, model, include_usage)
        else:
            events = render_anthropic(reply, model)
        self._stream(events, reply)

    def _stated(self, method: str, raw: bytes = b"") -> bool:
        """A vendor's own endpoint (`server.stated`): answered, recorded in `server.probes`, never in `requests`."""
        owner = self.server.owner
        path = self.path.split("?")[0]
        key = f"{method} {path}"
        if key not in owner.stated and path not in _VENDOR_PATHS:
            return False
        while not owner.gate.wait(0.05):  # a test holds the server's answer until it opens the gate
            if owner._closing.is_set():
                self.close_connection = True
                return True
        with owner._lock:
            owner.probes.append((key, raw))
        answer = owner.stated.get(key)
        if answer is None:
            self.send_json(404, {"error": f"llm_server: nothing stated for {key}"})
        elif isinstance(answer, bytes):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        else:
            self.send_json(200, answer)
        return True

    def _error(self, dialect: str, reply: dict[str, Any]) -> None:
        status = int(reply["status"])
        message = reply.get("message") or f"llm_server: scripted HTTP {status}"
        body = reply.get("body") or (openai_error if dialect == "openai" else anthropic_error)(status, message)
        headers = dict(reply.get("headers") or {})
        if "retry_after" in reply:
            headers["retry-after"] = str(reply["retry_after"])
        self.send_json(status, body, headers)

    # --- hostile replies

    def _start_chunked(self, status: int, content_type: str, reply: dict[str, Any]) -> None:
        self.start_chunked(status, content_type, reply.get("headers"))

    def _chunk(self, payload: bytes) -> None:
        if payload:
            self.write_chunk(payload)
            self.recorded.sent += len(payload)

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
            self.end_chunks()
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
            self.end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bounded reader does

    def _keepalive(self, events: list[tuple[str, str]], reply: dict[str, Any]) -> None:
        nl = "\r\n" if reply.get("crlf") else "\n"
        interval = float(reply["keepalive"])
        self._start_chunked(200, reply.get("content_type", "text/event-stream"), reply)
        try:
            for name, data in events[: int(reply.get("break_after") or 0)]:
                self._chunk(sse_event(name, data, nl))
            while not self.server.owner._closing.wait(interval):
                self._chunk(f": keepalive{nl}{nl}".encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its deadline passed)

    def _stream(self, events: list[tuple[str, str]], reply: dict[str, Any]) -> None:
        nl = "\r\n" if reply.get("crlf") else "\n"
        headers = {"cache-control": "no-cache", **(reply.get("headers") or {})}
        self.start_chunked(200, reply.get("content_type", "text/event-stream"), headers)
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
                event = sse_event(name, data, nl)
                self.write_chunk(event)
                self.recorded.sent += len(event)
            self.end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (a timeout or a cancelled request); nothing to tell it


class LLMServer(BackgroundServer):
    """The scripted server. Start with `start()` or `with`; `url` is `http://127.0.0.1:PORT`."""

    handler_class = _Handler
    thread_name = "llm-server"

    def __init__(self, host: str = "127.0.0.1", *, check_pairing: bool = True) -> None:
        super().__init__(host)
        self.check_pairing = check_pairing  # reject dangling tool calls/results, as the real APIs do
        self.rejections: list[tuple[RecordedRequest, str]] = []
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.models: list[dict[str, Any]] | None = None  # the GET /v1/models list; None: GET is not served
        self.prompt_cache: PromptCache | None = None  # bills replies with usage "cache" (prompt_cache.py)
        # What the server states at its vendors' own endpoints, by "METHOD /path" (e.g. "GET /props"): a JSON
        # value, or bytes sent as they are. `_VENDOR_PATHS` answer 404 unless stated, and no such request takes a
        # reply or lands in `requests`: each lands in `probes` ("METHOD /path", body), after `gate` opens.
        self.stated: dict[str, object] = {}
        self.probes: list[tuple[str, bytes]] = []
        self.gate = threading.Event()
        self.gate.set()

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


class TlsLLMServer(LLMServer):
    """The scripted server over https, as `name` (a certificate for it: tests/support/tls_certs.py). It listens on
    127.0.0.1; `url` names the host, which a client resolves there."""

    def __init__(self, tls: ssl.SSLContext, name: str = "localhost", *, check_pairing: bool = True) -> None:
        super().__init__(check_pairing=check_pairing)
        self._tls = tls
        self._name = name

    @property
    def url(self) -> str:
        return super().url.replace("http://127.0.0.1:", f"https://{self._name}:", 1)

    def _serve(self, httpd: OwnedHTTPServer) -> None:
        # The listening socket already takes connections (a client's first one waits in its backlog); from here
        # each is accepted through the handshake. One that fails it (a client that does not trust the CA, the
        # plain wake of close()) is an OSError the server drops before any request is read.
        httpd.socket = self._tls.wrap_socket(httpd.socket, server_side=True)
        super()._serve(httpd)


def llm_server_fixture() -> Iterator[LLMServer]:
    """Body for a pytest fixture: `server = pytest.fixture(name="server")(llm_server_fixture)`."""
    with LLMServer() as server:
        yield server


def collect(stream_factory: Callable[[], AsyncIterator[ProviderEvent]], accepted: bool = False) -> list[ProviderEvent]:
    """Run `stream_factory()` (e.g. `lambda: provider.stream(request)`) to its end and return its events; the
    `Accepted` marks (one per 2xx stream) only with `accepted=True`, as most tests look at the reply itself."""
    import anyio

    from ama_acp.providers.base import Accepted

    async def main() -> list[ProviderEvent]:
        return [event async for event in stream_factory() if accepted or not isinstance(event, Accepted)]

    return anyio.run(main)
