"""Provider streams against servers that misbehave: every byte a server can send ends in typed events and
exactly one `Finished` or `Failure`, never an exception; parsing is linear; bodies and requests are bounded.

Most cases run through the real provider code over httpx.MockTransport (any bytes, fast); the ones about
timing, connections and the test server's own checks run over real HTTP on 127.0.0.1 (LLMServer).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import pytest

from ama_acp.conversation.messages import (
    AssistantMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.providers.anthropic import AnthropicProvider
from ama_acp.providers.base import (
    Failure,
    Finished,
    ModelRequest,
    ProviderEvent,
    Retrying,
    TextDelta,
    ToolCallEvent,
)
from ama_acp.providers.openai import OpenAIProvider
from ama_acp.providers.retry import RetryPolicy
from ama_acp.providers.settings import ProviderSettings
from ama_acp.providers.sse import SSEEvent, SSEParser
from ama_acp.providers.stream import MAX_ERROR_BODY
from tests.support.llm_server import (
    anthropic_pairing_error,
    collect,
    llm_server_fixture,
    openai_pairing_error,
    render_anthropic,
    render_openai,
)

server = pytest.fixture(name="server")(llm_server_fixture)

REQUEST = ModelRequest(model="m", system="", messages=[UserMessage([TextPart("hi")])])
NO_RETRY = RetryPolicy(max_retries=0)
Dialect = type[OpenAIProvider] | type[AnthropicProvider]


# --- helpers -------------------------------------------------------------------------------------------------


def mock(
    cls: Dialect,
    body: bytes | Callable[[], AsyncIterator[bytes]],
    *,
    status: int = 200,
    ctype: str = "text/event-stream",
    retry: RetryPolicy = NO_RETRY,
    **kw: Any,
) -> OpenAIProvider | AnthropicProvider:
    """A provider whose every request is answered with `body` (bytes, or a factory of a byte stream)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        content = body if isinstance(body, bytes) else body()
        return httpx.Response(status, headers={"content-type": ctype}, content=content)

    transport = httpx.MockTransport(handler)
    return cls(
        ProviderSettings(base_url="http://mock.test/v1", api_key="sk-mock-key", retry=retry, transport=transport, **kw)
    )


def run(provider: OpenAIProvider | AnthropicProvider) -> list[ProviderEvent]:
    async def main() -> list[ProviderEvent]:
        with anyio.fail_after(30):
            return [e async for e in provider.stream(REQUEST)]

    return anyio.run(main)


def sse(*datas: Any, events: list[str] | None = None) -> bytes:
    """An SSE body of these data payloads (dicts are JSON-encoded)."""
    out = []
    for i, d in enumerate(datas):
        name = f"event: {events[i]}\n" if events else ""
        out.append(f"{name}data: {d if isinstance(d, str) else json.dumps(d)}\n\n")
    return "".join(out).encode()


def anth(*objs: dict[str, Any]) -> bytes:
    return sse(*objs, events=[o.get("type", "") for o in objs])


def terminal_once(events: list[ProviderEvent]) -> ProviderEvent:
    """The contract: exactly one terminal event, and it is the last."""
    terminals = [e for e in events if isinstance(e, Finished | Failure)]
    assert len(terminals) == 1 and events[-1] is terminals[0], events
    return terminals[0]


def failure(events: list[ProviderEvent]) -> Failure:
    last = terminal_once(events)
    assert isinstance(last, Failure), events
    assert "internal error" not in last.message  # a parser bug would show here
    return last


def rendered(dialect: str, reply: dict[str, Any]) -> list[tuple[str, str]]:
    return render_openai(reply, "m", True) if dialect == "openai" else render_anthropic(reply, "m")


def body_of(events: list[tuple[str, str]]) -> bytes:
    return "".join((f"event: {n}\n" if n else "") + f"data: {d}\n\n" for n, d in events).encode()


OPENAI_HEAD = {"id": "c", "object": "chat.completion.chunk", "model": "m"}


