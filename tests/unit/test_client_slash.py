"""The acp-client's own commands (ama_acp/client/terminal/slash.py): what is ours and what is a prompt, and the request each
command turns into from what the agent reported — with the agent's reports treated as hostile."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ama_acp.client.terminal.slash import Call, Command, CommandError, parse, plan, run
from tests.support.hypothesis_profiles import examples

SID = "s1"


@dataclass
class State:
    """The renderer's record of a session, as plan() reads it."""

    modes: dict[str, dict[str, str]] = field(default_factory=dict)
    config: dict[str, dict[str, Any]] = field(default_factory=dict)


def state(modes: dict[str, str] | None = None, *options: dict[str, Any]) -> State:
    """A session SID with these modes (id -> name) and config options (keyed by their id, as the renderer does)."""
    out = State()
    if modes is not None:
        out.modes[SID] = modes
    if options:
        out.config[SID] = {str(o.get("id")): o for o in options}
    return out


def select(option_id: str, category: str | None, *choices: tuple[str, str], name: str | None = None) -> dict[str, Any]:
    option: dict[str, Any] = {
        "id": option_id,
        "type": "select",
        "currentValue": choices[0][0] if choices else None,
        "options": [{"value": v, "name": n} for v, n in choices],
    }
    if category is not None:
        option["category"] = category
    if name is not None:
        option["name"] = name
    return option


def boolean(option_id: str, name: str | None = None) -> dict[str, Any]:
    option: dict[str, Any] = {"id": option_id, "type": "boolean", "currentValue": False}
    if name is not None:
        option["name"] = name
    return option


MODEL = select("model", "model", ("opus", "Claude Opus"), ("sonnet", "Claude Sonnet"), name="Model")
MODES = {"ask": "Ask", "code": "Code", "architect": "Architect mode"}


def planned(line: str, st_: State) -> Call | None:
    command = parse(line)
    assert command is not None, line
    return plan(command, SID, st_)


def refused(line: str, st_: State) -> str:
    with pytest.raises(CommandError) as info:
        planned(line, st_)
    return str(info.value)


# --- parse -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/mode code", Command("mode", ("code",))),
        ("  /model   opus  ", Command("model", ("opus",))),
        ("/option thinking on", Command("option", ("thinking", "on"))),
        ("/help", Command("help", ())),
        ("\t/help\n", Command("help", ())),
    ],
)
def test_our_commands_are_parsed(line: str, expected: Command) -> None:
    assert parse(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "fix the tests",
        "please run /mode code",  # a command word not at the start is text
        "/compact",  # the agent's own slash commands are prompts
        "/init now",
        "/",
        "/Mode code",  # ours are lower case: anything else is the agent's
        "/modes code",
        "//mode code",
        "mode code",
    ],
)
def test_everything_else_is_a_prompt(line: str) -> None:
    assert parse(line) is None


@pytest.mark.parametrize(
    ("line", "usage"),
    [
        ("/mode", "usage: /mode NAME"),
        ("/model", "usage: /model ID"),
        ("/option", "usage: /option ID VALUE"),
        ("/option thinking", "usage: /option ID VALUE"),
        ("/help me", "usage: /help"),
    ],
)
def test_wrong_arity_is_an_error_with_the_usage(line: str, usage: str) -> None:
    with pytest.raises(CommandError) as info:
        parse(line)
    assert str(info.value) == usage


def test_a_mode_or_model_name_may_have_spaces() -> None:
    assert parse("/mode Full  access") == Command("mode", ("Full access",))
    assert parse("/model GPT 5 mini") == Command("model", ("GPT 5 mini",))


def test_an_option_value_may_have_spaces() -> None:
    assert parse("/option style  very   terse please") == Command("option", ("style", "very terse please"))


@settings(max_examples=examples(500), deadline=None)
@given(
    st.text()
    | st.builds(lambda w, rest: f"/{w} {rest}", st.sampled_from(["mode", "model", "option", "help"]), st.text())
)
def test_parse_raises_nothing_but_command_error(line: str) -> None:
    try:
        command = parse(line)
    except CommandError:
        return
    if command is not None:
        assert command.name in ("mode", "model", "option", "help")
        assert all(isinstance(a, str) and a for a in command.args)


# --- plan: /mode -------------------------------------------------------------------------------------------


