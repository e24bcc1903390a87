"""Property-based: whatever bytes a model server sends, a provider stream yields only typed events and ends
with exactly one `Finished` or `Failure`, never raising.

Streams for both dialects are rendered from generated replies by the test server's own renderers (the shapes
the real APIs send), then mutated: fields deleted or retyped (floats, negatives, 2**64, bools, strings,
NaN via raw text), events reordered, duplicated or dropped, the body truncated at any byte and split into
chunks at arbitrary byte boundaries. They go through the real provider code (HttpStream, the SSE parser,
the dialect parser) over httpx.MockTransport, so thousands of examples run in seconds.

`AMA_FUZZ_EXAMPLES` sets the count per property (default 150 under the `ci` hypothesis profile, a quarter
under `dev`; at 150 the file runs in well under 20 s).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any, get_args

import anyio
import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import Usage
from ama_acp.providers.anthropic import AnthropicProvider
from ama_acp.providers.base import (
    Accepted,
    Failure,
    FailureKind,
    Finished,
    ModelRequest,
    Provider,
    ProviderEvent,
    Retrying,
    StopKind,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from ama_acp.providers.dialect import MAX_TOKEN_COUNT
from ama_acp.providers.openai import OpenAIProvider
from ama_acp.providers.retry import RetryPolicy
from ama_acp.providers.settings import ProviderSettings
from tests.support.hypothesis_profiles import examples
from tests.support.llm_server import render_anthropic, render_openai

EXAMPLES = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(150))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REQUEST = ModelRequest(model="m", system="", messages=[])
DIALECTS = ("openai", "anthropic")


# --- the provider under test, over a mock transport --------------------------------------------------------


class _Body:
    """What the mock server answers next: status, content-type and the body's chunks."""

    status = 200
    ctype = "text/event-stream"
    chunks: list[bytes] = []


BODY = _Body()


async def _handler(request: httpx.Request) -> httpx.Response:
    chunks = list(BODY.chunks)

    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx.Response(BODY.status, headers={"content-type": BODY.ctype}, content=stream())


_TRANSPORT = httpx.MockTransport(_handler)
# One retry with no wait: the retry path is fuzzed too, at no cost in time.
_RETRY = RetryPolicy(max_retries=1, backoff_base=0.0)
PROVIDERS: dict[str, Provider] = {
    "openai": OpenAIProvider(
        ProviderSettings(base_url="http://fuzz.test/v1", api_key="sk-fuzz", retry=_RETRY, transport=_TRANSPORT)
    ),
    "anthropic": AnthropicProvider(
        ProviderSettings(base_url="http://fuzz.test", api_key="sk-fuzz", retry=_RETRY, transport=_TRANSPORT)
    ),
}


def stream_of(
    dialect: str, chunks: list[bytes], status: int = 200, ctype: str = "text/event-stream"
) -> list[ProviderEvent]:
    BODY.status, BODY.ctype, BODY.chunks = status, ctype, chunks

    async def main() -> list[ProviderEvent]:
        with anyio.fail_after(20):
            return [e async for e in PROVIDERS[dialect].stream(REQUEST)]

    return anyio.run(main)


# --- the invariants ----------------------------------------------------------------------------------------

_TYPES = (TextDelta, ThinkingDelta, ToolCallEvent, Finished, Failure, Retrying, Accepted)


def _is_count(v: object) -> bool:
    return v is None or (type(v) is int and 0 <= v <= MAX_TOKEN_COUNT)


def check(events: Sequence[object]) -> Finished | Failure:
    assert events, "no events at all"
    accepted = False  # the current attempt's stream began: every reply event comes after its Accepted, once
    for e in events:
        assert type(e) in _TYPES, e
        if isinstance(e, Accepted):
            assert not accepted, events
            accepted = True
        elif isinstance(e, Retrying):
            accepted = False
        elif isinstance(e, TextDelta | ThinkingDelta | ToolCallEvent | Finished):
            assert accepted, events
        if isinstance(e, TextDelta | ThinkingDelta):
            assert type(e.text) is str
        if isinstance(e, ThinkingDelta):
            assert e.signature is None or type(e.signature) is str
        if isinstance(e, ToolCallEvent):
            assert type(e.id) is str and type(e.name) is str and type(e.arguments) is str and e.name
    terminals = [e for e in events if isinstance(e, Finished | Failure)]
    assert len(terminals) == 1 and events[-1] is terminals[0], events
    last = terminals[0]
    if isinstance(last, Finished):
        assert last.stop in get_args(StopKind)
        if last.usage is not None:
            assert type(last.usage) is Usage
            for name in Usage.__struct_fields__:
                assert _is_count(getattr(last.usage, name)), last.usage
    else:
        assert last.kind in get_args(FailureKind) and type(last.message) is str
        assert "internal error" not in last.message, last.message  # a parser bug, caught by the safety net
    return last


# --- strategies ----------------------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_ident = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ident, inner, max_size=3),
    max_leaves=6,
)
_tool_call: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"id": _ident, "name": _ident, "arguments": st.dictionaries(_ident, _json_value, max_size=3)}
)
_counts = st.integers(0, 10**6)
replies = st.fixed_dictionaries(
    {},
    optional={
        "text": _text,
        "thinking": _text,
        "tool_calls": st.lists(_tool_call, max_size=3, unique_by=lambda c: c["id"]),
        "usage": st.fixed_dictionaries(
            {"input": _counts, "output": _counts, "cache_read": _counts, "cache_write": _counts, "reasoning": _counts}
        ),
        "stop": st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal"]),
        "chunk_size": st.integers(1, 12),
        "interleave": st.booleans(),
    },
)
# Odd values a server might put anywhere: wrong types, numbers out of any range, empty containers.
ODD = st.sampled_from(
    [1.5, -1, -(2**63), 2**64, 2**53 + 1, 1e308, 0, True, False, "", "12", "text", None, [], {}, [1], {"x": 1}]
)
# Raw JSON texts that are not JSON (NaN and friends), put in place of a number or a string.
NOT_JSON = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "01", "0x10", "'s'", "tru", "{"])