def oa(choice: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(OPENAI_HEAD)
    if choice is not None:
        base["choices"] = [{"index": 0, **choice}]
    base.update(top)
    return base


# --- 1. linear SSE parsing -----------------------------------------------------------------------------------


def _parse_lines(size: int, count: int = 1, piece: int = 65536) -> float:
    """Seconds to parse `count` data lines of `size` bytes each, arriving in `piece`-byte chunks."""
    data = (b"data: " + b"x" * size + b"\n\n") * count
    parser = SSEParser()
    start = time.perf_counter()
    events = []
    for i in range(0, len(data), piece):
        events += parser.feed(data[i : i + piece])
    elapsed = time.perf_counter() - start
    assert len(events) == count and all(len(e.data) == size for e in events)
    return elapsed


def test_a_40_mib_line_parses_in_linear_time():
    took = _parse_lines(40 * 1024 * 1024)
    assert took < 2.0, f"40 MiB took {took:.2f}s"  # it took 29 s when each chunk re-copied the buffer
    # Growth, not absolute speed: the same 16 MiB as one line or as sixteen 1 MiB lines must cost about the
    # same (a parser that re-copies its buffer per chunk copies ~2 GiB for the one long line: 50-100x). Best of
    # 3 each, so a busy machine does not decide. The bound is 8, not 4: the one long line needs 16 MiB of fresh
    # memory at once, and its page faults alone made it 4.5x here on an idle machine, the code before and after
    # issue 37 alike (the sixteen short lines reuse what the allocator freed).
    short = min(_parse_lines(1024 * 1024, count=16) for _ in range(3))
    long = min(_parse_lines(16 * 1024 * 1024) for _ in range(3))
    assert long / short < 8, f"16 x 1 MiB {short:.3f}s, 1 x 16 MiB {long:.3f}s"


def test_a_big_tool_argument_streams_through_the_provider():
    args = json.dumps({"content": "y" * (8 * 1024 * 1024)})
    body = sse(
        oa({"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "write", "arguments": args}}]}}),
        oa({"delta": {}, "finish_reason": "tool_calls"}),
        "[DONE]",
    )

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 16384):
            yield body[i : i + 16384]

    start = time.perf_counter()
    events = run(mock(OpenAIProvider, chunks))
    assert time.perf_counter() - start < 5.0
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert len(calls) == 1 and calls[0].arguments == args
    assert isinstance(terminal_once(events), Finished)


def test_sse_events_do_not_depend_on_where_the_bytes_are_split():
    body = (
        "\ufeff: comment\r\nevent: a\r\ndata: one\r\ndata: två ✓\r\n\r\n"
        'data: {"k": "€"}\n\nevent: b\rdata: three\r\rdata: tail'
    ).encode()
    want = [SSEEvent("a", "one\ntvå ✓"), SSEEvent("", '{"k": "€"}'), SSEEvent("b", "three"), SSEEvent("", "tail")]
    for cut in range(len(body) + 1):
        parser = SSEParser()
        got = parser.feed(body[:cut]) + parser.feed(body[cut:]) + parser.close()
        assert got == want, cut
    byte_by_byte = SSEParser()
    got = [e for i in range(len(body)) for e in byte_by_byte.feed(body[i : i + 1])] + byte_by_byte.close()
    assert got == want


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_invalid_utf8_is_a_failure(cls):
    fail = failure(run(mock(cls, b'data: {"choices": [{"delta": {"content": "\xff\xfe"}}]}\n\n')))
    assert fail.kind == "stream" and "UTF-8" in fail.message


def test_an_event_past_the_bound_is_a_failure_not_a_memory_blowup():
    p = mock(OpenAIProvider, b"data: " + b"z" * 5000)  # no end of line: the event never ends
    p._http.max_event_bytes = 1024
    fail = failure(run(p))
    assert "larger than" in fail.message


def test_a_reply_past_the_bound_is_a_failure():
    chunk = oa({"delta": {"content": "w" * 1000}})
    p = mock(OpenAIProvider, sse(*[chunk] * 100))
    p._http.max_response_bytes = 20_000
    fail = failure(run(p))
    assert "larger than" in fail.message
    assert sum(isinstance(e, TextDelta) for e in run(p)) < 30  # it stopped near the bound


# --- 2. error bodies are read up to a bound --------------------------------------------------------------------


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_a_100_mb_error_body_is_not_read_whole(cls):
    served = [0]

    async def endless() -> AsyncIterator[bytes]:
        yield b'{"error": {"message": "'
        piece = b"e" * 65536
        for _ in range(100 * 1024 * 1024 // len(piece)):
            served[0] += len(piece)
            yield piece

    fail = failure(run(mock(cls, endless, status=500, ctype="application/json")))
    assert fail.kind == "server" and fail.status == 500
    assert served[0] <= MAX_ERROR_BODY + 65536  # it stopped reading after the bound
    assert len(fail.message) < 1000


def test_a_huge_error_body_over_http(server):
    server.enqueue({"huge": 100 * 1024 * 1024, "status": 503})
    p = OpenAIProvider(ProviderSettings(base_url=server.openai_url, api_key="sk-x", retry=NO_RETRY, timeout=10))
    start = time.monotonic()
    fail = failure(collect(lambda: p.stream(REQUEST)))
    assert fail.status == 503 and time.monotonic() - start < 5
    # The client hung up after its bound; the server got at most its socket buffers further.
    assert server.requests[0].sent < 16 * 1024 * 1024


# --- 3. the timeout is a deadline for the whole request ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_keepalive_comments_forever_time_out(server, kind):
    server.enqueue({"keepalive": 0.05}, {"keepalive": 0.05})
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    url = server.openai_url if kind == "openai" else server.anthropic_url
    p = cls(
        ProviderSettings(base_url=url, api_key="sk-x", timeout=0.6, retry=RetryPolicy(max_retries=1, backoff_base=0.01))
    )
    start = time.monotonic()
    events = collect(lambda: p.stream(REQUEST))
    took = time.monotonic() - start
    assert 1.2 <= took < 5.0, took  # two attempts of 0.6 s each, not a per-read timeout that never fires
    assert isinstance(events[0], Retrying) and "timed out" in events[0].reason  # retryable, as timeouts are
    fail = failure(events)
    assert fail.kind == "timeout" and "Gave up after 1 retry" in fail.message


def test_keepalive_after_some_text_times_out_then_a_retry_succeeds(server):
    server.enqueue({"text": "partial answer", "keepalive": 0.05, "break_after": 3}, {"text": "whole"})
    p = OpenAIProvider(
        ProviderSettings(base_url=server.openai_url, api_key="sk-x", timeout=0.5, retry=RetryPolicy(1, 0.01))
    )
    events = collect(lambda: p.stream(REQUEST))
    retry = next(i for i, e in enumerate(events) if isinstance(e, Retrying))
    assert any(isinstance(e, TextDelta) for e in events[:retry])  # it was streaming when the deadline hit
    assert "".join(e.text for e in events[retry:] if isinstance(e, TextDelta)) == "whole"
    assert isinstance(terminal_once(events), Finished)


# --- 4-6. chunks of the wrong shape name their field ------------------------------------------------------------

OPENAI_SHAPES = [
    (oa(choices="nope"), "$.choices"),
    (oa(choices=[{"index": 0, "delta": "text"}]), "$.choices[0].delta"),
    (oa({"delta": {"content": 12345}}), "$.choices[0].delta.content"),
    (oa({"delta": {"tool_calls": {"index": 0}}}), "tool_calls"),
    (oa({"delta": {"tool_calls": [{"index": "0", "id": "a", "function": {"name": "f"}}]}}), "index"),
    (oa({"delta": {"tool_calls": [{"index": 0, "id": "a", "function": "f"}]}}), "function"),
    (oa({"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": 7}}]}}), "arguments"),
    (oa({"delta": {"tool_calls": [{"index": 0, "id": 9, "function": {"name": "f"}}]}}), "id"),
    (oa({"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": ["f"]}}]}}), "name"),
    (oa({"delta": {}, "finish_reason": 1}), "finish_reason"),
    (oa(choices=[{"index": "0", "delta": {}}]), "index"),
    ([1, 2, 3], "object"),
]