def test_mode_by_id() -> None:
    call = planned("/mode code", state(MODES))
    assert call == Call("session/set_mode", {"sessionId": SID, "modeId": "code"}, "mode: Code")


def test_mode_by_name_case_insensitively() -> None:
    call = planned("/mode ARCHITECT", state({"ask": "Ask", "arch": "architect"}))
    assert call is not None and call.params == {"sessionId": SID, "modeId": "arch"}


def test_mode_by_id_case_insensitively() -> None:
    call = planned("/mode CODE", state(MODES))
    assert call is not None and call.params["modeId"] == "code"


def test_an_unknown_mode_lists_the_choices() -> None:
    text = refused("/mode debug", state(MODES))
    assert "'debug'" in text
    assert "ask (Ask)" in text and "code (Code)" in text and "architect (Architect mode)" in text


def test_a_mode_whose_name_is_its_id_is_listed_once() -> None:
    assert refused("/mode x", state({"plan": "plan"})).endswith("modes: plan")


def test_mode_falls_back_to_a_config_option_of_category_mode() -> None:
    modes_option = select("agent-mode", "mode", ("default", "Default"), ("yolo", "Full"), name="Mode")
    call = planned("/mode FULL", state(None, MODEL, modes_option))
    assert call == Call(
        "session/set_config_option",
        {"sessionId": SID, "configId": "agent-mode", "value": "yolo"},
        "Mode: yolo",
    )


def test_an_empty_mode_list_also_falls_back_to_the_config_option() -> None:
    modes_option = select("agent-mode", "mode", ("default", "Default"))
    call = planned("/mode default", state({}, modes_option))
    assert call is not None and call.method == "session/set_config_option"


def test_session_modes_win_over_a_mode_option() -> None:
    modes_option = select("agent-mode", "mode", ("code", "Code"))
    call = planned("/mode code", state(MODES, modes_option))
    assert call is not None and call.method == "session/set_mode"


@pytest.mark.parametrize("st_", [State(), state(None, MODEL), state({}, MODEL)], ids=["nothing", "model-only", "empty"])
def test_no_modes_and_no_mode_option_is_an_error(st_: State) -> None:
    assert "no modes" in refused("/mode code", st_)


def test_modes_of_another_session_are_not_used() -> None:
    other = State(modes={"other": MODES})
    assert "no modes" in refused("/mode code", other)


# --- plan: /model ------------------------------------------------------------------------------------------


def test_model_by_id_and_by_name() -> None:
    st_ = state(None, select("model", "model", ("opus", "Opus"), ("sonnet", "Sonnet-4.5"), name="Model"))
    expected = {"sessionId": SID, "configId": "model", "value": "sonnet"}
    for line in ("/model sonnet", "/model SONNET", "/model sonnet-4.5"):
        call = planned(line, st_)
        assert call is not None and call.method == "session/set_config_option" and call.params == expected, line
    call = planned("/model sonnet", st_)
    assert call is not None and call.describe == "Model: sonnet"


def test_the_model_option_is_found_by_category_not_by_id() -> None:
    option = select("llm", "model", ("gpt-5", "GPT-5"))
    call = planned("/model gpt-5", state(None, boolean("thinking"), option))
    assert call is not None and call.params["configId"] == "llm"


def test_grouped_model_choices_are_flattened() -> None:
    option = {
        "id": "model",
        "category": "model",
        "type": "select",
        "currentValue": "opus",
        "options": [
            {"group": "anthropic", "name": "Anthropic", "options": [{"value": "opus", "name": "Opus"}]},
            {"group": "openai", "name": "OpenAI", "options": [{"value": "gpt-5", "name": "GPT-5"}]},
            {"value": "local", "name": "Local"},  # groups and plain choices may be mixed
        ],
    }
    st_ = state(None, option)
    for line, value in (("/model gpt-5", "gpt-5"), ("/model opus", "opus"), ("/model local", "local")):
        call = planned(line, st_)
        assert call is not None and call.params["value"] == value, line
    # A group's own id or name is not a choice.
    text = refused("/model openai", st_)
    assert "opus (Opus)" in text and "gpt-5 (GPT-5)" in text and "local (Local)" in text


def test_an_unknown_model_lists_the_choices() -> None:
    text = refused("/model haiku", state(None, MODEL))
    assert "'haiku'" in text and "opus (Claude Opus)" in text and "sonnet (Claude Sonnet)" in text


