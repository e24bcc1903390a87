"""The terminal client forgets its meter when the model changes (issue 22, point 7): `ctx ? $?` and no program
status progress until the agent reports the new model's figure. Only the ACP wire is relied on: a change is a
new `currentValue` of the config option of category `model`, in a config_option_update or in the answer to the
person's own /model."""

from __future__ import annotations

import argparse
import io
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.client.connection import AgentProcess
from ama_acp.client.display.meter import format_ctx
from ama_acp.client.display.render import Renderer
from ama_acp.client.terminal.cli import _Client
from ama_acp.client.terminal.program_status import THROTTLE_MS, Emitter
from ama_acp.client.terminal.repl import run_line
from tests.support.hypothesis_profiles import examples
from tests.support.program_status_seed import FakeClock

SID = "sess-1"
UNKNOWN = "ctx ? $?"


def model_option(value: Any, option_id: str = "model") -> dict[str, Any]:
    return {
        "id": option_id,
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": value,
        "options": [{"value": "big", "name": "Big"}, {"value": "nowindow", "name": "No window"}],
    }


def thought_option(value: str) -> dict[str, Any]:
    return {"id": "thought", "name": "Thinking", "category": "thought_level", "type": "select", "currentValue": value}


def options_update(*options: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": "config_option_update", "configOptions": list(options)}


def usage(used: int, size: int = 100_000, cost: float | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": size}
    if cost is not None:
        update["cost"] = {"amount": cost, "currency": "USD"}
    return update


class Screen:
    """A renderer writing into a buffer, with the meter lines it printed and every time it was told of a move."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.r = Renderer(self.out, colour=False)
        self.moves: list[str] = []
        self.r.on_meter = self.moves.append

    def send(self, update: dict[str, Any], sid: str = SID) -> Screen:
        self.r.update({"sessionId": sid, "update": update})
        return self

    def lines(self) -> list[str]:
        return self.out.getvalue().splitlines()

    def meters(self) -> list[str]:
        return [line for line in self.lines() if line.startswith("ctx")]

    def opened(self, model: str = "big", first: dict[str, Any] | None = None) -> Screen:
        """A session as the client opens it: its options, the meter shown, the agent's first figure."""
        self.r.session_opened(SID, {"configOptions": [model_option(model), thought_option("low")]}, quiet=True)
        self.r.show_meter(SID)
        self.send(first or usage(20_000, cost=0.0125))
        return self


BIG = format_ctx(usage(20_000, cost=0.0125))


def test_a_config_option_update_with_another_model_forgets_the_figure_and_cost():
    s = Screen().opened()
    s.send(options_update(model_option("nowindow"), thought_option("low")))
    assert s.meters() == [UNKNOWN, BIG, UNKNOWN]
    assert s.lines()[-2:] == ["⚙ Model: No window (nowindow)", UNKNOWN]  # the change, then the meter it makes
    assert SID not in s.r.usage and s.moves == [SID, SID]


def test_the_figure_the_agent_sends_after_the_change_shows_as_usual():
    """ama's order (E3): the options, then the new model's meter — which is shown, not wiped."""
    s = Screen().opened()
    s.send(options_update(model_option("nowindow"))).send(usage(30_000, size=50_000))
    assert s.meters()[-2:] == [UNKNOWN, format_ctx(usage(30_000, size=50_000))]
    assert s.r.usage[SID]["size"] == 50_000


def test_the_same_model_again_or_another_option_changing_keeps_the_figure():
    s = Screen().opened()
    s.send(options_update(model_option("big"), thought_option("low")))  # the agent repeats every option
    s.send(options_update(model_option("big"), thought_option("high")))  # the thinking level is not the model
    assert s.meters() == [UNKNOWN, BIG] and s.r.usage[SID]["used"] == 20_000


def test_the_first_model_named_is_no_change():
    """An agent that reports its meter before it names its model (or names it late) keeps its figure."""
    s = Screen()
    s.send(usage(20_000, cost=0.0125)).send(options_update(model_option("big")))
    assert s.meters() == [BIG]


def test_usage_first_then_options_leaves_the_meter_unknown_until_the_next_figure():
    """The documented rule for an agent that sends the new model's usage_update before its config_option_update:
    a figure cannot be told to belong to the model announced after it, so the change wins; the next figure shows."""
    s = Screen().opened()
    s.send(usage(40_000, size=50_000)).send(options_update(model_option("nowindow")))
    assert s.meters()[-1] == UNKNOWN
    s.send(usage(41_000, size=50_000))
    assert s.meters()[-1] == format_ctx(usage(41_000, size=50_000))


def test_an_unknown_meter_is_not_printed_again():
    s = Screen().opened()
    s.send(options_update(model_option("nowindow")))
    s.send(options_update(model_option("big")))  # back, and no figure yet: nothing to forget, nothing printed
    s.send(options_update(model_option("nowindow")))
    assert s.meters() == [UNKNOWN, BIG, UNKNOWN]
    s.r.turn_end(SID, "end_turn")  # the turn's summary shows the meter as it stands
    assert s.lines()[-1] == UNKNOWN


def test_another_sessions_model_change_leaves_this_meter_alone():
    s = Screen().opened()
    s.r.session_opened("other", {"configOptions": [model_option("big")]}, quiet=True)
    s.send(usage(5, 10), sid="other").send(options_update(model_option("nowindow")), sid="other")
    assert s.r.usage[SID]["used"] == 20_000 and "other" not in s.r.usage


def test_the_answer_to_the_persons_own_model_change_forgets_the_figure():
    """An agent that answers session/set_config_option with the options and sends no update of its own."""
    s = Screen().opened()
    s.r.option_set(SID, "model", [model_option("nowindow"), thought_option("low")])
    assert s.lines()[-2:] == ["⚙ Model: No window (nowindow)", UNKNOWN]


def test_an_answer_repeating_what_the_agent_announced_keeps_its_new_figure():
    """ama: options, new meter, then the answer with the same options — the answer changes nothing."""
    s = Screen().opened()
    s.send(options_update(model_option("nowindow"))).send(usage(30_000, size=50_000))
    s.r.option_set(SID, "model", [model_option("nowindow")])
    assert s.r.usage[SID]["used"] == 30_000 and s.meters()[-1] == format_ctx(usage(30_000, size=50_000))


def test_one_meter_line_prints_the_outcome_once():
    s = Screen().opened()
    with s.r.one_meter_line(SID):
        s.send(options_update(model_option("nowindow"))).send(usage(30_000, size=50_000))
        s.r.option_set(SID, "model", [model_option("nowindow")])
    assert s.meters() == [UNKNOWN, BIG, format_ctx(usage(30_000, size=50_000))]
    with s.r.one_meter_line(SID):
        s.send(options_update(model_option("big")))
        s.r.option_set(SID, "model", [model_option("big")])
    assert s.meters()[-1] == UNKNOWN and s.meters().count(UNKNOWN) == 2


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("usage"), st.integers(0, 200_000)),
            st.tuples(
                st.just("model"),
                st.one_of(
                    st.sampled_from(["big", "nowindow", ""]),
                    st.none(),
                    st.integers(),
                    st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text("ab", max_size=2), st.integers(), max_size=2),
                ),
            ),
            st.tuples(st.just("answer"), st.sampled_from(["big", "nowindow"])),
            st.tuples(st.just("junk"), st.sampled_from([None, 5, "x", [1], {"id": 3}, {"category": "model"}])),
        ),
        max_size=25,
    )
)
def test_the_meter_shows_a_figure_only_if_it_came_after_the_last_model_change(events):
    """Whatever the agent sends (model values of any JSON type, options that are not options), nothing raises,
    and the meter holds a figure exactly when a usage_update came after the last change of the model's value."""
    s = Screen()
    model: Any = None
    named = False
    figure = False
    for kind, value in events:
        if kind == "usage":
            s.send(usage(value))
            figure = True
        elif kind == "junk":
            s.send({"sessionUpdate": "config_option_update", "configOptions": [value]})
        else:
            if kind == "model":
                s.send(options_update(model_option(value)))
            else:
                s.r.option_set(SID, "model", [model_option(value)])
            if named and value != model:
                figure = False
            model, named = value, True
        assert (SID in s.r.usage) == figure
    expected = format_ctx(s.r.usage.get(SID))
    assert not s.meters() or s.meters()[-1] == expected


