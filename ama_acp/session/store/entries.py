"""What a session file holds: one header line, then one typed entry a line (see docs/sessions.md).

Every entry is a msgspec Struct tagged by the field `"t"`. Adding an entry type or an optional field is
not a format change: readers of the same format skip entry tags they do not know (with a log line) and
ignore fields they do not know. Only a change that old readers would misread bumps `FORMAT_VERSION`.

Free-form values (`kind`, `status`, `purpose`, ...) are plain strings, not Literals, so a new value
written by a newer ama never makes a whole entry unreadable.
"""

from __future__ import annotations

import typing
from datetime import UTC, datetime
from typing import Any

import msgspec

from ama_acp import __version__
from ama_acp.conversation.messages import Message, Usage
from ama_acp.tools.base import Location  # the struct a tool result carries, stored as it is

# The newest format this ama writes and the newest it reads.
FORMAT_VERSION = 1

# Tool results replayed by session/load carry only their first 4 KB (docs/protocol.md "Agent event → update").
REPLAY_TEXT_LIMIT = 4096


def utc_now() -> str:
    """ISO 8601, UTC, milliseconds: sortable as text and what ACP's `updatedAt` expects."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def clip_replay_text(text: str, limit: int = REPLAY_TEXT_LIMIT) -> str:
    """The first `limit` bytes of `text` as UTF-8, never splitting a character."""
    if len(text) <= limit // 4:  # cannot exceed the limit even at 4 bytes a character
        return text
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit].decode(errors="ignore")


class _Entry(msgspec.Struct, tag_field="t", frozen=True, omit_defaults=True):
    """Base of every line. The tag (`"t"`) comes first in each encoded line, which listing relies on."""


class Header(_Entry, tag="header", frozen=True, omit_defaults=False):
    """The first line of every session file. Never omits defaults: `format` must always be on disk."""

    session_id: str
    cwd: str  # absolute
    additional_directories: list[str] = []
    format: int = FORMAT_VERSION
    created_at: str = msgspec.field(default_factory=utc_now)
    ama_version: str = __version__


class MessageEntry(_Entry, tag="msg", frozen=True):
    """One message of the conversation, exactly as the model sees it (tool results in full)."""

    message: Message
    at: str = msgspec.field(default_factory=utc_now)
    # The `messageId` its chunks carried live (an assistant message that showed text), so a replay gives the
    # client the id it already keys the message by. None in files written before, and for messages never shown.
    message_id: str | None = None


class ToolCallEntry(_Entry, tag="tool", frozen=True):
    """The editor-facing record of one tool call, for replay. Written when the call settles; if several
    entries share a `wire_id`, the last one wins.

    Never the diff texts: `diff_paths` names the files a diff was shown for, and `content_text` is the
    first 4 KB of the result (the store clips it even if the caller did not).
    """

    wire_id: str  # the ACP toolCallId (may carry a #2 suffix)
    provider_id: str  # the model's id, pairing it with ToolCallPart / ToolResultMessage
    name: str
    title: str
    kind: str
    status: str  # pending | in_progress | completed | failed (a cancelled or interrupted call is failed)
    locations: list[Location] = []
    raw_input: dict[str, object] | None = None
    content_text: str = ""
    diff_paths: list[str] = []
    at: str = msgspec.field(default_factory=utc_now)


class PlanEntry(_Entry, tag="plan", frozen=True):
    """The whole plan as last shown (ACP plan entries: content, status, priority)."""

    entries: list[dict[str, Any]]
    at: str = msgspec.field(default_factory=utc_now)


class UsageEntry(_Entry, tag="usage", frozen=True):
    """One billed model request with the figures it reported.

    `meter` and `billing` are opaque to the store: the context meter's and the cost tracker's own state
    after this request, so a loaded session resumes them without recomputing.
    """

    model_id: str
    usage: Usage
    cost: float | None = None  # USD for this request; None: unpriced
    purpose: str = "turn"  # turn | title | compaction
    meter: dict[str, object] | None = None
    billing: dict[str, object] | None = None
    at: str = msgspec.field(default_factory=utc_now)


class ModelEntry(_Entry, tag="model", frozen=True):
    model_id: str
    at: str = msgspec.field(default_factory=utc_now)


class ModeEntry(_Entry, tag="mode", frozen=True):
    mode_id: str
    at: str = msgspec.field(default_factory=utc_now)


class ConfigEntry(_Entry, tag="config", frozen=True):
    config_id: str
    value: Any
    at: str = msgspec.field(default_factory=utc_now)


class DirectoriesEntry(_Entry, tag="dirs", frozen=True):
    """The additional directories changed (session/load and resume carry the full list again)."""

    additional_directories: list[str]
    at: str = msgspec.field(default_factory=utc_now)


class PromptEntry(_Entry, tag="prompt", frozen=True, omit_defaults=True):
    """What the model has been told of the session's setting. The first one freezes the system prompt (`system`)
    at the session's first request, so every later request starts with the same bytes (the provider's prompt
    cache); a later one, written after a reminder message, records the mode and directories that reminder told."""

    mode_id: str
    additional_directories: list[str] = msgspec.field(default_factory=list)
    system: str | None = None
    at: str = msgspec.field(default_factory=utc_now)


class McpServersEntry(_Entry, tag="mcp", frozen=True):
    """The MCP servers the editor gave at this open, for the record: names, transports, commands and URLs, the
    names of env variables and headers — never their values (secrets). A load uses the list the editor sends
    again, not this one."""

    servers: list[dict[str, object]]
    at: str = msgspec.field(default_factory=utc_now)


class CompactionEntry(_Entry, tag="compaction", frozen=True):
    """A compaction replaced the context. Paths are relative to the session's handoff folder
    (`<sessions>/<id>/`), so a moved data directory still finds them.

    `kept_from_index` counts MessageEntries from the start of the file: messages before it are replaced
    by the handoff when the context is rebuilt.
    """

    number: int
    summary_path: str
    kept_from_index: int
    inventory_path: str | None = None
    meter: dict[str, object] | None = None
    # Characters of handoff and of inventory the context message carries (None: the files unclipped, as
    # compactions before these fields were written), so a load rebuilds the very message the live context had.
    handoff_chars: int | None = None
    inventory_chars: int | None = None
    # The inventory's list caps the copy was made with (agent/inventory.py LIST_CAPS; None: before they were
    # stored, the newest 30 a list). Checked on load (`inventory.stored_caps`), hence not typed here.
    list_caps: dict[str, object] | None = None
    at: str = msgspec.field(default_factory=utc_now)


class CompactionHoldEntry(_Entry, tag="compaction_hold", frozen=True):
    """Automatic compaction was held (`held`: a compaction failed, was refused, or left the context over the
    threshold) or released again (a compaction, /compact, or the context under pruneAt). A load applies the
    last one, so a held session is not compacted before every request after a restart either."""

    held: bool
    reason: str = ""
    at: str = msgspec.field(default_factory=utc_now)


class ContextEditEntry(_Entry, tag="context_edit", frozen=True):
    """Pruning: the bodies of these messages (MessageEntry indices from the start of the file) were
    replaced by `placeholder` in the context. The stored messages themselves stay as they were."""

    message_indices: list[int]
    action: str = "prune"
    placeholder: str = ""
    meter: dict[str, object] | None = None
    at: str = msgspec.field(default_factory=utc_now)


class TitleEntry(_Entry, tag="title", frozen=True):
    title: str
    at: str = msgspec.field(default_factory=utc_now)


class TurnEntry(_Entry, tag="turn", frozen=True):
    """A prompt turn ended. The store fsyncs after it (by default)."""

    stop_reason: str
    at: str = msgspec.field(default_factory=utc_now)


class CommandEntry(_Entry, tag="command", frozen=True):
    """A slash command the person ran (`/context`): not a message the model sees, but part of what the person
    saw, so replay shows it as their prompt. What it printed follows as CommandOutputEntry lines."""

    text: str
    at: str = msgspec.field(default_factory=utc_now)


class CommandOutputEntry(_Entry, tag="command_output", frozen=True):
    """Text a slash command showed the person (replayed as an agent message)."""

    text: str
    at: str = msgspec.field(default_factory=utc_now)
    # The `messageId` it carried live, which replay sends again. None in files written before it was stored.
    message_id: str | None = None


class FileChangeEntry(_Entry, tag="file_change", frozen=True):
    """ama is about to change a file (write_file, edit_file; through the editor's fs/write_text_file too): a
    checkpoint record (session/history/checkpoints.py, docs/sessions.md "Checkpoints and /rewind"). Written before the
    write; a second one follows when the bytes on disk after it are not those announced (`after`).

    `path` is the file's real path. `first` marks the prompt's first change to it: `before` is then the sha256
    of the saved copy of its bytes before the prompt (`<data dir>/checkpoints/<session id>/`), or None when it
    did not exist; `unrecorded` says why no copy could be kept (too large, not a regular file), "" when one was.
    `after` is the sha256 of the bytes ama wrote (None: no file after it)."""

    prompt: int  # the prompt's number in the thread (1 = the first)
    path: str
    after: str | None = None
    first: bool = False
    before: str | None = None
    unrecorded: str = ""
    at: str = msgspec.field(default_factory=utc_now)


class RewindEntry(_Entry, tag="rewind", frozen=True):
    """`/rewind N`: prompts N… left the conversation (session/store/rewound_thread.py drops them when the file is read).
    `message_index` is the MessageEntry index of prompt N's message, counted over the thread as read up to this
    entry (earlier rewinds applied). `restored` and `kept` name the files put back and those left alone."""

    prompt: int
    message_index: int
    restored: list[str] = []
    kept: list[str] = []
    at: str = msgspec.field(default_factory=utc_now)


Entry = (
    MessageEntry
    | ToolCallEntry
    | PlanEntry
    | UsageEntry
    | ModelEntry
    | ModeEntry
    | ConfigEntry
    | DirectoriesEntry
    | PromptEntry
    | McpServersEntry
    | CompactionEntry
    | CompactionHoldEntry
    | ContextEditEntry
    | TitleEntry
    | TurnEntry
    | CommandEntry
    | CommandOutputEntry
    | FileChangeEntry
    | RewindEntry
)

ENTRY_TYPES: tuple[type[_Entry], ...] = typing.get_args(Entry)
KNOWN_TAGS: frozenset[str] = frozenset(str(t.__struct_config__.tag) for t in ENTRY_TYPES)
