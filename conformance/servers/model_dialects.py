"""The two model API dialects the scripted servers speak — OpenAI Chat Completions and the Anthropic Messages
API — as the real services frame them: SSE event lists for a reply, whole JSON answers, error bodies, and the
checks the real APIs make before answering (every tool call answered by its result, and no result without
its call). Shared by the conformance suite's `ScriptedModel` (conformance/servers/model.py) and the test
suite's queue-driven `LLMServer` (tests/support/llm_server.py), so both speak the same wire.

A *reply* is a dict (every key optional): `text`, `thinking`, `signature`, `redacted_thinking`,
`reasoning_field`, `tool_calls` ([{"id", "name", "arguments": dict | str}]), `interleave`, `usage`
({"input", "output", "cache_read", "cache_write", "reasoning"} or None), `stop`, `finish_reason`,
`stop_reason`, `chunk_size`, `events` (see tests/support/llm_server.py for each one's meaning).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
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


def _messages(body: Any) -> list[Any]:
    """A request's `messages`, or none when the body has no list of them."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return messages if isinstance(messages, list) else []


# --- OpenAI dialect ----------------------------------------------------------------------------------------


def _openai_finish(reply: dict[str, Any]) -> str:
    return reply.get("finish_reason") or _OPENAI_STOPS.get(_stop(reply), "stop")