# --- the person's /model and the program status, through the client's own code -------------------------


class Agent(AgentProcess):
    """Answers session/set_config_option like an agent would, sending its updates before the answer in the
    order given; the client's update handler is where they land. No process: only `request` is answered."""

    def __init__(self, deliver: Any, order: list[str], window: int | None) -> None:
        super().__init__(["no-agent"])
        self.deliver, self.order, self.window = deliver, order, window
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: object = None, timeout: float | None = 60.0) -> Any:
        assert isinstance(params, dict)
        self.requests.append((method, params))
        options = [model_option(params["value"])]
        for kind in self.order:
            if kind == "options":
                self.deliver({"sessionId": SID, "update": options_update(*options)})
            elif self.window is not None:
                self.deliver({"sessionId": SID, "update": usage(1_234, size=self.window)})
        return {"configOptions": options}


def client(emitter: Emitter | None = None) -> tuple[_Client, io.StringIO]:
    args = argparse.Namespace(cwd="/tmp", no_color=True, prompt=[], auto_approve=True, reject=False)
    out = io.StringIO()
    c = _Client(args, out, io.StringIO(), None, None)
    c.use_status(emitter)
    c.session_id = SID
    c.renderer.session_opened(SID, {"configOptions": [model_option("big")]}, quiet=True)
    c.renderer.show_meter(SID)
    c.on_update({"sessionId": SID, "update": usage(20_000, cost=0.0125)})
    return c, out


