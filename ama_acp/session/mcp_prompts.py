"""The editor's MCP servers' prompts as the session's slash commands (docs/commands.md "MCP prompts and resources").

Named `mcp__<server>__<prompt>` (the rule of the MCP tools' wire names, and the name Claude Code gives them),
offered in `available_commands_update` after ama's own commands and the command files', with the prompt's arguments as the hint. Running
one reads the person's argument line (mcp/prompts.py `parse_arguments`), asks the server (prompts/get), and
sends the messages it returns as the turn's user message: a model turn like any prompt, counted by the meter
like any prompt. A line that does not fit the prompt's arguments is told to the person and nothing is sent.

The only hooks into the rest of the session: `offered` (after the built-ins and the command files, in the list the
session announces) and `match` (after those, in `Session.prompt`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from ama_acp.conversation.messages import ImagePart, TextPart, UserMessage
from ama_acp.errors import ToolError
from ama_acp.session.commands import say
from ama_acp.session.facets import Persists
from ama_acp.session.store.entries import CommandEntry
from ama_acp.textsafe import one_line
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.mcp.prompts import McpPrompt
    from ama_acp.session.commands import Command, CommandSession
    from ama_acp.session.mcp import SessionMcp

__all__ = ["match", "offered"]

log = logging.getLogger(__name__)


class HasMcp(Protocol):
    @property
    def mcp(self) -> SessionMcp | None: ...


class PromptSession(Persists, Protocol):
    """What an MCP prompt command uses of the session (session/live.py `Session`)."""

    @property
    def tools(self) -> HasMcp: ...

    async def run_model(self, user: UserMessage) -> str: ...


def _prompts(session: PromptSession) -> list[McpPrompt]:
    mcp = session.tools.mcp
    return mcp.hub.prompts() if mcp is not None else []


def offered(session: PromptSession, taken: set[str]) -> list[w.AvailableCommand]:
    """The ready servers' prompts as commands, but for a name already `taken` (a built-in or a command file's
    keeps it: those come first, and run first)."""
    return [
        w.AvailableCommand(
            name=p.command,
            # A server's text may hold controls (ESC, …): one line, shown, as the command files' are.
            description=one_line(p.description),
            input=w.AvailableCommandInput(hint=one_line(p.hint)) if p.hint else None,
        )
        for p in _prompts(session)
        if p.command not in taken
    ]


def match(session: PromptSession, message: UserMessage) -> Command | None:
    """`/mcp__server__prompt args` in the first text block: the command that runs it, else None."""
    first = message.content[0] if message.content else None
    if not isinstance(first, TextPart) or not first.text.startswith("/mcp__"):
        return None
    name, _, rest = first.text[1:].partition(" ")
    prompt = next((p for p in _prompts(session) if p.command == name.strip()), None)
    mcp = session.tools.mcp
    if prompt is None or mcp is None:
        return None
    line, others = rest.strip(), message.content[1:]

    async def call(_: CommandSession) -> str:
        return await _run(session, mcp, prompt, first.text, line, others)

    return call


async def _run(
    session: PromptSession,
    mcp: SessionMcp,
    prompt: McpPrompt,
    typed: str,
    line: str,
    others: list[TextPart | ImagePart],
) -> str:
    from ama_acp.mcp.prompts import parse_arguments, prompt_parts

    arguments = parse_arguments(prompt, line)
    if isinstance(arguments, str):
        return await _refuse(session, typed, arguments)
    try:
        raw = await mcp.hub.get_prompt(prompt, arguments)
    except ToolError as exc:
        return await _refuse(session, typed, f"/{prompt.command}: {exc}; nothing was sent to the model.")
    # What else the person attached to the prompt (an image, a file) goes with the server's messages.
    return await session.run_model(UserMessage(content=[*prompt_parts(raw, prompt.name), *others]))


async def _refuse(session: PromptSession, typed: str, text: str) -> str:
    """The person's line and why it was not run, stored so a load replays both; no request is made."""
    session.persist(CommandEntry(text=typed))
    await say(session, text)
    return "end_turn"