def _openai_call_deltas(reply: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """The `tool_calls` deltas of a reply's calls, in order: each call's head, then its arguments in pieces; with
    `interleave`, the calls' deltas taken in turn (as a model streaming parallel calls may send them)."""
    streams: list[list[dict[str, Any]]] = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        first = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": ""}}
        frags = [{"index": i, "function": {"arguments": p}} for p in _pieces(_arguments(call), size)]
        streams.append([first, *frags])
    return _in_turn(streams) if reply.get("interleave") else [frag for s in streams for frag in s]


def _in_turn(streams: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The first item of each stream, then the second of each, and so on."""
    longest = max((len(s) for s in streams), default=0)
    return [s[k] for k in range(longest) for s in streams if k < len(s)]


def reply_id(prefix: str) -> str:
    """A reply's own id, as the real APIs give each response one: an agent that tells replies (or messages) apart
    by it must not see every reply of a run as the same one."""
    return prefix + os.urandom(12).hex()


def render_openai(reply: dict[str, Any], model: str, include_usage: bool) -> list[tuple[str, str]]:
    if "events" in reply:
        return [("", e if isinstance(e, str) else json.dumps(e)) for e in reply["events"]]
    size = reply.get("chunk_size", 5)
    base = {"id": reply_id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, str]:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return ("", json.dumps(body))

    out = [chunk({"role": "assistant", "content": ""})]
    field_name = reply.get("reasoning_field", "reasoning_content")
    out += [chunk({field_name: p}) for p in _pieces(reply.get("thinking", ""), size)]
    out += [chunk({"content": p}) for p in _pieces(reply.get("text", ""), size)]
    out += [chunk({"tool_calls": [frag]}) for frag in _openai_call_deltas(reply, size)]
    out.append(chunk({}, _openai_finish(reply)))
    usage = _usage(reply)
    if include_usage and usage is not None:
        out.append(("", json.dumps({**base, "choices": [], "usage": _openai_usage(usage)})))
    out.append(("", "[DONE]"))
    return out


def _openai_usage(usage: dict[str, int]) -> dict[str, Any]:
    prompt = usage["input"] + usage["cache_read"]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage["output"],
        "total_tokens": prompt + usage["output"],
        "prompt_tokens_details": {"cached_tokens": usage["cache_read"]},
        "completion_tokens_details": {"reasoning_tokens": usage["reasoning"]},
    }


def openai_error(status: int, message: str) -> dict[str, Any]:
    kind = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


# --- Anthropic dialect -------------------------------------------------------------------------------------


_Block = tuple[dict[str, Any], list[dict[str, Any]]]  # a content block's start, and its deltas


def _anthropic_blocks(reply: dict[str, Any], size: int) -> list[_Block]:
    """A reply's content blocks, in the order Anthropic sends them: thinking, text, then the tool calls."""
    blocks: list[_Block] = []
    if reply.get("redacted_thinking"):
        blocks.append(({"type": "redacted_thinking", "data": reply["redacted_thinking"]}, []))
    if reply.get("thinking"):
        thinking = reply["thinking"]
        sig = reply.get("signature") or "sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:16]
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(thinking, size)]
        blocks.append(
            (
                {"type": "thinking", "thinking": "", "signature": ""},
                [*deltas, {"type": "signature_delta", "signature": sig}],
            )
        )
    if reply.get("text"):
        blocks.append(
            ({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(reply["text"], size)])
        )
    for call in reply.get("tool_calls") or []:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(_arguments(call), size)]
        blocks.append(({"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}, deltas))
    return blocks


def render_anthropic(reply: dict[str, Any], model: str) -> list[tuple[str, str]]:
    def ev(obj: dict[str, Any]) -> tuple[str, str]:
        return (obj["type"], json.dumps(obj))

    if "events" in reply:
        return [ev(e) if isinstance(e, dict) else ("", e) for e in reply["events"]]
    usage = _usage(reply) or {}
    out = [
        ev({"type": "message_start", "message": _anthropic_message(model, [], None, usage, 1)}),
        ev({"type": "ping"}),
    ]
    for index, (start, deltas) in enumerate(_anthropic_blocks(reply, reply.get("chunk_size", 5))):
        out.append(ev({"type": "content_block_start", "index": index, "content_block": start}))
        out.extend(ev({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas)
        out.append(ev({"type": "content_block_stop", "index": index}))
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


def _anthropic_message(
    model: str, content: list[dict[str, Any]], stop: str | None, usage: dict[str, int], output: int
) -> dict[str, Any]:
    return {
        "id": reply_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("input", 0),
            "cache_read_input_tokens": usage.get("cache_read", 0),
            "cache_creation_input_tokens": usage.get("cache_write", 0),
            "output_tokens": output,
        },
    }


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# --- what the real APIs check before answering ------------------------------------------------------------


def _call_ids(msg: dict[str, Any]) -> list[Any]:
    """The ids of an assistant message's `tool_calls`: a hostile body's may be any JSON value, and only a list's
    objects are calls."""
    calls = msg.get("tool_calls")
    return [c.get("id") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def openai_pairing_error(body: Any) -> str | None:
    """OpenAI's check: each assistant `tool_calls[].id` must be answered by `role: tool` messages before the
    next other message, and each tool message must answer such a call. The wording is OpenAI's."""
    pending: list[Any] = []
    for i, msg in enumerate(_messages(body)):
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
            pending = _call_ids(msg)
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


def _tool_uses_unanswered(at: int, ids: list[Any]) -> str:
    return (
        f"messages.{at}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(map(str, ids))}. Each `tool_use` block must have a corresponding `tool_result` "
        "block in the next message."
    )


def _anthropic_answers(i: int, msg: Any, expected: list[Any]) -> str | None:
    """Anthropic's complaint, if any, about message `i` as the answer to the previous message's `tool_use` ids
    (`expected`): a user message with a `tool_result` for each, and for nothing else."""
    role = msg.get("role") if isinstance(msg, dict) else None
    results = _blocks_of(msg, "tool_result")
    answered = [b.get("tool_use_id") for _, b in results]
    missing = [t for t in expected if role != "user" or t not in answered]
    if missing:
        return _tool_uses_unanswered(i - 1, missing)
    for j, block in results:
        if block.get("tool_use_id") not in expected:
            return (
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                "block in the previous message."
            )
    return None


def anthropic_pairing_error(body: Any) -> str | None:
    """Anthropic's check: each `tool_use` block must be answered by a `tool_result` with its id in the next
    message (a user message), and each `tool_result` must answer a `tool_use` of the previous message."""
    msgs = _messages(body)
    expected: list[Any] = []
    for i, msg in enumerate(msgs):
        problem = _anthropic_answers(i, msg, expected)
        if problem is not None:
            return problem
        assistant = isinstance(msg, dict) and msg.get("role") == "assistant"
        expected = [b.get("id") for _, b in _blocks_of(msg, "tool_use")] if assistant else []
    return _tool_uses_unanswered(len(msgs) - 1, expected) if expected else None


def invalid_request(dialect: str, message: str, param: str | None = "messages") -> dict[str, Any]:
    """The 400 body each real API sends for a request it refuses to answer."""
    if dialect == "openai":
        return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


# --- whole (non-streaming) answers -------------------------------------------------------------------------


def openai_completion(reply: dict[str, Any], model: str) -> dict[str, Any]:
    """A `chat.completion` object: what `stream: false` answers instead of the chunks of `render_openai`."""
    usage = _usage(reply) or {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0}
    calls = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": _arguments(c)}}
        for c in reply.get("tool_calls") or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text") or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": reply_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _openai_finish(reply),
            }
        ],
        "usage": _openai_usage(usage),
    }


def anthropic_message(reply: dict[str, Any], model: str) -> dict[str, Any]:
    """A `message` object: what `stream: false` answers instead of the events of `render_anthropic`."""
    usage = _usage(reply) or {}
    content: list[dict[str, Any]] = []
    if reply.get("text"):
        content.append({"type": "text", "text": reply["text"]})
    for call in reply.get("tool_calls") or []:
        args = call.get("arguments", {})
        if isinstance(args, str):  # arguments given as JSON text, as OpenAI carries them
            try:
                args = json.loads(args)
            except ValueError:
                args = {}
        content.append({"type": "tool_use", "id": call["id"], "name": call["name"], "input": args})
    return _anthropic_message(model, content, reply.get("stop_reason") or _stop(reply), usage, usage.get("output", 0))


# --- the HTTP side both servers share ----------------------------------------------------------------------


def sse_event(name: str, data: str, nl: str = "\n") -> bytes:
    """One SSE event as the real APIs frame it: Anthropic names each event, OpenAI sends bare `data:` lines."""
    return ((f"event: {name}{nl}" if name else "") + f"data: {data}{nl}{nl}").encode()


class ModelHandler(BaseHTTPRequestHandler):
    """Response plumbing for a model server's request handler: JSON answers and chunked bodies."""

    protocol_version = "HTTP/1.1"  # chunked bodies, like the real APIs

    def log_message(self, format: str, *args: Any) -> None:  # keep test and suite output quiet
        pass

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(self, status: int, content_type: str, headers: dict[str, str] | None = None) -> None:
        """Send the head of a chunked body; the connection closes after it (as a stream's does)."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True

    def write_chunk(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# --- reading a request's conversation (the body is written by an unknown agent: any JSON at all) -------------


def _texts(content: Any) -> list[str]:
    """The text of a message's content: a string, or the `text` of its text parts/blocks."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def _is_tool_result(dialect: str, msg: dict[str, Any]) -> bool:
    if dialect == "openai":
        return msg.get("role") == "tool"
    return msg.get("role") == "user" and bool(_blocks_of(msg, "tool_result"))


def _result_texts(dialect: str, msg: dict[str, Any]) -> list[str]:
    if dialect == "openai":
        return ["\n".join(_texts(msg.get("content")))]
    return ["\n".join(_texts(block.get("content"))) for _, block in _blocks_of(msg, "tool_result")]


def _prompt_text(dialect: str, msg: dict[str, Any]) -> str | None:
    """The text of `msg` when it is a prompt: a user message with text that carries no tool results."""
    if msg.get("role") != "user" or _is_tool_result(dialect, msg):
        return None
    text = "\n".join(_texts(msg.get("content")))
    return text if text.strip() else None


def prompt_and_results(dialect: str, body: Any) -> tuple[str | None, list[str]]:
    """The text of the latest user message that is a prompt (has text and carries no tool results: an
    Anthropic user message with tool_result blocks answers tool calls, whatever text rides along), and the
    texts of the tool results that came after it, oldest first. (None, []) when there is no such message."""
    msgs = [m for m in _messages(body) if isinstance(m, dict)]
    for i in range(len(msgs) - 1, -1, -1):
        text = _prompt_text(dialect, msgs[i])
        if text is not None:
            later = [m for m in msgs[i + 1 :] if _is_tool_result(dialect, m)]
            return text, [t for m in later for t in _result_texts(dialect, m)]
    return None, []


def declared_tools(dialect: str, body: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON schema of its input) for each well-formed tool the request declares, in order: OpenAI
    `tools[].function.{name, parameters}`, Anthropic `tools[].{name, input_schema}`. A malformed entry is
    skipped (a schema that is not an object counts as an empty one)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    out: list[tuple[str, dict[str, Any]]] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if dialect == "openai":
            fn = tool.get("function")
            name, schema = (fn.get("name"), fn.get("parameters")) if isinstance(fn, dict) else (None, None)
        else:
            name, schema = tool.get("name"), tool.get("input_schema")
        if isinstance(name, str) and name:
            out.append((name, schema if isinstance(schema, dict) else {}))
    return out