def slash_model(c: _Client, agent: Agent, value: str) -> None:
    async def main() -> None:
        await run_line(agent, c.renderer, SID, f"/model {value}", io.StringIO(), c.status)

    anyio.run(main)


def meters(out: io.StringIO) -> list[str]:
    return [line for line in out.getvalue().splitlines() if line.startswith("ctx")]


def test_slash_model_with_amas_order_shows_the_new_figure_once():
    c, out = client()
    slash_model(c, Agent(c.on_update, ["options", "usage"], window=50_000), "nowindow")
    assert meters(out) == [UNKNOWN, BIG, format_ctx(usage(1_234, size=50_000))]  # no `ctx ?` between the two
    assert out.getvalue().count("⚙ Model: No window (nowindow)") == 1  # the update showed it; the answer did not again


def test_slash_model_to_a_model_without_a_window_shows_unknown_once():
    c, out = client()
    slash_model(c, Agent(c.on_update, ["options"], window=None), "nowindow")
    assert meters(out) == [UNKNOWN, BIG, UNKNOWN]


def test_slash_model_answered_without_updates_shows_unknown():
    c, out = client()
    slash_model(c, Agent(c.on_update, [], window=None), "nowindow")
    assert meters(out) == [UNKNOWN, BIG, UNKNOWN]
    assert out.getvalue().splitlines()[-2] == "⚙ Model: No window (nowindow)"


def test_slash_model_with_the_usage_first_shows_unknown_until_the_next_figure():
    c, out = client()
    slash_model(c, Agent(c.on_update, ["usage", "options"], window=50_000), "nowindow")
    assert meters(out)[-1] == UNKNOWN
    c.on_update({"sessionId": SID, "update": usage(2_000, size=50_000)})
    assert meters(out)[-1] == format_ctx(usage(2_000, size=50_000))


def test_the_program_status_drops_its_progress_while_the_meter_is_unknown():
    written: list[str] = []
    clock = FakeClock()
    c, _ = client(Emitter(written.append, clock=clock))
    c.status.working()
    # Each new progress in the same state waits out the emitter's 500 ms throttle (issue 29: the seed's rule).
    c.on_update({"sessionId": SID, "update": usage(30_000)})
    clock.advance(THROTTLE_MS)
    assert "progress=30" in written[-1]
    # The agent moves to another model during the turn: the progress goes, the state stays.
    c.on_update({"sessionId": SID, "update": options_update(model_option("nowindow"))})
    clock.advance(THROTTLE_MS)
    assert "working" in written[-1] and "progress" not in written[-1]
    c.on_update({"sessionId": SID, "update": usage(45_000)})
    clock.advance(THROTTLE_MS)
    assert "progress=45" in written[-1]
