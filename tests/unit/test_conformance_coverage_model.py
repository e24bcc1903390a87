"""The scripted model's `think` and `plan` directives (for the coverage groups' replay of thoughts and plans): a
reply with reasoning first, and one call to a plan (todo) tool with one well-formed item."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ama_acp.tools.todo import TodoTool
from ama_conformance.core.directives import Directive, directive_line, parse_directive
from ama_conformance.servers.model import choose_call, decide
from ama_conformance.servers.model_dialects import render_openai

TODO: dict[str, Any] = TodoTool.parameters


def _openai_body(prompt: str, tools: Sequence[tuple[str, dict[str, Any]]] = ()) -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": prompt}],
        "tools": [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in tools],
    }


def test_think_and_plan_directives_parse() -> None:
    assert parse_directive(directive_line("think", "why not")) == Directive("think", text="why not")
    assert parse_directive("x\n" + directive_line("plan", "one step")) == Directive("plan", text="one step")


def test_think_answers_with_reasoning_before_the_text() -> None:
    answer, call_id = decide("openai", _openai_body(directive_line("think", "a thought")), lambda: "call_1")
    assert (answer.thinking, answer.call, call_id) == ("a thought", None, "")
    events = render_openai({"text": answer.text, "thinking": answer.thinking, "chunk_size": 64}, "m", False)
    assert '"reasoning_content": "a thought"' in events[1][1]


def test_plan_calls_a_todo_tool_with_one_item_the_schema_accepts() -> None:
    tools = [("read_file", {"type": "object", "properties": {"path": {"type": "string"}}}), ("todo_write", TODO)]
    call = choose_call(Directive("plan", text="Check the plan"), tools)
    assert call is not None and call.name == "todo_write"
    assert call.arguments == {"todos": [{"content": "Check the plan", "status": "pending"}]}


def test_plan_without_a_fitting_tool_calls_none() -> None:
    flat = {"type": "object", "properties": {"todos": {"type": "array", "items": {"type": "string"}}}}
    assert choose_call(Directive("plan", text="x"), [("todo_write", flat), ("read", {})]) is None
    answer, _ = decide("openai", _openai_body(directive_line("plan", "x"), [("read", {})]), lambda: "call_1")
    assert answer.call is None and "No tool fits" in answer.text
