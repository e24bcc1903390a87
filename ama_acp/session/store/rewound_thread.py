"""A session file's thread with its rewinds applied (`/rewind N`, session/history/rewind.py): what every reader of the
file sees (session/store/reader.py applies it to every read), so a load, a fork, a compaction's inventory and the live
session after a rewind all rebuild the same shortened thread (docs/sessions.md "Checkpoints and /rewind").

A `rewind` entry removes, from the entries before it, everything from prompt N's message on — the messages,
tool-call records, plans, compactions, prunes, turns, commands and file-change records of prompts N… — except:

- the settings the person chose meanwhile (mode, model, thought level, directories, title, MCP record): they are
  the session's settings now, as in a fork (session/history/fork.py);
- each request's billing state (`usage` entries, their meter state stripped): the money was spent, and the
  meter's figure must come from a state measured on the context that remains (the last one before prompt N),
  never from one measured on the removed turns;
- the `/rewind` command itself (the `command` entry just before the rewind entry), so a replay shows it.

A rewind entry that does not name a person's prompt of the thread so far (a damaged or hand-edited file) is
ignored and logged: the thread stays whole rather than cut somewhere else.
"""

from __future__ import annotations

import logging

import msgspec

from ama_acp.conversation.messages import UserMessage
from ama_acp.session.store import entries as en

log = logging.getLogger(__name__)

# Kept from the removed part: what the person chose, not a step of a turn (see the module's doc).
_SETTINGS = (en.ModeEntry, en.ModelEntry, en.ConfigEntry, en.DirectoriesEntry, en.TitleEntry, en.McpServersEntry)


def is_prompt(entry: en.Entry) -> bool:
    """A message the person wrote (not ama's own note to the model, nor a tool result)."""
    return (
        isinstance(entry, en.MessageEntry) and isinstance(entry.message, UserMessage) and entry.message.origin != "ama"
    )


def prompt_start(entries: list[en.Entry], at: int) -> int:
    """Where the person's prompt at `at` begins: at the command they typed when the prompt is a command file's
    expansion (session/file_commands.py writes its `command` entry, perhaps the title, then the message), so a
    rewind or a fork that removes the prompt removes the command with it; else at `at`."""
    i = at - 1
    while i >= 0 and isinstance(entries[i], en.TitleEntry):
        i -= 1
    return i if i >= 0 and isinstance(entries[i], en.CommandEntry) else at


def apply_rewinds(entries: list[en.Entry]) -> list[en.Entry]:
    """`entries` with every rewind applied in order (the same list when there is none)."""
    if not any(isinstance(e, en.RewindEntry) for e in entries):
        return entries
    out: list[en.Entry] = []
    messages: list[int] = []  # the position in `out` of each MessageEntry
    for entry in entries:
        if isinstance(entry, en.RewindEntry):
            _rewind(out, messages, entry)
            continue
        if isinstance(entry, en.MessageEntry):
            messages.append(len(out))
        out.append(entry)
    return out


def _rewind(out: list[en.Entry], messages: list[int], entry: en.RewindEntry) -> None:
    index = entry.message_index
    if not 0 <= index < len(messages) or not is_prompt(out[messages[index]]):
        log.warning(
            "ignored a rewind entry to prompt %r: message %r is not a prompt of the thread", entry.prompt, index
        )
        return
    cut = prompt_start(out, messages[index])
    removed = out[cut:]
    del out[cut:]
    del messages[index:]
    for i, old in enumerate(removed):
        if isinstance(old, _SETTINGS):
            out.append(old)
        elif isinstance(old, en.UsageEntry):
            out.append(msgspec.structs.replace(old, meter=None))
        elif isinstance(old, en.CommandEntry) and i == len(removed) - 1:
            out.append(old)  # the /rewind command itself: a replay shows it, with its output after the rewind