@pytest.mark.parametrize(("chunk", "field"), OPENAI_SHAPES)
def test_openai_chunk_of_the_wrong_shape_is_a_failure_naming_the_field(chunk, field):
    events = run(mock(OpenAIProvider, sse(oa({"delta": {"content": "ok "}}), chunk, "[DONE]")))
    fail = failure(events)
    assert fail.kind == "stream" and "cannot read" in fail.message and field in fail.message, fail.message
    assert all(isinstance(e.text, str) for e in events if isinstance(e, TextDelta))


def _start(index: int, block: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


ANTHROPIC_SHAPES = [
    (_start(0, {"text": ""}), "type"),
    (_start(0, "text"), "content_block"),
    ({"type": "content_block_start", "content_block": {"type": "text", "text": 5}}, "text"),
    (_start(0, {"type": "tool_use", "id": 3, "name": "f", "input": {}}), "id"),
    (_start(0, {"type": "tool_use", "id": "t", "name": None, "input": {}}), "name"),
    (_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": []}), "input"),
    ({"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": "x"}}, "index"),
    ({"type": "message_delta", "delta": "end_turn"}, "delta"),
    ({"type": "message_delta", "delta": {"stop_reason": 1}}, "stop_reason"),
]


@pytest.mark.parametrize(("event", "field"), ANTHROPIC_SHAPES)
def test_anthropic_event_of_the_wrong_shape_is_a_failure_naming_the_field(event, field):
    head = {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}
    events = run(mock(AnthropicProvider, anth(head, event, {"type": "message_stop"})))
    fail = failure(events)
    assert fail.kind == "stream" and field in fail.message, fail.message


def test_anthropic_delta_of_the_wrong_type_for_its_block():
    body = anth(
        _start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
    )
    assert "text_delta for the tool_use block" in failure(run(mock(AnthropicProvider, body))).message


@pytest.mark.parametrize("content", [12345, 1.5, True, ["a"], {"t": 1}])
def test_numeric_or_other_non_string_content_never_reaches_the_client(content):
    events = run(mock(OpenAIProvider, sse(oa({"delta": {"content": content}}), "[DONE]")))
    assert not any(isinstance(e, TextDelta) for e in events)
    assert "content" in failure(events).message


def _openai_with_usage(usage: Any) -> bytes:
    return sse(
        oa({"delta": {"content": "answer"}}),
        oa({"delta": {}, "finish_reason": "stop"}),
        oa(choices=[], usage=usage),
        "[DONE]",
    )


@pytest.mark.parametrize("bad", [1.5, -3, 2**64, True, "12", None, [1], 1e300])
def test_a_usage_figure_that_is_not_a_count_is_unknown_not_zero(bad):
    usage = {"prompt_tokens": 40, "completion_tokens": bad, "total_tokens": 45}
    events = run(mock(OpenAIProvider, _openai_with_usage(usage)))
    done = terminal_once(events)
    assert isinstance(done, Finished) and done.usage is not None
    assert done.usage.output is None  # unknown, not 0 and not the junk
    assert done.usage.input == 40 and done.usage.total == 45  # the good figures are kept
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "answer"


@pytest.mark.parametrize(
    ("usage", "known"),
    [([1, 2], None), ("lots", None), (7, None), ({"prompt_tokens_details": 3, "prompt_tokens": 5}, Usage(input=5))],
)
def test_usage_of_the_wrong_shape_is_unknown(usage, known):
    done = terminal_once(run(mock(OpenAIProvider, _openai_with_usage(usage))))
    assert isinstance(done, Finished) and done.usage == known


def test_more_cached_than_prompt_tokens_makes_input_unknown():
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 50}}
    done = terminal_once(run(mock(OpenAIProvider, _openai_with_usage(usage))))
    assert isinstance(done, Finished) and done.usage is not None
    assert done.usage.input is None and done.usage.cache_read == 50 and done.usage.output == 2


