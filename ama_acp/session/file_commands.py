"""A session's commands from files, and `/init` (docs/commands.md): offered after the built-ins, run as a prompt.

The files are read when the session announces its commands (after the opening response, E4: session/new's
answer never waits for them), and looked at again at the start of each prompt: a stat of each file, and a new
`available_commands_update` only when the set offered changed. A name is won by the first that has it: the
built-ins (`/init` among them), then the project's folders (`.ama/`, `.claude/`, `.gemini/`), then the person's.
A hidden command and a file that is not a command are logged and told to the person once in the session (an ACP
`notice` when the client takes them, else an agent message). Running one: the prompt it expands to becomes the
turn's message, and the session file records the command as typed (a CommandEntry) before it, so a load replays
both.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from ama_acp.conversation.messages import TextPart, UserMessage
from ama_acp.shaping.command_files import Folder, Problem, folders, load, signature
from ama_acp.shaping.commands import FileCommand, expand
from ama_acp.shaping.init_prompt import INIT
from ama_acp.textsafe import one_line
from ama_acp.wire import types as w
from ama_acp.wire.warning import warning

log = logging.getLogger(__name__)
TITLE = "Command files"
_TYPED = re.compile(r"/(\S+)(?:\s(.*))?", re.DOTALL)  # `/name`, then the argument line (any whitespace after the name)


class FileCommands:
    def __init__(self, cwd: str, person_dir: str | None) -> None:
        self._folders: list[Folder] = folders(cwd, person_dir)
        self._seen: tuple[object, ...] | None = None  # the files' stats when last loaded
        self._loaded: list[FileCommand] = []
        self._file_problems: list[Problem] = []
        self._reserved: frozenset[str] = frozenset()
        self._table: dict[str, FileCommand] = {INIT.name: INIT}
        self._collisions: list[str] = []
        self._told: set[str] = set()

    def refresh(self, builtins: set[str]) -> bool:
        """Load the files again when their stats changed; True when the commands offered changed."""
        seen = signature(self._folders)
        if seen == self._seen and builtins == self._reserved:
            return False
        before = self.available()
        if seen != self._seen:
            loaded = load(self._folders)
            self._loaded, self._file_problems = loaded.commands, loaded.problems
        self._seen, self._reserved = seen, frozenset(builtins)
        self._table, self._collisions = _merge(builtins, self._loaded)
        return self.available() != before

    def available(self) -> list[w.AvailableCommand]:
        return [
            w.AvailableCommand(
                name=c.name, description=c.description, input=w.AvailableCommandInput(hint=c.hint) if c.hint else None
            )
            for c in self._table.values()
        ]

    def untold(self) -> list[str]:
        """The problems not yet told in this session (each is logged as it is told)."""
        out = []
        for text in [*(str(p) for p in self._file_problems), *self._collisions]:
            text = one_line(text)  # a folder's path (the person's) may hold anything
            if text not in self._told:
                self._told.add(text)
                log.warning("command files: %s", text)
                out.append(text)
        return out

    def expand(self, message: UserMessage) -> tuple[str, UserMessage] | None:
        """`/name arguments` at the start of the message's first text block, for a command of these: the command as
        typed, and the message the model reads (the prompt, then the message's other blocks). None otherwise."""
        first = message.content[0] if message.content else None
        typed = _TYPED.fullmatch(first.text) if isinstance(first, TextPart) else None
        command = self._table.get(typed[1]) if typed is not None else None
        if command is None or typed is None:
            return None
        prompt = TextPart(expand(command, typed[2] or ""))
        return typed[0], UserMessage(content=[prompt, *message.content[1:]], origin=message.origin)


def _merge(builtins: set[str], loaded: list[FileCommand]) -> tuple[dict[str, FileCommand], list[str]]:
    """The commands by name, the first of a name winning; and a sentence for each one hidden."""
    table: dict[str, FileCommand] = {INIT.name: INIT}
    collisions: list[str] = []
    for c in loaded:
        if c.name in builtins or c.name == INIT.name:
            collisions.append(f"{c.shown}: /{c.name} is a built-in command; this file is hidden")
        elif c.name in table:
            collisions.append(f"{c.shown}: /{c.name} is already offered from {table[c.name].shown}; this one is hidden")
        else:
            table[c.name] = c
    return table, collisions


async def tell(send: Callable[[w.SessionUpdate], Awaitable[None]], as_notice: bool, problems: list[str]) -> None:
    """The problems as one notice (or one agent message when the client takes no notices)."""
    if not problems:
        return
    text = "Some command files were skipped:\n" + "\n".join(f"- {p}" for p in problems)
    await send(warning(as_notice, TITLE, text, lead=f"{TITLE}: "))
