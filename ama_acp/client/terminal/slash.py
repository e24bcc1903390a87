"""The client's own commands, typed at the prompt: `/mode NAME`, `/model ID`, `/option ID VALUE`, `/help`.

They work with any agent, through the protocol's own methods: a mode through `session/set_mode` (or a config
option of category `mode`, for agents that moved modes there), a model through the config option of category
`model`, any option through `session/set_config_option`. Names are matched against what the agent itself
reported (ids first, then display names, case-insensitively), so a typo is caught here with the choices listed,
instead of being sent and refused. Every other line, `/something` included, is a prompt: agents have slash
commands of their own (`available_commands_update`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ama_acp.client.display.content import flat_options
from ama_acp.errors import ProtocolError
from ama_acp.rpc.dispatch import JSONObject, JSONValue

HELP = (
    "commands: /mode NAME · /model ID · /option ID VALUE · /help — anything else, /commands of the agent "
    "included, is sent as a prompt"
)


class CommandError(ProtocolError):
    """A client command that cannot be carried out as typed (unknown option, value not offered...)."""


@dataclass(frozen=True)
class Command:
    name: str  # mode | model | option | help
    args: tuple[str, ...]


_ARITY = {"mode": 1, "model": 1, "option": 2, "help": 0}
_USAGE = {"mode": "/mode NAME", "model": "/model ID", "option": "/option ID VALUE", "help": "/help"}


def parse(line: str) -> Command | None:
    """The client command `line` is, or None when it is a prompt. Raises CommandError for one of ours typed
    with the wrong number of words."""
    words = line.strip().split()
    if not words or not words[0].startswith("/"):
        return None
    name = words[0][1:]
    if name not in _ARITY:
        return None
    args = words[1:]
    # A name may have spaces ("Full access"): the last argument takes the rest of the line.
    keep = max(_ARITY[name], 1)
    if len(args) > keep:
        args = [*args[: keep - 1], " ".join(args[keep - 1 :])]
    if len(args) != _ARITY[name]:
        raise CommandError(f"usage: {_USAGE[name]}")
    return Command(name, tuple(args))


class SessionState(Protocol):
    """What the commands read about the session: the renderer's record of modes and options."""

    @property
    def modes(self) -> dict[str, dict[str, str]]: ...

    @property
    def config(self) -> dict[str, dict[str, JSONObject]]: ...


class Requester(Protocol):
    async def request(
        self,
        method: str,
        params: Mapping[str, object] | None = None,
        timeout: float | None = 60.0,
    ) -> JSONValue: ...


@dataclass(frozen=True)
class Call:
    """The protocol request a command turns into."""

    method: str
    params: JSONObject
    describe: str  # what the person is told once it was accepted


def _match(wanted: str, choices: list[tuple[str, str]]) -> str | None:
    """The id among (id, name) pairs that `wanted` names: an exact id, else one id or name case-insensitively."""
    if any(cid == wanted for cid, _ in choices):
        return wanted
    folded = wanted.casefold()
    hits = {cid for cid, name in choices if cid.casefold() == folded or name.casefold() == folded}
    return hits.pop() if len(hits) == 1 else None


def _flat_choices(option: JSONObject) -> list[tuple[str, str]]:
    """(value, name) of each choice the renderer knows for the option (the same flattening it shows)."""
    return [
        (value, str(c.get("name") or value))
        for c in flat_options(option.get("options"))
        if isinstance(value := c.get("value"), str)
    ]


def _listing(choices: list[tuple[str, str]]) -> str:
    return ", ".join(cid if cid == name else f"{cid} ({name})" for cid, name in choices) or "(none)"


def _option_by_category(options: dict[str, JSONObject], category: str) -> JSONObject | None:
    return next((o for o in options.values() if o.get("category") == category), None)


_TRUE, _FALSE = {"on", "true", "yes", "1"}, {"off", "false", "no", "0"}


def option_call(session_id: str, option: JSONObject, value: str) -> Call:
    """session/set_config_option for `option` set to `value` (a choice's id or name; on/off for a boolean)."""
    config_id = str(option.get("id"))
    label = str(option.get("name") or config_id)
    params: JSONObject = {"sessionId": session_id, "configId": config_id}
    if option.get("type") == "boolean":
        word = value.casefold()
        if word not in _TRUE | _FALSE:
            raise CommandError(f"{label} is on or off, not {value!r}")
        params.update(type="boolean", value=word in _TRUE)
        return Call("session/set_config_option", params, f"{label}: {'on' if word in _TRUE else 'off'}")
    choices = _flat_choices(option)
    chosen = _match(value, choices)
    if chosen is None:
        raise CommandError(f"{label} has no value {value!r}; choices: {_listing(choices)}")
    params["value"] = chosen
    return Call("session/set_config_option", params, f"{label}: {chosen}")


def plan(command: Command, session_id: str, state: SessionState) -> Call | None:
    """The request `command` makes for this session (None for /help); CommandError when it cannot be made."""
    options = state.config.get(session_id, {})
    if command.name == "help":
        return None
    if command.name == "option":
        config_id, value = command.args
        return _option_plan(session_id, options, config_id, value)
    (wanted,) = command.args
    if command.name == "mode":
        return _mode_plan(session_id, state.modes.get(session_id), options, wanted)
    option = _option_by_category(options, "model")
    if option is None:
        raise CommandError("the agent offers no model choice for this session (no config option of category model)")
    return option_call(session_id, option, wanted)


def _option_plan(session_id: str, options: dict[str, JSONObject], config_id: str, value: str) -> Call:
    pairs = [(cid, str(o.get("name") or cid)) for cid, o in options.items()]
    found = _match(config_id, pairs)
    if found is None:
        raise CommandError(f"the agent offers no option {config_id!r}; options: {_listing(pairs)}")
    return option_call(session_id, options[found], value)


def _mode_plan(session_id: str, modes: dict[str, str] | None, options: dict[str, JSONObject], wanted: str) -> Call:
    """session/set_mode when the agent reported modes; else its config option of category `mode`."""
    if modes:
        mode = _match(wanted, list(modes.items()))
        if mode is None:
            raise CommandError(f"no mode {wanted!r}; modes: {_listing(list(modes.items()))}")
        return Call("session/set_mode", {"sessionId": session_id, "modeId": mode}, f"mode: {modes[mode]}")
    option = _option_by_category(options, "mode")
    if option is None:
        raise CommandError("the agent offers no modes for this session")
    return option_call(session_id, option, wanted)


async def run(command: Command, session_id: str, state: SessionState, conn: Requester) -> tuple[Call | None, JSONValue]:
    """Carry out `command`: the request made and the agent's result ((None, None) for /help). Errors:
    CommandError (as typed) and whatever the request raises (the agent refused)."""
    call = plan(command, session_id, state)
    if call is None:
        return None, None
    return call, await conn.request(call.method, call.params)