def test_a_model_option_without_choices_says_none() -> None:
    assert refused("/model x", state(None, select("model", "model"))).endswith("choices: (none)")


@pytest.mark.parametrize(
    "st_", [State(), state(None, boolean("thinking")), state(MODES)], ids=["nothing", "other", "modes"]
)
def test_no_model_option_is_an_error(st_: State) -> None:
    assert "no model choice" in refused("/model opus", st_)


# --- plan: /option -----------------------------------------------------------------------------------------


def test_option_by_id_and_by_name() -> None:
    st_ = state(None, MODEL, boolean("thinking", name="Extended thinking"))
    for line in ("/option model opus", "/option MODEL opus", "/option Model opus"):
        call = planned(line, st_)
        assert call is not None and call.params == {"sessionId": SID, "configId": "model", "value": "opus"}, line
    # The id is one word: "extended thinking on" names an option "extended" (value "thinking on").
    assert "no option 'extended'" in refused("/option extended thinking on", st_)


def test_option_by_name_without_spaces() -> None:
    st_ = state(None, boolean("thinking", name="Reasoning"))
    call = planned("/option reasoning on", st_)
    assert call == Call(
        "session/set_config_option",
        {"sessionId": SID, "configId": "thinking", "type": "boolean", "value": True},
        "Reasoning: on",
    )


@pytest.mark.parametrize(
    ("word", "value"),
    [
        ("on", True),
        ("true", True),
        ("yes", True),
        ("1", True),
        ("ON", True),
        ("True", True),
        ("off", False),
        ("false", False),
        ("no", False),
        ("0", False),
        ("OFF", False),
    ],
)
def test_boolean_options_take_on_and_off_words(word: str, value: bool) -> None:
    call = planned(f"/option thinking {word}", state(None, boolean("thinking")))
    assert call is not None
    assert call.params == {"sessionId": SID, "configId": "thinking", "type": "boolean", "value": value}
    assert call.describe == f"thinking: {'on' if value else 'off'}"


@pytest.mark.parametrize("word", ["maybe", "2", "enabled", "y", "o n"])
def test_a_boolean_refuses_other_words(word: str) -> None:
    assert "on or off" in refused(f"/option thinking {word}", state(None, boolean("thinking")))


def test_a_select_option_sends_the_choice_id() -> None:
    effort = select("effort", None, ("lo", "Low"), ("hi", "High effort"), name="Effort")
    call = planned("/option effort high effort", state(None, effort))
    assert call == Call(
        "session/set_config_option", {"sessionId": SID, "configId": "effort", "value": "hi"}, "Effort: hi"
    )
    assert "type" not in call.params  # the boolean form only for booleans


def test_an_unknown_value_lists_the_choices() -> None:
    effort = select("effort", None, ("lo", "Low"), ("hi", "High"))
    text = refused("/option effort max", state(None, effort))
    assert "'max'" in text and "lo (Low)" in text and "hi (High)" in text


def test_an_unknown_option_lists_the_options() -> None:
    text = refused("/option verbosity high", state(None, MODEL, boolean("thinking")))
    assert "'verbosity'" in text and "model (Model)" in text and "thinking" in text


def test_no_options_at_all() -> None:
    assert refused("/option x y", State()).endswith("options: (none)")


# --- ambiguity ---------------------------------------------------------------------------------------------


def test_two_choices_whose_names_fold_together_are_not_guessed() -> None:
    option = select("model", "model", ("a1", "Fast"), ("b2", "FAST"))
    for line in ("/model fast", "/model Fast", "/model FAST"):
        assert "no value" in refused(line, state(None, option)), line
    call = planned("/model b2", state(None, option))  # the id itself still works
    assert call is not None and call.params["value"] == "b2"


def test_two_modes_whose_names_fold_together_are_not_guessed() -> None:
    assert "no mode" in refused("/mode plan", state({"p1": "Plan", "p2": "PLAN"}))


def test_an_id_differing_only_in_case_is_taken_exactly_else_not_guessed() -> None:
    modes = {"Code": "first", "code": "second"}
    call = planned("/mode code", state(modes))
    assert call is not None and call.params["modeId"] == "code"
    call = planned("/mode Code", state(modes))
    assert call is not None and call.params["modeId"] == "Code"
    assert "no mode" in refused("/mode CODE", state(modes))


