"""The provider's path from bytes to events in batches (providers/stream.py `sse_batches`, dialect.py
`DeltaBuffer`, the dialect parsers): the deltas of one read come out merged, in the stream's order, and
nothing before a bad event is lost; a read that stalls is bounded by the timeout."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.providers.anthropic import parse_anthropic_stream
from ama_acp.providers.base import Failure, Finished, ProviderEvent, TextDelta, ThinkingDelta, ToolCallEvent
from ama_acp.providers.dialect import DeltaBuffer
from ama_acp.providers.failures import StreamError
from ama_acp.providers.openai import OpenAIProvider, parse_openai_stream
from ama_acp.providers.retry import RetryPolicy
from ama_acp.providers.settings import ProviderSettings
from ama_acp.providers.sse import SSEEvent
from tests.support.hypothesis_profiles import examples
from tests.support.llm_server import LLMServer

REQUEST_TEXT = "hi"
StreamParser = Callable[[AsyncIterator[list[SSEEvent]]], AsyncGenerator[ProviderEvent, None]]


def oa(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, Any] | None = None) -> SSEEvent:
    body: dict[str, Any] = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage is not None:
        body = {"choices": [], "usage": usage}
    return SSEEvent("", json.dumps(body))


async def _batches(batches: list[list[SSEEvent]]) -> AsyncIterator[list[SSEEvent]]:
    for batch in batches:
        yield batch


def parse(parser: StreamParser, batches: list[list[SSEEvent]]) -> tuple[list[ProviderEvent], BaseException | None]:
    async def main() -> tuple[list[ProviderEvent], BaseException | None]:
        out: list[ProviderEvent] = []
        try:
            async for event in parser(_batches(batches)):
                out.append(event)
        except StreamError as exc:
            return out, exc
        return out, None

    return anyio.run(main)


def test_the_deltas_of_one_read_are_one_delta_and_reads_stay_apart():
    first = [oa({"content": "Hel"}), oa({"content": "lo"}), oa({"content": ", "})]
    second = [oa({"content": "world"}), oa(finish="stop"), oa(usage={"prompt_tokens": 3, "completion_tokens": 2})]
    events, error = parse(parse_openai_stream, [first, second])
    assert error is None
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello, ", "world"]
    assert isinstance(events[-1], Finished)


def test_thought_and_text_in_one_read_keep_their_order():
    batch = [
        oa({"reasoning_content": "think "}),
        oa({"reasoning_content": "more"}),
        oa({"content": "an"}),
        oa({"content": "swer"}),
        oa({"reasoning_content": "again"}),
        oa({"content": "!"}),
    ]
    events, _ = parse(parse_openai_stream, [batch])
    kinds = [(type(e).__name__, getattr(e, "text", None)) for e in events]
    assert kinds == [
        ("ThinkingDelta", "think more"),
        ("TextDelta", "answer"),
        ("ThinkingDelta", "again"),
        ("TextDelta", "!"),
    ]


def test_a_bad_chunk_mid_read_keeps_the_text_before_it():
    batch = [oa({"content": "partial "}), oa({"content": "answer"}), SSEEvent("", "{not json")]
    events, error = parse(parse_openai_stream, [batch])
    assert isinstance(error, StreamError)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["partial answer"]


def test_tool_calls_come_after_the_text_of_their_read():
    call = {"index": 0, "id": "c1", "function": {"name": "read_file", "arguments": '{"path":"a"}'}}
    batch = [oa({"content": "Let me look."}), oa({"tool_calls": [call]}), oa(finish="tool_calls")]
    events, _ = parse(parse_openai_stream, [batch, [oa(usage={"prompt_tokens": 1, "completion_tokens": 1})]])
    assert [type(e).__name__ for e in events] == ["TextDelta", "ToolCallEvent", "Finished"]


def an(kind: str, **fields: object) -> SSEEvent:
    return SSEEvent(kind, json.dumps({"type": kind, **fields}))


def test_anthropic_merges_a_read_and_signs_its_thinking_after_all_of_it():
    batch = [
        an("message_start", message={"usage": {"input_tokens": 5, "output_tokens": 1}}),
        an("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        an("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hm"}),
        an("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "m"}),
        an("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig"}),
        an("content_block_stop", index=0),
        an("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        an("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hi"}),
        an("content_block_delta", index=1, delta={"type": "text_delta", "text": " there"}),
        an("content_block_stop", index=1),
        an("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 7}),
        an("message_stop"),
    ]
    events, error = parse(parse_anthropic_stream, [batch])
    assert error is None
    assert [(type(e).__name__, getattr(e, "text", None), getattr(e, "signature", None)) for e in events[:3]] == [
        ("ThinkingDelta", "hmm", None),
        ("ThinkingDelta", "", "sig"),
        ("TextDelta", "Hi there", None),
    ]
    assert isinstance(events[-1], Finished)


TEXTS = st.lists(st.tuples(st.sampled_from(["text", "thinking"]), st.text(min_size=1, max_size=5)), max_size=40)


@settings(max_examples=examples(150), deadline=None)
@given(pieces=TEXTS, cuts=st.lists(st.integers(0, 40), max_size=8))
def test_any_batching_gives_the_same_text_in_the_same_order(pieces, cuts):
    """Wherever the reads fall, the concatenated text and thought, and their alternation, are the stream's."""
    events = [oa({"content" if k == "text" else "reasoning_content": t}) for k, t in pieces]
    events += [oa(finish="stop"), oa(usage={"prompt_tokens": 1, "completion_tokens": 1})]
    bounds = sorted({0, len(events), *[min(c, len(events)) for c in cuts]})
    batches = [events[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    out, error = parse(parse_openai_stream, batches)
    assert error is None

    def runs(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
        merged: list[tuple[str, str]] = []
        for k, t in items:
            if merged and merged[-1][0] == k:
                merged[-1] = (k, merged[-1][1] + t)
            else:
                merged.append((k, t))
        return merged

    got = [
        ("text" if isinstance(e, TextDelta) else "thinking", e.text)
        for e in out
        if isinstance(e, TextDelta | ThinkingDelta)
    ]
    assert runs(got) == runs(list(pieces))
    assert len(got) <= len(pieces)


def test_delta_buffer_holds_one_kind_at_a_time():
    buf = DeltaBuffer()
    assert buf.text("a") == [] and buf.text("b") == []
    switched = buf.thinking("c")
    assert switched == [TextDelta(text="ab")]
    assert buf.take() == [ThinkingDelta(text="c")] and buf.take() == []


def test_a_stream_that_stalls_is_ended_by_the_timeout_after_its_last_byte():
    """No scope guards each read any more (it cost most of a delta): httpx's read timeout ends a stall."""
    with LLMServer() as server:
        first = 'data: {"choices":[{"index":0,"delta":{"content":"partial"}}]}\n\n'
        server.enqueue({"raw": first + 'data: {"choices":[]}\n\n', "raw_chunk": len(first), "delay": 30})
        fast = ProviderSettings(base_url=server.openai_url, api_key="sk-x", timeout=0.5, retry=RetryPolicy(0, 0.01))
        p = OpenAIProvider(fast)

        async def main() -> list[ProviderEvent]:
            from ama_acp.conversation.messages import TextPart, UserMessage
            from ama_acp.providers.base import ModelRequest

            request = ModelRequest(model="m", system="", messages=[UserMessage([TextPart(REQUEST_TEXT)])], tools=[])
            return [e async for e in p.stream(request)]

        start = time.monotonic()
        events = anyio.run(main)
        took = time.monotonic() - start
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["partial"]
    fail = events[-1]
    assert isinstance(fail, Failure) and fail.kind == "timeout", events
    assert 0.4 <= took < 5.0, took
    assert not any(isinstance(e, ToolCallEvent) for e in events)


SSE_LINES = st.lists(
    st.one_of(
        st.builds(
            lambda t: f"data: {t}\n\n",
            st.text(alphabet=st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=8),
        ),
        st.builds(lambda t: f"event: {t}\n", st.sampled_from(["a", "b", "message_start"])),
        st.just(": keepalive\n\n"),
        st.builds(lambda t: f"data: {t}\r\n\r\n", st.text(alphabet="xyz", max_size=4)),
        st.builds(lambda t: f"data:{t}\n", st.text(alphabet="pq", max_size=3)),
        st.just("\n"),
    ),
    max_size=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(lines=SSE_LINES, cuts=st.lists(st.integers(0, 400), max_size=10))
def test_the_one_event_fast_path_reads_like_the_general_parser(lines, cuts):
    """Whole events fed one chunk each take the fast path; any other split takes the line loop: both agree."""
    from ama_acp.providers.sse import SSEParser

    body = "".join(lines).encode()
    whole = SSEParser()
    one_chunk_each = [e for line in lines for e in whole.feed(line.encode())] + whole.close()
    split = SSEParser()
    bounds = sorted({0, len(body), *[min(c, len(body)) for c in cuts]})
    pieces = [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    anywhere = [e for piece in pieces for e in split.feed(piece)] + split.close()
    byte = SSEParser()
    by_byte = [e for i in range(len(body)) for e in byte.feed(body[i : i + 1])] + byte.close()
    assert one_chunk_each == anywhere == by_byte
