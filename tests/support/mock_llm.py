"""The scripted model server's replies, answered in-process through `httpx.MockTransport`: for provider unit
tests that only need canned HTTP responses (no socket, no thread, no real timing).

    llm = MockLLM()
    llm.enqueue({"text": "hello", "usage": {"input": 12, "output": 3}})
    provider = OpenAIProvider(ProviderSettings(base_url=llm.openai_url, transport=llm.transport))
    ...
    assert llm.requests[0].body["model"] == "gpt-test"

The scripting is `LLMServer`'s (tests/support/llm_server.py): the same reply dicts, rendered by the same
dialect renderers, the same pairing check of tool calls and results, the same `requests` and `rejections`.
Each SSE event arrives as one chunk of the body, as the server writes them. What needs a real connection or
real time is not here and raises: `hang`, `delay`, a connection dropped mid-body (`break_after` without
`clean_eof`), and the hostile replies (`raw`, `sse_lines`, `keepalive`, `huge`) — those tests use LLMServer.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import httpx

# The dialects are LLMServer's (and the conformance suite's scripted model's): one copy of the wire.
from ama_conformance.servers.model_dialects import (
    RecordedRequest,
    anthropic_error,
    anthropic_pairing_error,
    openai_error,
    openai_pairing_error,
    render_anthropic,
    render_openai,
    sse_event,
)

_REAL_ONLY = ("hang", "delay", "raw", "sse_lines", "keepalive", "huge")


class MockLLM:
    """LLMServer's scripting over a mock transport. Point a provider at `openai_url` or `anthropic_url` and give
    it `transport`."""

    openai_url = "http://llm.mock/v1"
    anthropic_url = "http://llm.mock"

    def __init__(self, *, check_pairing: bool = True) -> None:
        self.check_pairing = check_pairing
        self.requests: list[RecordedRequest] = []
        self.rejections: list[tuple[RecordedRequest, str]] = []
        self._queue: deque[dict[str, Any]] = deque()
        self.transport = httpx.MockTransport(self._handle)

    def enqueue(self, *replies: dict[str, Any]) -> MockLLM:
        for reply in replies:
            used = [key for key in _REAL_ONLY if key in reply]
            if used or ("break_after" in reply and not reply.get("clean_eof")):
                raise ValueError(f"MockLLM cannot send {used or 'a dropped connection'}: use LLMServer")
        self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Replies not yet taken."""
        return len(self._queue)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        try:
            body = json.loads(request.content) if request.content else None
        except ValueError:
            body = None
        path = request.url.path
        recorded = RecordedRequest(path, {k.lower(): v for k, v in request.headers.items()}, body)
        self.requests.append(recorded)
        if path.endswith("/chat/completions"):
            dialect = "openai"
        elif path.endswith("/v1/messages"):
            dialect = "anthropic"
        else:
            return httpx.Response(404, json={"error": {"message": f"mock_llm: no endpoint {path}"}})
        if self.check_pairing:
            problem = (openai_pairing_error if dialect == "openai" else anthropic_pairing_error)(body)
            if problem is not None:
                self.rejections.append((recorded, problem))
                error = (openai_error if dialect == "openai" else anthropic_error)(400, problem)
                return httpx.Response(400, json=error)
        if not self._queue:
            message = f"mock_llm: the script ran out of replies (request #{len(self.requests)} to {path})"
            return httpx.Response(500, json={"error": {"message": message}})
        reply = self._queue.popleft()
        if "status" in reply:
            return _error(dialect, reply)
        return _stream(dialect, reply, body)


def _error(dialect: str, reply: dict[str, Any]) -> httpx.Response:
    status = int(reply["status"])
    message = reply.get("message") or f"llm_server: scripted HTTP {status}"
    body = reply.get("body") or (openai_error if dialect == "openai" else anthropic_error)(status, message)
    headers = {"content-type": "application/json", **(reply.get("headers") or {})}
    if "retry_after" in reply:
        headers["retry-after"] = str(reply["retry_after"])
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.Response(status, headers=headers, content=content.encode())


def _stream(dialect: str, reply: dict[str, Any], body: Any) -> httpx.Response:
    request = body if isinstance(body, dict) else {}
    model = request.get("model", "test-model")
    if dialect == "openai":
        events = render_openai(reply, model, bool((request.get("stream_options") or {}).get("include_usage")))
    else:
        events = render_anthropic(reply, model)
    if "break_after" in reply:  # with clean_eof: the body ends properly, without the reply's finish
        events = events[: int(reply["break_after"])]
    nl = "\r\n" if reply.get("crlf") else "\n"
    chunks = [sse_event(name, data, nl) for name, data in events]

    async def content() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    headers = {"content-type": reply.get("content_type", "text/event-stream"), **(reply.get("headers") or {})}
    return httpx.Response(200, headers=headers, content=content())
