"""The Anthropic provider against canned replies (the scripted server's, over httpx.MockTransport): blocks, thinking
signatures, translation."""

from __future__ import annotations

from typing import Any

import pytest

from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.conversation.tools import ToolSpec
from ama_acp.providers.anthropic import AnthropicProvider, to_anthropic_messages
from ama_acp.providers.base import (
    Failure,
    Finished,
    ModelRequest,
    Retrying,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
)
from ama_acp.providers.retry import RetryPolicy
from ama_acp.providers.settings import ProviderSettings
from tests.support.llm_server import collect
from tests.support.mock_llm import MockLLM


@pytest.fixture(name="server")
def _server() -> MockLLM:
    return MockLLM()


FAST = RetryPolicy(max_retries=2, backoff_base=0.01)
READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})


def provider(server: MockLLM, **kw: Any) -> AnthropicProvider:
    return AnthropicProvider(
        ProviderSettings(
            base_url=server.anthropic_url,
            api_key="sk-ant-test-456",
            timeout=5,
            retry=FAST,
            transport=server.transport,
            **kw,
        )
    )


def ask(messages: list[Message] | None = None, **kw: Any) -> ModelRequest:
    return ModelRequest(
        model="claude-test", system="You are terse.", messages=messages or [UserMessage([TextPart("hi")])], **kw
    )


def test_streamed_text_usage_and_headers(server):
    server.enqueue(
        {"text": "Hello from Claude.", "usage": {"input": 50, "output": 12, "cache_read": 400, "cache_write": 25}}
    )
    events = collect(lambda: provider(server).stream(ask()))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello from Claude."
    assert events[-1] == Finished(stop="end_turn", usage=Usage(input=50, output=12, cache_read=400, cache_write=25))
    req = server.requests[0]
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant-test-456"
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    body = req.body
    assert body["stream"] is True and body["model"] == "claude-test"
    assert body["max_tokens"] == 8192  # required by the API; the default when max_output is unknown
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert "thinking" not in body


def test_thinking_signature_is_kept_and_sent_back(server):
    server.enqueue(
        {
            "thinking": "The user wants a.py read.",
            "signature": "EqQBCkYIBxgCKkD-signature",
            "text": "Reading it.",
            "tool_calls": [{"id": "toolu_01", "name": "read_file", "arguments": {"path": "a.py"}}],
        },
        {"text": "It prints a."},
    )
    p = provider(server, reasoning=True)
    first = collect(lambda: p.stream(ask(tools=[READ], thought_level="medium", max_output=32000)))
    thinking = [e for e in first if isinstance(e, ThinkingDelta)]
    assert "".join(e.text for e in thinking) == "The user wants a.py read."
    assert thinking[-1] == ThinkingDelta(text="", signature="EqQBCkYIBxgCKkD-signature")
    assert ToolCallEvent("toolu_01", "read_file", '{"path": "a.py"}') in first
    assert isinstance(first[-1], Finished) and first[-1].stop == "tool_use"
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 10000}

    # The loop turns the events into messages; the next request carries them back.
    history: list[Message] = [
        UserMessage([TextPart("what does a.py print?")]),
        AssistantMessage(
            [
                ThinkingPart("The user wants a.py read.", signature="EqQBCkYIBxgCKkD-signature"),
                TextPart("Reading it."),
                ToolCallPart("toolu_01", "read_file", '{"path": "a.py"}'),
            ]
        ),
        ToolResultMessage("toolu_01", "read_file", [TextPart("print('a')")]),
    ]
    collect(lambda: p.stream(ask(history, tools=[READ], thought_level="medium", max_output=32000)))
    sent = server.requests[1].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The user wants a.py read.", "signature": "EqQBCkYIBxgCKkD-signature"},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "a.py"}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": [{"type": "text", "text": "print('a')"}],
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }


def test_redacted_thinking_round_trip(server):
    server.enqueue({"redacted_thinking": "ENCRYPTED==", "text": "Answer."})
    events = collect(lambda: provider(server, reasoning=True).stream(ask()))
    assert ThinkingDelta(text="ENCRYPTED==", redacted=True) in events
    sent = to_anthropic_messages([AssistantMessage([ThinkingPart("ENCRYPTED==", redacted=True), TextPart("Answer.")])])
    assert sent[0]["content"][0] == {"type": "redacted_thinking", "data": "ENCRYPTED=="}