@pytest.mark.parametrize("bad", [1.5, -1, 2**70, False, "9"])
def test_anthropic_usage_figure_that_is_not_a_count_is_unknown(bad):
    body = anth(
        {"type": "message_start", "message": {"usage": {"input_tokens": bad, "cache_read_input_tokens": 4}}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 6}},
        {"type": "message_stop"},
    )
    done = terminal_once(run(mock(AnthropicProvider, body)))
    assert isinstance(done, Finished) and done.usage == Usage(input=None, output=6, cache_read=4)


def test_a_tool_call_without_a_name_is_a_failure():
    body = sse(
        oa({"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": "{}"}}]}}),
        oa({"delta": {}, "finish_reason": "tool_calls"}),
        "[DONE]",
    )
    assert "no function name" in failure(run(mock(OpenAIProvider, body))).message


# --- 7. anything else a server can send -------------------------------------------------------------------------


def test_openai_fragment_for_a_call_never_started():
    body = sse(
        oa({"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}]}}),
        oa({"delta": {"tool_calls": [{"index": 3, "function": {"arguments": '{"a"'}}]}}),
        oa({"delta": {}, "finish_reason": "tool_calls"}),
        "[DONE]",
    )
    assert "index 3, which was never started" in failure(run(mock(OpenAIProvider, body))).message


def test_openai_content_after_the_finish_reason():
    body = sse(oa({"delta": {"content": "a"}, "finish_reason": "stop"}), oa({"delta": {"content": "late"}}), "[DONE]")
    assert "after the finish reason" in failure(run(mock(OpenAIProvider, body))).message


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}],
        [{"type": "content_block_stop", "index": 2}],
        [_start(0, {"type": "text", "text": ""}), _start(0, {"type": "text", "text": ""})],
        [
            _start(0, {"type": "text", "text": ""}),
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        ],
        [_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}), {"type": "message_stop"}],
    ],
    ids=["delta-before-start", "stop-never-started", "started-twice", "delta-after-stop", "tool-use-never-stopped"],
)
def test_anthropic_events_out_of_order(events):
    fail = failure(run(mock(AnthropicProvider, anth({"type": "message_start", "message": {}}, *events))))
    assert fail.kind == "stream" and "block" in fail.message


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_events_after_the_end_are_never_read(dialect):
    """As in the official SDKs: once [DONE] / message_stop arrived, the reply is complete."""
    good = body_of(rendered(dialect, {"text": "complete answer"}))
    junk = b'data: {"choices": "junk"}\n\ndata: {"type": "error"}\n\nnot even sse \xff\n'
    cls = OpenAIProvider if dialect == "openai" else AnthropicProvider
    events = run(mock(cls, good + junk))
    assert isinstance(terminal_once(events), Finished)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "complete answer"


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_truncated_stream_is_retried_then_fails_as_broken(dialect):
    whole = body_of(rendered(dialect, {"text": "a reply that never ends"}))
    cut = whole[: len(whole) // 2]
    cls = OpenAIProvider if dialect == "openai" else AnthropicProvider
    events = run(mock(cls, cut, retry=RetryPolicy(max_retries=1, backoff_base=0.001)))
    assert sum(isinstance(e, Retrying) for e in events) == 1
    fail = failure(events)
    assert fail.kind == "stream" and "Gave up after 1 retry" in fail.message


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_an_empty_body_says_so(cls):
    assert "without sending anything" in failure(run(mock(cls, b""))).message


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_an_html_page_is_a_clear_failure_not_retried(cls):
    page = b"<!doctype html><html><head><title>Sign in \xe2\x80\x93 Corp Portal</title></head><body>" + b"x" * 10**6
    fail = failure(run(mock(cls, page, ctype="text/html; charset=utf-8", retry=RetryPolicy(max_retries=3))))
    assert fail.kind == "bad_request" and "HTML page (Sign in – Corp Portal)" in fail.message
    assert "base URL" in fail.message


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_html_with_an_sse_content_type_names_what_came(cls):
    fail = failure(run(mock(cls, b"<html><body>502 Bad Gateway</body></html>")))
    assert "no server-sent events" in fail.message and "502 Bad Gateway" in fail.message


@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
def test_status_200_with_a_json_error_body(cls):
    body = json.dumps({"error": {"message": "model is loading", "type": "server_error"}}).encode()
    fail = failure(run(mock(cls, body, ctype="application/json")))
    assert fail.kind == "bad_request" and "model is loading" in fail.message


@pytest.mark.parametrize(
    ("etype", "kind"),
    [("overloaded_error", "server"), ("rate_limit_error", "rate_limit"), ("invalid_request_error", "bad_request")],
)
def test_anthropic_error_event(etype, kind):
    body = anth({"type": "message_start", "message": {}}, {"type": "error", "error": {"type": etype, "message": "m!"}})
    fail = failure(run(mock(AnthropicProvider, body)))
    assert fail.kind == kind and "m!" in fail.message


@pytest.mark.parametrize("err", ["just text", 5, [1], {"type": 3}])
def test_anthropic_error_event_of_any_shape_is_still_an_error(err):
    body = b"event: error\ndata: " + json.dumps({"error": err}).encode() + b"\n\n"
    assert failure(run(mock(AnthropicProvider, body))).kind == "bad_request"


def test_not_json_is_a_broken_chunk_and_retried():
    events = run(mock(OpenAIProvider, b"data: {not json\n\n", retry=RetryPolicy(max_retries=1, backoff_base=0.001)))
    assert sum(isinstance(e, Retrying) for e in events) == 1 and "malformed chunk" in failure(events).message


def test_nan_and_infinity_are_not_json():
    fail = failure(run(mock(OpenAIProvider, sse('{"usage": {"prompt_tokens": NaN}, "choices": []}'))))
    assert "malformed chunk" in fail.message


# --- the test server checks tool-call pairing like the real APIs ---------------------------------------------


def _call_then(result_id: str | None, extra: bool = False) -> list[Any]:
    """A tool call `call_1` (none when result_id is "orphan") followed by a result for `result_id`."""
    call = ToolCallPart(id="call_1", name="ls", arguments="{}")
    msgs: list[Any] = [UserMessage([TextPart("go")])]
    msgs.append(AssistantMessage(content=[TextPart("let me look")] if result_id == "orphan" else [call]))
    if result_id is not None:
        msgs.append(ToolResultMessage(tool_call_id=result_id, name="ls", content=[TextPart("ok")]))
    if extra:
        msgs.append(UserMessage([TextPart("and?")]))
    return msgs


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("result_id", "extra", "problem"),
    [(None, True, "call_1"), (None, False, "call_1"), ("orphan", True, "orphan")],
    ids=["dangling-call-then-user", "dangling-call-at-end", "result-without-call"],
)
def test_llm_server_rejects_unpaired_tool_calls_like_the_real_api(server, kind, result_id, extra, problem):
    server.enqueue({"text": "would answer"})
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    url = server.openai_url if kind == "openai" else server.anthropic_url
    p = cls(ProviderSettings(base_url=url, api_key="sk-x", retry=NO_RETRY))
    request = ModelRequest(model="m", system="", messages=_call_then(result_id, extra))
    fail = failure(collect(lambda: p.stream(request)))
    assert fail.kind == "bad_request" and fail.status == 400 and problem in fail.message
    assert len(server.rejections) == 1 and server.pending == 1  # the scripted reply is still there


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_llm_server_accepts_paired_tool_calls(server, kind):
    server.enqueue({"text": "fine"})
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    url = server.openai_url if kind == "openai" else server.anthropic_url
    p = cls(ProviderSettings(base_url=url, api_key="sk-x", retry=NO_RETRY))
    request = ModelRequest(model="m", system="", messages=_call_then("call_1", extra=True))
    assert isinstance(terminal_once(collect(lambda: p.stream(request))), Finished)
    assert server.rejections == []