def test_an_id_and_another_choices_name_folding_together_are_not_guessed() -> None:
    assert "no mode" in refused("/mode ASK", state({"ask": "Ask", "quick": "ask"}))


def test_two_options_whose_names_fold_together_are_not_guessed() -> None:
    st_ = state(None, boolean("t1", name="Thinking"), boolean("t2", name="thinking"))
    assert "no option" in refused("/option THINKING on", st_)


# --- /help and run -----------------------------------------------------------------------------------------


def test_help_plans_nothing() -> None:
    assert plan(Command("help", ()), SID, State()) is None


class FakeAgent:
    def __init__(self, answer: Any = None) -> None:
        self.sent: list[tuple[str, Mapping[str, object] | None]] = []
        self.answer = answer

    async def request(
        self, method: str, params: Mapping[str, object] | None = None, timeout: float | None = 60.0
    ) -> Any:  # the answer it was given: any JSON
        self.sent.append((method, params))
        return self.answer


def run_line(line: str, st_: State, agent: FakeAgent) -> tuple[Call | None, Any]:
    command = parse(line)
    assert command is not None

    async def go() -> tuple[Call | None, Any]:
        return await run(command, SID, st_, agent)

    return anyio.run(go)


def test_run_sends_the_planned_request_and_returns_the_answer() -> None:
    agent = FakeAgent(answer={"configOptions": []})
    call, result = run_line("/model opus", state(None, MODEL), agent)
    assert agent.sent == [("session/set_config_option", {"sessionId": SID, "configId": "model", "value": "opus"})]
    assert call is not None and call.method == "session/set_config_option" and result == {"configOptions": []}


def test_run_sets_a_mode() -> None:
    agent = FakeAgent(answer={})
    run_line("/mode ask", state(MODES), agent)
    assert agent.sent == [("session/set_mode", {"sessionId": SID, "modeId": "ask"})]


def test_run_help_sends_nothing() -> None:
    agent = FakeAgent()
    assert run_line("/help", State(), agent) == (None, None)
    assert agent.sent == []


def test_run_sends_nothing_for_a_command_refused_here() -> None:
    agent = FakeAgent()
    with pytest.raises(CommandError):
        run_line("/model haiku", state(None, MODEL), agent)
    assert agent.sent == []


def test_run_lets_the_agents_refusal_through() -> None:
    class Refusing(FakeAgent):
        async def request(
            self, method: str, params: Mapping[str, object] | None = None, timeout: float | None = 60.0
        ) -> Any:
            await super().request(method, params, timeout)
            raise RuntimeError("refused")

    agent = Refusing()
    with pytest.raises(RuntimeError, match="refused"):
        run_line("/mode ask", state(MODES), agent)
    assert len(agent.sent) == 1


# --- hostile state -----------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
# Mostly a few words, so that what is typed often does name something the agent reported.
known = st.sampled_from(["a", "A", "on", "off", "ß", "SS"])
words = st.one_of(known, known, known, known, st.text(min_size=1, max_size=6).filter(lambda w: w.split() == [w]))
choice = st.fixed_dictionaries({}, optional={"value": words | junk, "name": words | junk, "group": junk})
good_choice = st.fixed_dictionaries({"value": known}, optional={"name": words | junk})
group = st.fixed_dictionaries(
    {"options": st.lists(choice | junk, max_size=4) | junk}, optional={"name": junk, "group": junk}
)
good_group = st.fixed_dictionaries({"group": words, "options": st.lists(good_choice, max_size=3)})
# The `options` member as an iterable: a list of choices/groups/junk, a dict, a string or null.
iterable_options = st.one_of(
    st.lists(good_choice | good_group, min_size=1, max_size=4),
    st.lists(good_choice | good_group, min_size=1, max_size=4),
    st.lists(choice | group | good_choice | junk, max_size=5),
    st.dictionaries(st.text(max_size=4), junk, max_size=3),
    st.text(max_size=4),
    st.none(),
)


