"""Schema validation throughput (a script, not a test): python tests/bench/bench_schema.py

Every line ama writes in the tests, and every line of the agent under `ama conformance`, goes through
`ama_conformance.schema.validate.WireValidator.validate_line`. This measures lines per second on realistic lines (streamed
chunks, tool calls and their updates, usage updates, prompt / initialize / session/new results, fs and permission
requests), per kind and for the whole mix, with plain jsonschema (`fast=False`, as before) and with the compiled
check in front of it (`fast=True`, the default), in the same run; and checks both give the same outcome, the
same error text included, on every line, valid or not.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_conformance.schema.validate import WireValidator, load_validator

ROUNDS = 5
SID = "ses_01a235b1135ea5389ac2ac14"
PROSE = "The function `add` in calc.py returned a - b; it now returns a + b and the tests pass. "


def note(update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": update}}


def lines() -> dict[str, list[tuple[str, dict[Any, str]]]]:
    """Kind -> [(line, the client's request ids -> methods)]: what one conversation with ama writes."""
    out: dict[str, list[tuple[str, dict[Any, str]]]] = {}

    def add(kind: str, msg: dict[str, Any], methods: dict[Any, str] | None = None) -> None:
        out.setdefault(kind, []).append((json.dumps(msg, ensure_ascii=False), methods or {}))

    for i in range(40):
        chunk = {"type": "text", "text": PROSE[i % 40 :][: 20 + i]}
        add(
            "agent_message_chunk",
            note({"sessionUpdate": "agent_message_chunk", "content": chunk, "messageId": f"m-{i}"}),
        )
    for i in range(10):
        raw = {"path": f"src/mod{i}.py", "edits": [{"old_text": "a - b", "new_text": "a + b"}]}
        add(
            "tool_call",
            note(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": f"c{i}",
                    "title": f"Edit src/mod{i}.py",
                    "kind": "edit",
                    "status": "pending",
                    "locations": [{"path": f"/work/src/mod{i}.py", "line": 3}],
                    "rawInput": raw,
                }
            ),
        )
        add(
            "tool_call_update",
            note(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": f"c{i}",
                    "status": "completed",
                    "content": [
                        {
                            "type": "diff",
                            "path": f"/work/src/mod{i}.py",
                            "oldText": "a - b\n" * 20,
                            "newText": "a + b\n" * 20,
                        },
                        {"type": "content", "content": {"type": "text", "text": "1 file changed"}},
                    ],
                    "rawOutput": {"ok": True, "lines": 20},
                }
            ),
        )
        add(
            "usage_update",
            note(
                {
                    "sessionUpdate": "usage_update",
                    "used": 2526 + 100 * i,
                    "size": 200000,
                    "cost": {"amount": 0.0027 * (i + 1), "currency": "USD"},
                    "_meta": {"ama": {"source": "usage", "percent": 1.3, "tier": "healthy"}},
                }
            ),
        )
        add(
            "session/prompt result",
            {
                "jsonrpc": "2.0",
                "id": 100 + i,
                "result": {"stopReason": "end_turn", "usage": {"inputTokens": 9, "outputTokens": 3, "totalTokens": 12}},
            },
            {100 + i: "session/prompt"},
        )
        add(
            "fs/read_text_file",
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "fs/read_text_file",
                "params": {"sessionId": SID, "path": f"/work/src/mod{i}.py", "line": 1, "limit": 200},
            },
        )
        add(
            "session/request_permission",
            {
                "jsonrpc": "2.0",
                "id": 50 + i,
                "method": "session/request_permission",
                "params": {
                    "sessionId": SID,
                    "toolCall": {"toolCallId": f"c{i}", "status": "pending", "title": "Run pytest", "kind": "execute"},
                    "options": [
                        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "allow_always", "name": "Always allow pytest", "kind": "allow_always"},
                        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                    ],
                },
            },
        )
    for i in range(5):
        add(
            "initialize result",
            {
                "jsonrpc": "2.0",
                "id": i,
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "loadSession": True,
                        "promptCapabilities": {"image": True, "embeddedContext": True},
                        "mcpCapabilities": {"http": True, "sse": True},
                        "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "fork": {}},
                    },
                    "agentInfo": {"name": "ama", "version": "0.1.0", "title": "ama"},
                    "authMethods": [{"id": "ama-credentials", "name": "Use ama's configured model"}],
                },
            },
            {i: "initialize"},
        )
        add(
            "session/new result",
            {
                "jsonrpc": "2.0",
                "id": 10 + i,
                "result": {
                    "sessionId": SID,
                    "modes": {
                        "currentModeId": "ask",
                        "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
                    },
                    "configOptions": [{"id": "think", "name": "Think", "type": "boolean", "currentValue": False}],
                },
            },
            {10 + i: "session/new"},
        )
    # Invalid lines: both paths run jsonschema for these (the compiled check only ever says "valid" or "ask").
    add("invalid (any kind)", note({"sessionUpdate": "usage_update", "used": 1}))
    add("invalid (any kind)", {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "nope"}}, {7: "session/prompt"})
    add("invalid (any kind)", note({"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}))
    return out


def outcome(v: WireValidator, line: str, methods: dict[Any, str]) -> str | None:
    try:
        v.validate_line(line, methods)
    except AssertionError as exc:
        return str(exc)
    return None


def rate(v: WireValidator, batch: list[tuple[str, dict[Any, str]]], repeat: int) -> float:
    """Lines per second, the best of ROUNDS."""
    best = float("inf")
    for _ in range(ROUNDS):
        gc.collect()
        start = time.perf_counter()
        for _ in range(repeat):
            for line, methods in batch:
                outcome(v, line, methods)
        best = min(best, time.perf_counter() - start)
    return len(batch) * repeat / best


def main() -> int:
    fast = load_validator()
    plain = WireValidator(fast.schema, fast=False)
    by_kind = lines()
    every = [item for batch in by_kind.values() for item in batch]
    for line, methods in every:
        a, b = outcome(fast, line, methods), outcome(plain, line, methods)
        if a != b:
            print(f"DIFFERENT OUTCOMES for {line[:200]}:\n  fast:  {a}\n  plain: {b}")
            return 1
    print(f"same outcome on all {len(every)} lines (valid: {sum(outcome(fast, *x) is None for x in every)})\n")
    print(f"{'kind':28} {'plain lines/s':>14} {'fast lines/s':>13} {'speed-up':>9}")
    ratios = []
    for kind, batch in [*by_kind.items(), ("ALL (the mix above)", every)]:
        repeat = max(1, 200 // len(batch))
        p, f = rate(plain, batch, repeat), rate(fast, batch, repeat * 10)
        print(f"{kind:28} {p:14,.0f} {f:13,.0f} {f / p:8.1f}x")
        if kind != "invalid (any kind)":
            ratios.append(f / p)
    print(f"\nspeed-up on valid lines: median {statistics.median(ratios):.1f}x, lowest {min(ratios):.1f}x (goal >= 2x)")
    return 0 if min(ratios) >= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