def test_pairing_checks_on_raw_bodies():
    ok = {"messages": [{"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]}]}
    ok["messages"] += [{"role": "tool", "tool_call_id": "b"}, {"role": "tool", "tool_call_id": "a"}]
    assert openai_pairing_error(ok) is None
    half = {"messages": [*ok["messages"][:2], {"role": "user", "content": "x"}]}
    assert "did not have response messages: a" in (openai_pairing_error(half) or "")
    twice = {"messages": [*ok["messages"], {"role": "tool", "tool_call_id": "a"}]}
    assert "must be a response to a preceeding message" in (openai_pairing_error(twice) or "")
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}, {"type": "tool_use", "id": "t2"}]}
    both = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t2"}, {"type": "tool_result", "tool_use_id": "t1"}],
    }
    assert anthropic_pairing_error({"messages": [use, both]}) is None
    one = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}
    assert "without `tool_result` blocks immediately after: t2" in (
        anthropic_pairing_error({"messages": [use, one]}) or ""
    )
    stray = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz"}]}
    assert "unexpected `tool_use_id`" in (anthropic_pairing_error({"messages": [stray]}) or "")
    assert openai_pairing_error({"messages": "junk"}) is None and anthropic_pairing_error(None) is None


def test_llm_server_pairing_check_can_be_turned_off():
    from tests.support.llm_server import LLMServer

    with LLMServer(check_pairing=False) as lax:
        lax.enqueue({"text": "answered anyway"})
        p = OpenAIProvider(ProviderSettings(base_url=lax.openai_url, api_key="sk-x", retry=NO_RETRY))
        request = ModelRequest(model="m", system="", messages=_call_then(None, extra=True))
        assert isinstance(terminal_once(collect(lambda: p.stream(request))), Finished)


