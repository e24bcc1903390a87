"""The person's side of acp-client (ama_acp/client/terminal/repl.py): permission questions one at a time, and lines."""

from __future__ import annotations

import io
from typing import Any

import anyio

from ama_acp.client.display.render import Renderer
from ama_acp.client.terminal.repl import terminal_permission
from ama_acp.client.terminal.turn_status import TurnStatus

OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


class Terminal:
    """Answers each question with the next of `answers`, after a pause, and records whether two overlapped."""

    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers
        self.reading = 0
        self.overlapped = False
        self.prompts: list[str] = []

    async def read_line(self, prompt: str) -> str | None:
        self.reading += 1
        self.overlapped |= self.reading > 1
        self.prompts.append(prompt)
        await anyio.sleep(0.01)  # the person thinking: a second question must wait, not ask meanwhile
        self.reading -= 1
        return self.answers.pop(0)


def request(call_id: str) -> dict[str, Any]:
    return {"sessionId": "s", "toolCall": {"toolCallId": call_id, "title": f"Run {call_id}"}, "options": OPTIONS}


def test_two_questions_at_once_are_asked_one_after_the_other():
    async def main() -> None:
        term = Terminal(["1", "2"])
        out = io.StringIO()
        ask = terminal_permission(term, Renderer(out, colour=False), TurnStatus(None))
        answers: dict[str, str] = {}

        async def one(call_id: str) -> None:
            answer = await ask(request(call_id))
            assert answer is not None, call_id
            answers[call_id] = answer

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "a")
            tg.start_soon(one, "b")
        assert not term.overlapped
        assert sorted(answers.values()) == ["no", "yes"]
        text = out.getvalue()
        assert text.count("? permission: Run") == 2 and "1. Allow (allow_once)" in text

    anyio.run(main)


def test_a_wrong_number_is_asked_again_and_empty_is_cancelled():
    async def main() -> None:
        term = Terminal(["7", "x", "2", ""])
        out = io.StringIO()
        ask = terminal_permission(term, Renderer(out, colour=False), TurnStatus(None))
        assert await ask(request("a")) == "no"
        assert "not one of 1–2" in out.getvalue() and len(term.prompts) == 3
        assert await ask(request("b")) is None

    anyio.run(main)