def test_two_tool_calls_and_empty_input(server):
    server.enqueue(
        {
            "tool_calls": [
                {"id": "toolu_a", "name": "read_file", "arguments": {"path": "src/very/long/path/name.py"}},
                {"id": "toolu_b", "name": "list_todos", "arguments": ""},
            ],
            "chunk_size": 3,
        }
    )
    events = collect(lambda: provider(server).stream(ask()))
    assert [e for e in events if isinstance(e, ToolCallEvent)] == [
        ToolCallEvent("toolu_a", "read_file", '{"path": "src/very/long/path/name.py"}'),
        ToolCallEvent("toolu_b", "list_todos", "{}"),
    ]
    assert isinstance(events[-1], Finished) and events[-1].stop == "tool_use"


@pytest.mark.parametrize(
    ("stop_reason", "kind"),
    [("max_tokens", "max_tokens"), ("refusal", "refusal"), ("stop_sequence", "end_turn"), ("end_turn", "end_turn")],
)
def test_stop_reasons(server, stop_reason, kind):
    server.enqueue({"text": "x", "stop_reason": stop_reason})
    events = collect(lambda: provider(server).stream(ask()))
    assert isinstance(events[-1], Finished) and events[-1].stop == kind


def test_translation_merges_roles_and_drops_what_the_api_rejects():
    msgs: list[Message] = [
        UserMessage([TextPart("one")]),
        UserMessage([TextPart(""), TextPart("two")]),
        AssistantMessage(
            [ThinkingPart("unsigned, from another model"), TextPart("ok"), ToolCallPart("call:1", "ls", "not json")]
        ),
        ToolResultMessage("call:1", "ls", [TextPart("boom")], is_error=True),
        UserMessage([TextPart("next")]),
        AssistantMessage([ThinkingPart("only unsigned thinking")]),
    ]
    assert to_anthropic_messages(msgs) == [
        {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "call_1", "name": "ls", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1",
                    "content": [{"type": "text", "text": "boom"}],
                    "is_error": True,
                },
                {"type": "text", "text": "next"},
            ],
        },
    ]


def test_tools_and_thinking_budget():
    p = AnthropicProvider(ProviderSettings(reasoning=True))
    body = p.build_body(ask(tools=[READ], thought_level="high"))
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file",
            "input_schema": READ.parameters,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    # The budget leaves room for the answer within max_tokens.
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert "thinking" not in AnthropicProvider(ProviderSettings(reasoning=False)).build_body(ask(thought_level="high"))
    assert "thinking" not in p.build_body(ask(thought_level="off"))


def test_base_url_with_v1_suffix(server):
    server.enqueue({"text": "ok"})
    settings = ProviderSettings(
        base_url=server.anthropic_url + "/v1/", api_key="k" * 10, retry=FAST, transport=server.transport
    )
    p = AnthropicProvider(settings)
    events = collect(lambda: p.stream(ask()))
    assert isinstance(events[-1], Finished)
    assert server.requests[0].path == "/v1/messages"


def test_overloaded_error_event_mid_stream_is_retried(server):
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.enqueue(
        {"events": [{"type": "message_start", "message": {"usage": {"input_tokens": 3}}}, overloaded]},
        {"text": "second time lucky"},
    )
    events = collect(lambda: provider(server).stream(ask()))
    retry = next(e for e in events if isinstance(e, Retrying))
    assert "Overloaded" in retry.reason
    assert "".join(e.text for e in events[events.index(retry) :] if isinstance(e, TextDelta)) == "second time lucky"
    assert isinstance(events[-1], Finished)


def test_invalid_request_error_event_fails_without_retry(server):
    bad = {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}}
    server.enqueue({"events": [bad]})
    events = collect(lambda: provider(server).stream(ask()))
    assert len(events) == 1 and isinstance(events[0], Failure)
    assert events[0].kind == "bad_request" and "prompt is too long" in events[0].message
    assert len(server.requests) == 1