def test_llm_server_raw_and_sse_lines_modes(server):
    server.enqueue(
        {
            "sse_lines": [
                'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}',
                "",
                "data: [DONE]",
                "",
            ]
        },
        {"raw": b"data: [DONE]\n\n", "raw_chunk": 3},
        {"raw": "<h1>oops</h1>", "status": 200, "content_type": "text/html"},
    )
    p = OpenAIProvider(ProviderSettings(base_url=server.openai_url, api_key="sk-x", retry=NO_RETRY))
    first = collect(lambda: p.stream(REQUEST))
    assert [e for e in first if isinstance(e, TextDelta)] == [TextDelta("hi")] and isinstance(first[-1], Finished)
    assert isinstance(collect(lambda: p.stream(REQUEST))[-1], Finished)
    assert "HTML page" in failure(collect(lambda: p.stream(REQUEST))).message


def test_a_server_that_never_stops_sending_text_hits_the_deadline_too():
    chunk = sse(oa({"delta": {"content": "more "}}))

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield chunk  # no await in between: the reads never have to wait

    p = mock(OpenAIProvider, endless, timeout=0.5)

    async def main() -> tuple[int, ProviderEvent | None]:
        n, last = 0, None
        with anyio.fail_after(10):
            async for event in p.stream(REQUEST):
                n, last = n + 1, event
        return n, last

    start = time.monotonic()
    n, last = anyio.run(main)
    assert isinstance(last, Failure) and last.kind == "timeout" and n > 100
    assert time.monotonic() - start < 3.0
