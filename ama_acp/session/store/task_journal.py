"""The tasks of a session's `task` calls, kept beside the session (issue 28 point 6).

One JSON line per finished task in `<data dir>/tasks/<session id>.jsonl`: its record as `_ama/session_stats`
`tasks` shows it (agent, description, model, status, requests, tokens, context figures, cost, error, its
session id, `external`) and its whole conversation (its prompt, its replies, its tool results as it saw them).
An external agent's conversation is its own: ama keeps what it saw of it, the task it sent and the answer's text.
A load of the session lists the tasks again (`/tasks`, the stats) and replays none of their conversations, kept
for a person, a later reader, and session/load of the task's own id (session/tasks/stored.py). Removed with the session (store.py `delete`). A
fork or a rewind does not copy or cut it: a fork starts with no tasks listed, a rewind keeps the tasks of the
turns it undid (their cost stays spent).

The file is input like any other: each line is decoded on its own into a typed record; a line that does not
decode (cut short by a crash, edited by hand) is skipped with a log line, never an error of the session.
Writing never fails a task: a disk that refuses the line is logged. Secrets are redacted as in the session file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import msgspec

from ama_acp import ownfiles
from ama_acp.conversation.messages import Message

log = logging.getLogger(__name__)

MAX_FILE = 64 * 1024 * 1024  # a file past this is not read (a list of tasks never needs to be that big)

Count = Annotated[int, msgspec.Meta(ge=0)]


class StoredCost(msgspec.Struct, frozen=True):
    amount: Annotated[float, msgspec.Meta(ge=0)]
    currency: str


class TaskFigures(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """One task as `_ama/session_stats` `tasks` lists it (session/tasks/record.py `TaskRecord.figures`)."""

    id: str
    agent: str
    description: str
    model: str
    status: str
    requests: Count
    # An external agent's (session/tasks/external/agent.py) are the figures it reported: one it never reported is
    # absent here as in its record (unknown, never 0). ama's own loop's tasks always carry both.
    tokens: Count | None = None
    context_tokens: Count | None = None
    external: bool = False
    context_window: Count | None = None
    context_percent: Annotated[float, msgspec.Meta(ge=0, le=100)] | None = None
    cost: StoredCost | None = None
    error: str | None = None
    session_id: str | None = None

    def figures(self) -> dict[str, object]:
        out = msgspec.to_builtins(self)
        assert isinstance(out, dict)
        return out


class StoredTask(TaskFigures, frozen=True, rename="camel", omit_defaults=True):
    """A line of the file: the figures and the task's conversation."""

    messages: list[Message] = []


def journal_path(data_dir: Path, session_id: str) -> Path:
    """The file of a session's tasks (`session_id` is a store id: it holds no separator)."""
    return data_dir / "tasks" / f"{session_id}.jsonl"


def data_dir_of(journal: Path) -> Path:
    """The data dir a journal's path (`journal_path`) lies in: the root below which no link is followed."""
    return journal.parent.parent


def read_journal(path: Path) -> bytes | None:
    """The journal's bytes, or None: no file, or one that is not a regular file under the cap (a link, a FIFO,
    a device; logged), or cannot be read. Never blocks."""
    try:
        return ownfiles.read_file(path, data_dir_of(path), MAX_FILE)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ownfiles' refusals (a link, a FIFO, past the cap), a permission: no list
        log.warning("task journal %s not read: %s", path.name, exc)
        return None


def remove_task_journal(data_dir: Path, session_id: str) -> None:
    """A deleted session's tasks go with it (a link in the file's place loses the link, never its target)."""
    try:
        journal_path(data_dir, session_id).unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:  # a directory in its place, a read-only disk: the session's own delete still stands
        log.warning("could not remove the task journal of %s: %s", session_id, exc)


def decode_lines(data: bytes) -> list[TaskFigures]:
    """The figures of each line that decodes; the rest skipped (the conversation is not decoded at all)."""
    out: list[TaskFigures] = []
    decoder = msgspec.json.Decoder(TaskFigures)  # unknown fields (`messages`) are skipped, not built
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(decoder.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("task journal line %d skipped: %s", n, str(exc)[:200])
    return out


class TaskJournal:
    def __init__(
        self,
        path: Callable[[], Path],
        saving: Callable[[], bool] = lambda: True,
        redact: Callable[[bytes], bytes] = lambda line: line,
    ) -> None:
        self._path = path  # a function: the store's folder is known when the session is, not before
        self._saving = saving  # whether the session's own file is written (an unsaved session keeps nothing)
        self._redact = redact  # the session file's redactor: a task's results or answer may hold a secret
        self._previous: list[TaskFigures] | None = None

    def previous(self) -> list[TaskFigures]:
        """The tasks stored before this session was opened here (read once, at the first call)."""
        if self._previous is None:
            self._previous = self._read()
        return self._previous

    def _read(self) -> list[TaskFigures]:
        data = read_journal(self._path())
        return [] if data is None else decode_lines(data)

    def append(self, figures: dict[str, object], messages: Sequence[Message]) -> None:
        """Keep one finished task. Never raises: its answer does not depend on its record being saved."""
        self.previous()  # read before the first write, so this task is not listed twice
        if not self._saving():
            return
        try:
            task = msgspec.convert({**figures, "messages": []}, StoredTask)
            line = self._redact(msgspec.json.encode(msgspec.structs.replace(task, messages=list(messages)))) + b"\n"
            path = self._path()
            # A FIFO in the file's place is refused without blocking (it froze the process when a task ended:
            # issue 39 point 5), a link on the way is never followed.
            ownfiles.append(path, data_dir_of(path), line)
        except (OSError, msgspec.ValidationError) as exc:
            log.warning("task %s not kept: %s", figures.get("id"), exc)
