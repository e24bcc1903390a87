"""Slash commands, advertised with `available_commands_update` and recognised at the start of a prompt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ama_acp.agent.events import new_message_id
from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.session.accounting.budget import parse_budget
from ama_acp.session.facets import Persists, UsesModel
from ama_acp.session.store.entries import CommandEntry, CommandOutputEntry, ConfigEntry
from ama_acp.wire import types as w


class Models(Protocol):
    """The runtime's models (session/manager.py `SessionManager.model_choices`)."""

    def model_choices(self, current: str) -> list[tuple[str, str]]: ...


class Describes(Protocol):
    """session/accounting/session_context.py `SessionContext`."""

    def describe(self) -> str: ...

    def describe_budget(self) -> str: ...

    def set_budget(self, usd: float) -> None: ...

    def budget_stop(self) -> str | None: ...


class Compacts(Protocol):
    """session/turn/compacting.py `Compactor`."""

    async def compact(self, manual: bool, instructions: str = "") -> None: ...


class Rewinds(Protocol):
    """session/history/rewind.py `Rewinder`."""

    async def rewind(self, argument: str) -> None: ...


class ListsTasks(Protocol):
    """session/tasks/runner.py `TaskRunner`."""

    def describe(self) -> str: ...


class KeepsRules(Protocol):
    """session/rules/book.py `RuleBook`."""

    def describe(self) -> str: ...

    def remove(self, number: int) -> str | None: ...


class Approves(Protocol):
    """session/editor/approval.py `Approver`: its permission rules."""

    @property
    def rules(self) -> KeepsRules: ...


class CommandSession(UsesModel, Persists, Protocol):
    """What the commands use of a session (session/live.py `Session`)."""

    @property
    def rt(self) -> Models: ...

    @property
    def ctx(self) -> Describes: ...

    @property
    def compactor(self) -> Compacts: ...

    @property
    def rewinder(self) -> Rewinds: ...

    @property
    def tasks(self) -> ListsTasks: ...

    @property
    def approver(self) -> Approves: ...

    async def set_model(self, model_id: str) -> None: ...


Command = Callable[[CommandSession], Awaitable[str]]
Run = Callable[[CommandSession, str], Awaitable[str]]


class Commands:
    def __init__(self) -> None:
        self._table: dict[str, tuple[str, str | None, Run]] = {}

    def add(self, name: str, description: str, hint: str | None, run: Run) -> None:
        self._table[name] = (description, hint, run)

    def available(self) -> list[w.AvailableCommand]:
        return [
            w.AvailableCommand(name=name, description=desc, input=w.AvailableCommandInput(hint=hint) if hint else None)
            for name, (desc, hint, _) in self._table.items()
        ]

    def match(self, message: UserMessage) -> Command | None:
        """`/name rest` in the first text block: a command of ours, else None (the model sees it)."""
        first = message.content[0] if message.content else None
        if not isinstance(first, TextPart) or not first.text.startswith("/"):
            return None
        name, _, rest = first.text[1:].partition(" ")
        entry = self._table.get(name.strip())
        if entry is None:
            return None
        run = entry[2]
        argument = rest.strip()

        async def call(session: CommandSession) -> str:
            session.persist(CommandEntry(text=first.text))  # so session/load replays the command and its output
            return await run(session, argument)

        return call


async def say(session: Persists, text: str) -> None:
    """A command's output: a message of its own, under an id stored with it so a load replays the same id."""
    mid = new_message_id()
    session.persist(CommandOutputEntry(text=text, message_id=mid))
    await session.send(w.AgentMessageChunk(content=w.TextContent(text=text), message_id=mid))


async def context_command(session: CommandSession, _arg: str) -> str:
    """S3: the meter's figures for a person, with a breakdown by kind."""
    await say(session, session.ctx.describe())
    return "end_turn"


async def model_command(session: CommandSession, arg: str) -> str:
    if not arg:
        lines = [f"Current model: `{session.model_id}`", "", "Available:"]
        for mid, name in session.rt.model_choices(session.model_id):
            lines.append(f"- `{mid}` — {name}")
        lines.append("\nSwitch with `/model <id>`.")
        await say(session, "\n".join(lines))
        return "end_turn"
    from ama_acp.rpc.errors import AcpError

    try:
        await session.set_model(arg)
    except AcpError:  # its message is for a client program ("Invalid params: value: …"), not for a person
        shown = arg if len(arg) <= 80 else arg[:77] + "…"
        await say(session, f"Unknown model {shown!r}: type `/model` to see the models you can switch to.")
        return "end_turn"
    await say(session, f"Model switched to `{session.model_id}`.")
    return "end_turn"


async def compact_command(session: CommandSession, arg: str) -> str:
    why = session.ctx.budget_stop()  # a compaction is a request to the provider like any other
    if why is not None:
        await say(session, f"Not compacted: {why}")
        return "end_turn"
    await session.compactor.compact(manual=True, instructions=arg)
    return "end_turn"


async def budget_command(session: CommandSession, arg: str) -> str:
    """`/budget`: the session's budget and cost; `/budget N`: N dollars for this session from now on (stored with
    it, so a load keeps it)."""
    if arg:
        usd = parse_budget(arg)
        if usd is None:
            shown = arg if len(arg) <= 40 else arg[:39] + "…"
            await say(
                session, f"Not a budget: {shown!r}. Type `/budget N` with N a positive number of dollars (`/budget 5`)."
            )
            return "end_turn"
        session.ctx.set_budget(usd)
        session.persist(ConfigEntry(config_id="budget", value=usd))
    await say(session, session.ctx.describe_budget())
    return "end_turn"


async def rewind_command(session: CommandSession, arg: str) -> str:
    await session.rewinder.rewind(arg)
    return "end_turn"


async def tasks_command(session: CommandSession, _arg: str) -> str:
    """The tasks of the `task` tool: each one's state, tokens, context and cost."""
    await say(session, session.tasks.describe())
    return "end_turn"


async def permissions_command(session: CommandSession, arg: str) -> str:
    """`/permissions`: the rules in force and where each came from; `/permissions remove N` removes a project rule."""
    rules = session.approver.rules
    if arg:
        verb, _, number = arg.partition(" ")
        if verb != "remove" or not number.strip().isdigit():
            await say(session, "Type `/permissions` to list the rules, `/permissions remove N` to remove rule N.")
            return "end_turn"
        try:
            removed = rules.remove(int(number.strip()))
        except OSError as exc:
            removed, problem = None, f" ({exc.strerror or exc})"
        else:
            problem = ""
        if removed is None:
            await say(session, f"Rule {number.strip()} is not a rule of this project's file: not removed{problem}.")
            return "end_turn"
        await say(session, f"Removed `{removed}`.")
    await say(session, rules.describe())
    return "end_turn"


def default_commands() -> Commands:
    cmds = Commands()
    cmds.add("context", "Show what fills the context window", None, context_command)
    cmds.add("compact", "Summarise the conversation to free the context window", "optional focus", compact_command)
    cmds.add("model", "Show or switch the model", "model id", model_command)
    cmds.add(
        "budget",
        "Show the session's budget and cost; /budget N sets N dollars for this session",
        "dollars",
        budget_command,
    )
    cmds.add(
        "permissions",
        "List the permission rules in force; /permissions remove N removes a rule of this project",
        "remove N",
        permissions_command,
    )
    cmds.add("tasks", "Show the helper agents' tasks: state, tokens, context and cost", None, tasks_command)
    cmds.add(
        "rewind",
        "List the prompts and the files each changed; /rewind N restores files and conversation to before prompt N",
        "prompt number",
        rewind_command,
    )
    return cmds
