"""`ama acp-client` prints one model line per change (issue 25, point 8), however the agent interleaves its
updates with the answer to /model: the agent's config_option_update shows the new model, and the answer
(every option again) does not show it a second time even when other lines came between (another option the
change moved, a notice, the meter)."""

from __future__ import annotations

import io
from typing import Any

import anyio

from ama_acp.client.connection import AgentProcess
from ama_acp.client.terminal.repl import run_line
from tests.unit.test_client_model_change import SID, client, model_option, options_update, thought_option


class MovingAgent(AgentProcess):
    """A model change that also moves another option (a thinking level the new model lacks), then says so in
    a notice, then answers with every option. No process: only `request` is answered."""

    def __init__(self, deliver: Any) -> None:
        super().__init__(["no-agent"])
        self.deliver = deliver

    async def request(self, method: str, params: object = None, timeout: float | None = 60.0) -> Any:
        assert isinstance(params, dict)
        options = [model_option(params["value"]), thought_option("off")]
        self.deliver({"sessionId": SID, "update": options_update(*options)})
        notice = {"sessionUpdate": "notice", "severity": "info", "title": "thinking is off for this model"}
        self.deliver({"sessionId": SID, "update": notice})
        return {"configOptions": options}


def run(lines: list[str]) -> list[str]:
    c, out = client()
    c.renderer.session_opened(SID, {"configOptions": [model_option("big"), thought_option("high")]}, quiet=True)
    agent = MovingAgent(c.on_update)

    async def main() -> None:
        for line in lines:
            await run_line(agent, c.renderer, SID, line, io.StringIO(), c.status)

    anyio.run(main)
    return [line for line in out.getvalue().splitlines() if line.startswith("⚙ Model")]


def test_one_model_line_when_other_lines_come_between():
    assert run(["/model nowindow"]) == ["⚙ Model: No window (nowindow)"]


def test_the_same_model_again_is_still_answered_once():
    # The agent keeps the value it had (no update): the answer alone shows it, once per /model.
    assert run(["/model nowindow", "/model nowindow"]) == ["⚙ Model: No window (nowindow)"] * 2
