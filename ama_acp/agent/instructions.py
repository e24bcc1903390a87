"""A session's project instructions (docs/context.md "Project instructions"): which files the model reads, and when.

- The workspace's file (the first of `[instructions] files` found at the session's working directory) and the
  person's global one (`$XDG_CONFIG_HOME/ama/`, same names) are part of the system prompt as the session's
  first request found them (`freeze`; stored with the frozen prompt, so a load sends the same bytes: `keep`).
  They are read again when the session opens and at the start of each turn; a file changed since the model was
  told of it reaches the model as a `<system-reminder>` note at that point of the conversation, never by
  rewriting the system prompt (the provider's cached prefix stays valid; the seed's rule). What the model was
  told is read from the context: the frozen copy, overridden by the latest reminder still there — so after a
  compaction dropped a reminder the change is told again. Additional directories are not searched: they are
  often other projects or libraries.
- A file in a folder under the workspace is announced when a tool first reads, writes or lists something
  there (the folders between that path and the workspace, each file once): as a note of ama's appended to the
  conversation before the next request, never by rewriting the system prompt, so the cached prefix stays
  valid. A file announced and since changed is announced again (at the next turn's start). After a compaction
  the notes may be gone from the context, so each file is announced again when a tool next works there. A
  loaded session reads which files its context announced from the notes themselves.

Protocol-free; the session calls `refresh` at each turn's start, `touched` for each tool call's paths and
`take_reminder` and `take_note` before each request (session/turn/host.py), and reads `files`/`announced` for the meter and /context.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from msgspec.structs import replace

from ama_acp.agent.instruction_files import (
    NESTED_CHARS,
    PER_FILE_CHARS,
    PROMPT_CHARS,
    REMINDER_HEADER,
    REMOVED,
    InstructionFile,
    announced_in,
    changed_section,
    find,
    nested_section,
    prompt_block,
    prompt_section,
    removed_section,
    signature_of,
    skipped_section,
    system_reminder,
)
from ama_acp.config import InstructionsConfig
from ama_acp.conversation.messages import Message, TextPart, UserMessage
from ama_acp.tools.paths import inside

log = logging.getLogger(__name__)


class SessionInstructions:
    def __init__(self, settings: InstructionsConfig, cwd: str, global_dir: str | None) -> None:
        self.enabled = settings.enabled
        self.names = list(settings.files)
        self.root = os.path.normpath(cwd)
        self.root_real = os.path.realpath(cwd)
        self.global_dir = global_dir
        self.files: list[InstructionFile] = []  # in the system prompt: global first, then the workspace's
        self._block = ""
        self._now: list[InstructionFile] = []  # the same files as last read from disk
        self.frozen = False  # the system prompt's copy is fixed (by the first request, or the session file)
        self._seen: tuple[object, ...] = ()  # what the prompt files' places held when last read
        # Nested files announced in the current context, by shown path; and those waiting for the next request.
        self.announced: dict[str, InstructionFile] = {}
        self._known: dict[str, str] = {}  # shown path → digest of each note in the context (see `_sync`)
        self._scan = (0, 0, 0)  # (id of the first message, messages read, id of the last read)
        self._pending: dict[str, tuple[InstructionFile, bool]] = {}  # shown → (file, changed since announced)
        self._checked: set[str] = set()  # folders already looked at this turn
        if self.enabled:
            self.refresh()

    # --- the system prompt's files ----------------------------------------------------------------------

    def _places(self) -> tuple[object, ...]:
        """The signatures of every name at both places: a file appearing, vanishing or changing alters it."""
        dirs = [self.root] + ([self.global_dir] if self.global_dir else [])
        return tuple(signature_of(os.path.join(d, n)) for d in dirs for n in self.names)

    def refresh(self) -> bool:
        """Read the prompt's files again if anything changed at their places (a stat each, when nothing did);
        True when the system prompt's instructions changed. Nested files announced and changed since are queued
        to be announced again. At the session's open and each turn's start."""
        if not self.enabled:
            return False
        self._checked.clear()
        for f in list(self.announced.values()):
            now = signature_of(f.path)
            if now != f.signature:
                self._queue_nested(os.path.dirname(f.path), changed=True)
        seen = self._places()
        if seen == self._seen:
            return False
        self._seen = seen
        files = self._prompt_files()
        changed = prompt_block(files) != prompt_block(self._now)
        self._now = files
        if not self.frozen:
            self.files, self._block = files, prompt_block(files)
        if changed:
            log.info("project instructions: %s", ", ".join(f.shown for f in files) or "none")
        return changed

    def freeze(self) -> list[InstructionFile]:
        """The session's first request fixes the system prompt's copy; what it holds (to be stored with it)."""
        self.frozen = True
        return list(self.files)

    def keep(self, files: Sequence[InstructionFile]) -> None:
        """A loaded session's system prompt carries the copy its file stored, whatever the disk holds now."""
        self.frozen = True
        self.files, self._block = list(files), prompt_block(list(files))

    def current_block(self) -> str:
        """The instructions as the disk holds them now (a task's fresh context starts from these)."""
        return prompt_block(self._now)

    def _prompt_files(self) -> list[InstructionFile]:
        """The global file (in what room the workspace's leaves it), then the workspace's, as found now."""
        ws = find(self.root, self.names, "workspace", "", self.root_real, PER_FILE_CHARS)
        room = PROMPT_CHARS - (len(ws.text) if ws else 0)
        mine = None
        if self.global_dir and room > 0:
            mine = find(self.global_dir, self.names, "global", "", None, min(PER_FILE_CHARS, room))
        if mine is not None:
            mine = replace(mine, shown=mine.path)
        return [f for f in (mine, ws) if f is not None]

    def block(self) -> str:
        """What the system prompt carries after ama's own text ('' without files): the frozen copy once frozen."""
        return self._block

    def sections(self) -> list[tuple[InstructionFile, str]]:
        """Each prompt file with its text as the system prompt carries it (the meter estimates each)."""
        return [(f, prompt_section(f)) for f in self.files]

    # --- files under the workspace ----------------------------------------------------------------------

    def touched(self, paths: Iterable[str], messages: Sequence[Message]) -> None:
        """A tool is about to work on `paths` (absolute): queue the instruction files of the folders between
        each one and the workspace (the workspace's own file is in the system prompt already). `messages`: the
        context, whose notes say what was announced (see `_sync`)."""
        if not self.enabled:
            return
        self._sync(messages)
        for path in paths:
            try:
                self._look_above(path)
            except (OSError, ValueError) as exc:  # a path the model made up: its tool call says what is wrong
                log.warning("project instructions: cannot look above %r: %s", path[:200], exc)

    def _look_above(self, path: str) -> None:
        norm = os.path.normpath(path)
        if not norm.startswith(self.root.rstrip(os.sep) + os.sep):
            return  # the workspace itself, or outside it
        folder = norm if os.path.isdir(norm) else os.path.dirname(norm)
        while folder != self.root and inside(folder, self.root) and folder not in self._checked:
            self._checked.add(folder)
            self._queue_nested(folder, changed=False)
            folder = os.path.dirname(folder)

    def _queue_nested(self, folder: str, changed: bool) -> None:
        rel = os.path.relpath(folder, self.root).replace(os.sep, "/")
        f = find(folder, self.names, "nested", rel, self.root_real, PER_FILE_CHARS)
        if f is None:
            return
        digest = self._known.get(f.shown)
        if digest == f.digest:
            self.announced[f.shown] = f  # the same text as announced: remember its signature, say nothing
            return
        self._pending[f.shown] = (f, changed or digest is not None)

    def take_reminder(self, messages: Sequence[Message]) -> UserMessage | None:
        """The `<system-reminder>` telling the system prompt's files changed on disk since the model was told of
        them (None: nothing changed). A message of its own, so the seed's tag wraps it whole."""
        if not self.enabled:
            return None
        self._sync(messages)
        parts = self._prompt_changes()
        if not parts:
            return None
        return UserMessage(content=[TextPart(system_reminder("\n\n".join([REMINDER_HEADER, *parts])))], origin="ama")

    def take_note(self, messages: Sequence[Message]) -> UserMessage | None:
        """The note announcing the nested files queued since the last request (None: nothing to say)."""
        if not self.enabled:
            return None
        self._sync(messages)
        parts = self._nested_note()
        return UserMessage(content=[TextPart(parts[0])], origin="ama") if parts else None

    def _prompt_changes(self) -> list[str]:
        """A section for each file of the system prompt whose text on disk is not what the model was last told:
        the frozen copy, unless a reminder still in the context told a newer one."""
        if not self.frozen:
            return []
        frozen = {f.shown: f.digest for f in self.files}
        now = {f.shown: f for f in self._now}
        parts: list[str] = []
        for shown in sorted(frozen.keys() | now.keys()):
            told = self._known.get(shown, frozen.get(shown, REMOVED))
            f = now.get(shown)
            if (f.digest if f is not None else REMOVED) == told:
                continue
            parts.append(changed_section(f) if f is not None else removed_section(shown))
            self._known[shown] = f.digest if f is not None else REMOVED
        return parts

    def _nested_note(self) -> list[str]:
        if not self._pending:
            return []
        parts: list[str] = []
        spent = sum(len(f.text) for f in self.announced.values())
        for shown, (f, changed) in sorted(self._pending.items()):
            if self._known.get(shown) == f.digest:
                continue  # announced meanwhile
            if spent + len(f.text) > NESTED_CHARS:
                parts.append(skipped_section(shown, f.size))
                continue
            spent += len(f.text)
            self.announced[shown] = f
            self._known[shown] = f.digest
            parts.append(nested_section(f, changed))
        self._pending.clear()
        return ["\n\n".join([REMINDER_HEADER, *parts])] if parts else []

    def _sync(self, messages: Sequence[Message]) -> None:
        """What the context's notes announced (shown path → digest), read from the notes themselves: a
        compaction or a rewind may have removed some, and a loaded session starts from what its file holds. A
        file whose note is gone is announced again when a tool next works in its folder. Incremental while the
        context only grows; read whole when its start or its end changed."""
        n = len(messages)
        first = id(messages[0]) if messages else 0
        grew = self._only_grew(messages, first)
        start = self._scan[1] if grew else 0
        if grew and start == n:
            return
        known = dict(self._known) if grew else {}
        known.update(_announced(messages[start:]))
        self._scan = (first, n, id(messages[-1]) if messages else 0)
        if not grew:
            self._forget_gone(known)
        self._known = known

    def _forget_gone(self, known: dict[str, str]) -> None:
        """Keep as announced only the files whose note (with their text as announced) is still in the context."""
        kept = {k: f for k, f in self.announced.items() if known.get(k) == f.digest}
        if len(kept) < len(self.announced):
            self._checked.clear()  # look at those folders again
        self.announced = kept

    def _only_grew(self, messages: Sequence[Message], first: int) -> bool:
        """Whether the context is the one last read with messages added at its end (same first message, and the
        last one read still in its place)."""
        first_read, count, last_read = self._scan
        if first != first_read or len(messages) < count:
            return False
        return not messages or count == 0 or id(messages[count - 1]) == last_read


def _announced(messages: Sequence[Message]) -> dict[str, str]:
    """What ama's notes among `messages` announced: shown path → digest (a later note wins)."""
    known: dict[str, str] = {}
    for m in messages:
        if isinstance(m, UserMessage) and m.origin == "ama":
            for part in m.content:
                if isinstance(part, TextPart):
                    known.update(announced_in(part.text))
    return known
