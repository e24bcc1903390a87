"""The OpenAI-compatible provider against canned replies (the scripted server's, over httpx.MockTransport):
streaming, assembly, usage, translation."""

from __future__ import annotations

from typing import Any

import pytest

from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.conversation.tools import ToolSpec
from ama_acp.providers.base import (
    Failure,
    Finished,
    ModelRequest,
    ProviderEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from ama_acp.providers.openai import OpenAIProvider, to_openai_messages
from ama_acp.providers.retry import RetryPolicy
from ama_acp.providers.settings import ProviderSettings
from ama_acp.providers.sse import SSEEvent
from tests.support.llm_server import collect
from tests.support.mock_llm import MockLLM
from tests.support.sse import sse_events


@pytest.fixture(name="server")
def _server() -> MockLLM:
    return MockLLM()


FAST = RetryPolicy(max_retries=2, backoff_base=0.01)
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})


def provider(server: MockLLM, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(
        ProviderSettings(
            base_url=server.openai_url,
            api_key="sk-test-key-123",
            timeout=5,
            retry=FAST,
            transport=server.transport,
            **kw,
        )
    )


def ask(text: str = "hi", **kw: Any) -> ModelRequest:
    return ModelRequest(model="gpt-test", system="You are terse.", messages=[UserMessage([TextPart(text)])], **kw)


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_streamed_text_and_usage_with_cached_tokens(server):
    server.enqueue(
        {"text": "Hello there, how are you?", "usage": {"input": 90, "output": 30, "cache_read": 30, "reasoning": 4}}
    )
    events = collect(lambda: provider(server).stream(ask()))
    assert sum(isinstance(e, TextDelta) for e in events) > 2  # really streamed in pieces
    assert text_of(events) == "Hello there, how are you?"
    assert events[-1] == Finished(
        stop="end_turn", usage=Usage(input=90, output=30, cache_read=30, total=150, reasoning=4)
    )


def test_request_shape_and_headers(server):
    server.enqueue({"text": "ok"})
    collect(lambda: provider(server).stream(ask(tools=[READ], max_output=1000, thought_level="high")))
    req = server.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test-key-123"
    body = req.body
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file", "parameters": READ.parameters},
        }
    ]
    # A compatible server gets max_tokens; a non-reasoning model gets no reasoning_effort.
    assert body["max_tokens"] == 1000 and "max_completion_tokens" not in body
    assert "reasoning_effort" not in body


def test_reasoning_effort_only_for_reasoning_models_and_official_max_tokens_name():
    official = OpenAIProvider(ProviderSettings(base_url="https://api.openai.com/v1", reasoning=True))
    body = official.build_body(ask(max_output=500, thought_level="medium"))
    assert body["reasoning_effort"] == "medium"
    assert body["max_completion_tokens"] == 500 and "max_tokens" not in body
    assert "reasoning_effort" not in official.build_body(ask(thought_level="off"))


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_streams_as_thinking(server, field):
    server.enqueue({"thinking": "First, consider the file.", "text": "Done.", "reasoning_field": field})
    events = collect(lambda: provider(server, reasoning=True).stream(ask()))
    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(e.text for e in thinking) == "First, consider the file."
    assert all(e.signature is None for e in thinking)
    # Thinking comes before the answer.
    assert events.index(thinking[-1]) < next(i for i, e in enumerate(events) if isinstance(e, TextDelta))


def test_two_parallel_tool_calls_assembled_from_interleaved_fragments(server):
    server.enqueue(
        {
            "text": "Reading both.",
            "tool_calls": [
                {"id": "call_a", "name": "read_file", "arguments": {"path": "src/alpha.py", "limit": 40}},
                {"id": "call_b", "name": "grep", "arguments": {"pattern": "def main", "glob": "**/*.py"}},
            ],
            "interleave": True,
            "chunk_size": 4,
        }
    )
    events = collect(lambda: provider(server).stream(ask(tools=[READ])))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallEvent("call_a", "read_file", '{"path": "src/alpha.py", "limit": 40}'),
        ToolCallEvent("call_b", "grep", '{"pattern": "def main", "glob": "**/*.py"}'),
    ]
    assert isinstance(events[-1], Finished) and events[-1].stop == "tool_use"
    assert events.index(calls[-1]) == len(events) - 2