def option_dicts(options_member: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    loose = st.fixed_dictionaries(
        {},
        optional={
            "id": words | junk,  # missing, not a string, or not the key it is stored under
            "name": words | junk,
            "category": st.sampled_from(["mode", "model", "other"]) | junk,
            "type": st.sampled_from(["boolean", "select"]) | junk,
            "currentValue": junk,
            "options": options_member,
        },
    )
    shaped = st.fixed_dictionaries(
        {
            "id": known,
            "category": st.sampled_from(["mode", "model", "other"]),
            "type": st.sampled_from(["boolean", "select"]),
            "options": options_member,
        },
        optional={"name": words | junk, "currentValue": junk},
    )
    return st.one_of(loose, shaped, shaped)


def hostile_states(options_member: st.SearchStrategy[Any]) -> st.SearchStrategy[State]:
    # Within the SessionState types (what the renderer keeps): string keys, option dicts, mode names as strings;
    # everything inside an option is the agent's, and is junk here.
    config = st.dictionaries(words, option_dicts(options_member), max_size=4)
    config = config | st.dictionaries(known, option_dicts(options_member), min_size=1, max_size=3)
    modes = st.dictionaries(words, words, max_size=4)
    return st.builds(
        lambda m, c, other: State(modes={SID: m} if m is not None else {}, config={SID: c, **other}),
        st.none() | modes,
        config,
        st.dictionaries(st.just("other"), config, max_size=1),
    )


commands = st.builds(lambda w: Command("mode", (w,)), words) | st.builds(lambda w: Command("model", (w,)), words)
commands = commands | st.builds(lambda a, b: Command("option", (a, b)), words, words) | st.just(Command("help", ()))


def check_plan(command: Command, st_: State) -> None:
    try:
        call = plan(command, SID, st_)
    except CommandError:
        return
    if command.name == "help":
        assert call is None
        return
    assert call is not None
    assert call.method in ("session/set_mode", "session/set_config_option")
    json.dumps(call.params, allow_nan=False)  # what the connection will send
    assert call.params["sessionId"] == SID
    assert isinstance(call.describe, str)
    if call.method == "session/set_mode":
        assert call.params["modeId"] in st_.modes[SID]  # only a mode the agent reported
    elif call.params.get("type") == "boolean":
        assert isinstance(call.params["value"], bool)
    else:
        assert isinstance(call.params["value"], str) and isinstance(call.params["configId"], str)


@settings(max_examples=examples(300), deadline=None)
@given(commands, hostile_states(iterable_options))
def test_plan_on_hostile_state_refuses_or_sends_json(command: Command, st_: State) -> None:
    check_plan(command, st_)


# The strategies the test below draws from that do not depend on earlier draws, built once (a strategy built
# for each draw is validated and labelled again each time).
_values = st.lists(words, min_size=1, max_size=5, unique=True)
_names = words | junk
_junk_choices = st.lists(junk | choice, max_size=3)
_categories = st.sampled_from(["model", "mode", "other"])


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_a_reported_choice_is_planned_as_that_choice(data: st.DataObject) -> None:
    # Junk beside well-formed choices: naming a reported choice by its id picks exactly it.
    values = data.draw(_values, label="values")
    members: list[Any] = [{"value": v, "name": data.draw(_names)} for v in values]
    members += data.draw(_junk_choices, label="junk choices")
    members = data.draw(st.permutations(members))
    category = data.draw(_categories)
    option = {"id": "opt", "category": category, "type": "select", "options": members}
    st_ = State(config={SID: {"opt": option}})
    wanted = data.draw(st.sampled_from(values))
    command = data.draw(
        st.sampled_from([Command("option", ("opt", wanted))] + [Command(category, (wanted,))] * (category != "other"))
    )
    call = plan(command, SID, st_)
    assert call is not None
    assert call.params == {"sessionId": SID, "configId": "opt", "value": wanted}
    json.dumps(call.params, allow_nan=False)


SCALAR_OPTIONS = State(config={SID: {"m": {"id": "m", "category": "model", "type": "select", "options": 5}}})


@pytest.mark.parametrize("member", [5, True, 1.5])
def test_an_option_whose_choices_are_a_number_is_refused_not_a_crash(member: Any) -> None:
    st_ = State(config={SID: {"m": {"id": "m", "category": "model", "type": "select", "options": member}}})
    with pytest.raises(CommandError):
        plan(Command("model", ("x",)), SID, st_)


@settings(max_examples=examples(300), deadline=None)
@given(commands, hostile_states(iterable_options | scalars))
@example(Command("model", ("x",)), SCALAR_OPTIONS)
def test_plan_on_hostile_state_with_any_options_member(command: Command, st_: State) -> None:
    check_plan(command, st_)