def rendered(dialect: str, reply: dict[str, Any]) -> list[tuple[str, str]]:
    return render_openai(reply, "m", True) if dialect == "openai" else render_anthropic(reply, "m")


def encode(events: list[tuple[str, str]], crlf: bool = False) -> bytes:
    nl = "\r\n" if crlf else "\n"
    return "".join((f"event: {n}{nl}" if n else "") + f"data: {d}{nl}{nl}" for n, d in events).encode()


@st.composite
def split(draw: st.DrawFn, body: bytes) -> list[bytes]:
    """`body` cut into chunks at arbitrary byte boundaries (inside characters and line ends too)."""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=8))))
    edges = [0, *cuts, len(body)]
    return [body[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def _paths(obj: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_data(draw: st.DrawFn, data: str) -> str:
    """One SSE data payload with one field deleted, retyped or replaced by raw non-JSON text."""
    try:
        obj = json.loads(data)
    except ValueError:
        return draw(st.sampled_from([data, data[: len(data) // 2], "[DONE]", "", "{}"]))
    paths = _paths(obj)
    path = draw(st.sampled_from(paths))
    op = draw(st.sampled_from(["retype", "delete", "raw"]))
    if not path:
        return json.dumps(draw(ODD)) if op != "raw" else draw(NOT_JSON)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if op == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
        return json.dumps(obj)
    if op == "raw":
        marker = "\u0000MARK\u0000"
        parent[path[-1]] = marker
        return json.dumps(obj).replace(json.dumps(marker), draw(NOT_JSON))
    parent[path[-1]] = draw(ODD)
    return json.dumps(obj)


@st.composite
def mutated_stream(draw: st.DrawFn) -> tuple[str, list[tuple[str, str]]]:
    dialect = draw(st.sampled_from(DIALECTS))
    events = rendered(dialect, draw(replies))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(events) - 1))
        name, data = events[i]
        op = draw(st.sampled_from(["mutate", "mutate", "duplicate", "drop", "swap", "rename"]))
        if op == "mutate":
            events[i] = (name, draw(mutated_data(data)))
        elif op == "duplicate":
            events.insert(draw(st.integers(0, len(events))), events[i])
        elif op == "drop" and len(events) > 1:
            del events[i]
        elif op == "swap":
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        elif op == "rename":
            events[i] = (draw(st.sampled_from(["", "error", "ping", "message_stop", "junk"])), data)
    return dialect, events


# --- properties ----------------------------------------------------------------------------------------------


@FUZZ
@given(dialect=st.sampled_from(DIALECTS), reply=replies, crlf=st.booleans(), data=st.data())
def test_valid_streams_round_trip_however_they_are_split(dialect, reply, crlf, data):
    body = encode(rendered(dialect, reply), crlf)
    events = stream_of(dialect, data.draw(split(body)))
    last = check(events)
    assert isinstance(last, Finished), last
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == reply.get("text", "")
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    want = reply.get("tool_calls") or []
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        (c["id"], c["name"], c["arguments"]) for c in want
    ]
    if "usage" in reply and reply["usage"] is not None:
        assert last.usage is not None and last.usage.output == reply["usage"]["output"]


@FUZZ
@given(stream=mutated_stream(), crlf=st.booleans(), data=st.data())
def test_mutated_streams_end_in_one_terminal_event(stream, crlf, data):
    dialect, events = stream
    check(stream_of(dialect, data.draw(split(encode(events, crlf)))))


@FUZZ
@given(dialect=st.sampled_from(DIALECTS), reply=replies, data=st.data())
def test_streams_truncated_at_any_byte(dialect, reply, data):
    body = encode(rendered(dialect, reply))
    cut = data.draw(st.integers(0, len(body)))
    check(stream_of(dialect, data.draw(split(body[:cut]))))


_SSE_PIECES = st.sampled_from(
    [b"data: ", b"data:", b"event: ", b": ping", b"\n", b"\r\n", b"\r", b"\n\n", b"[DONE]", b"{", b"}", b'"', b"\xff"]
    + [b'{"choices":[{"delta":{"content":"x"}}]}', b'{"type":"message_stop"}', b'{"type":"content_block_stop"}']
    + [b'{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f"}}']
    + [b'{"choices":[{"delta":{},"finish_reason":"stop"}]}', b'{"error":{"type":"overloaded_error"}}']
)


@FUZZ
@given(
    dialect=st.sampled_from(DIALECTS),
    body=st.lists(_SSE_PIECES, max_size=30).map(b"".join) | st.binary(max_size=300),
    status=st.sampled_from([200, 200, 200, 201, 204, 400, 401, 404, 408, 429, 500, 529]),
    ctype=st.sampled_from(["text/event-stream", "application/json", "text/html", "text/plain", ""]),
    data=st.data(),
)
def test_arbitrary_bytes_any_status_any_content_type(dialect, body, status, ctype, data):
    check(stream_of(dialect, data.draw(split(body)), status=status, ctype=ctype))