def test_tool_call_without_arguments_gets_empty_object(server):
    server.enqueue({"tool_calls": [{"id": "call_1", "name": "list_todos", "arguments": ""}]})
    events = collect(lambda: provider(server).stream(ask()))
    assert ToolCallEvent("call_1", "list_todos", "{}") in events


@pytest.mark.parametrize(("stop", "kind"), [("max_tokens", "max_tokens"), ("refusal", "refusal")])
def test_finish_reasons(server, stop, kind):
    server.enqueue({"text": "partial", "stop": stop})
    events = collect(lambda: provider(server).stream(ask()))
    assert isinstance(events[-1], Finished) and events[-1].stop == kind


def test_finished_at_done_when_server_sends_no_usage(server):
    server.enqueue({"text": "no usage here", "usage": None})
    events = collect(lambda: provider(server).stream(ask()))
    assert events[-1] == Finished(stop="end_turn", usage=None)


def test_crlf_framing(server):
    server.enqueue({"text": "line endings", "crlf": True})
    events = collect(lambda: provider(server).stream(ask()))
    assert text_of(events) == "line endings"
    assert isinstance(events[-1], Finished)


def test_conversation_translation(server):
    server.enqueue({"text": "ok"})
    messages: list[Message] = [
        UserMessage([TextPart("Look at this"), ImagePart(data="iVBORw0KGgo=", mime_type="image/png")]),
        AssistantMessage(
            [
                ThinkingPart("I should read both files."),
                TextPart("Reading."),
                ToolCallPart("call_1", "read_file", '{"path": "a.py"}'),
                ToolCallPart("call_2", "read_file", '{"path": "b.py"}'),
            ]
        ),
        ToolResultMessage("call_1", "read_file", [TextPart("print('a')")]),
        ToolResultMessage("call_2", "read_file", [TextPart("no such file")], is_error=True),
        AssistantMessage([ThinkingPart("private"), TextPart("Both read.")]),
        UserMessage([TextPart("thanks")]),
    ]
    collect(lambda: provider(server).stream(ModelRequest(model="m", system="", messages=messages)))
    sent = server.requests[0].body["messages"]
    assert sent[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look at this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }
    assert sent[1] == {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b.py"}'}},
        ],
        # Compatible servers (DeepSeek) need the reasoning back on messages that made tool calls.
        "reasoning_content": "I should read both files.",
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"}
    assert sent[3] == {"role": "tool", "tool_call_id": "call_2", "content": "no such file"}
    assert sent[4] == {"role": "assistant", "content": "Both read."}  # no tool calls: no reasoning sent
    assert sent[5] == {"role": "user", "content": "thanks"}


def test_official_openai_never_gets_reasoning_back_and_tool_call_only_message_has_null_content():
    msgs: list[Message] = [AssistantMessage([ThinkingPart("hm"), ToolCallPart("c1", "ls", "{}")])]
    assert to_openai_messages("", msgs, send_reasoning=False) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        }
    ]
    body = OpenAIProvider(ProviderSettings(base_url="https://api.openai.com/v1")).build_body(
        ModelRequest("m", "", msgs)
    )
    assert "reasoning_content" not in body["messages"][0]


def test_tool_result_images_follow_the_tool_messages():
    msgs: list[Message] = [
        AssistantMessage([ToolCallPart("c1", "screenshot", "{}"), ToolCallPart("c2", "ls", "{}")]),
        ToolResultMessage("c1", "screenshot", [TextPart("shot"), ImagePart("AAAA", "image/png")]),
        ToolResultMessage("c2", "ls", [TextPart("a.py")]),
    ]
    out = to_openai_messages("", msgs)
    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "user"]
    tool_text, images = out[1]["content"], out[3]["content"]
    assert isinstance(tool_text, str) and tool_text.startswith("shot")
    assert isinstance(images, list) and images[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
    }


def test_mid_stream_error_chunk_is_a_failure(server):
    server.enqueue({"events": [{"error": {"message": "context too long", "type": "invalid_request_error"}}]})
    events = collect(lambda: provider(server).stream(ask()))
    assert isinstance(events[-1], Failure) and events[-1].kind == "bad_request"
    assert "context too long" in events[-1].message


def test_sse_reader_handles_split_crlf_comments_and_multiline_data():
    pieces = [": keep-alive\r", "\n", "event: a\r\ndata: one\r", "\ndata: two\r\n\r\n", "data: tail"]
    assert sse_events(pieces) == [SSEEvent("a", "one\ntwo"), SSEEvent("", "tail")]
