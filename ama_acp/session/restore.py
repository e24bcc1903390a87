"""Rebuild a session from its file, and replay it to the client (session/load).

The conversation (messages, the meter's and billing's stored state, compaction and prune bookkeeping) is rebuilt
by `Conversation.restore` (session/conversation.py) and repaired there (session/store/repair.py); this module adds
what the person chose (mode, model, thought level), the title and time, the wire ids the file used, and the
entries that make the file agree with the repaired context. `replay_updates` turns the file back into the
updates a live turn produced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ama_acp.config import budget_usd
from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserMessage,
)
from ama_acp.session import options
from ama_acp.session.conversation import Conversation, StoredFigures
from ama_acp.session.editor.updates import is_plan_priority, is_plan_status, is_tool_status, plan_update, wire_line
from ama_acp.session.history.checkpoints import CheckpointLog
from ama_acp.session.options import SessionSetup
from ama_acp.session.store import entries as en
from ama_acp.session.store.repair import INTERRUPTED, PairResult
from ama_acp.session.turn.toolset import describe_call
from ama_acp.session.turn.wire_ids import WireIds
from ama_acp.tools.base import Tool
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.store.session_store import LoadedSession

log = logging.getLogger(__name__)

_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})


class Restored(NamedTuple):
    """A session as its file left it, ready to be built (session/live.py `Session`)."""

    setup: SessionSetup  # the opening's, with the file's last mode, model, thought level, title and time
    conversation: Conversation
    figures: StoredFigures
    wire_ids: WireIds  # every toolCallId the file used, and those given to the repaired calls
    # The entries that make the file agree with the repaired context: an interrupted result (and a failed
    # tool-call record for replay) for each call left without one at the end of the file. The caller appends
    # them once it holds the writer, and adds them to `loaded.entries` so replay shows them.
    repair: list[en.Entry]
    # The prompts and the files each changed, for /rewind (session/history/checkpoints.py).
    checkpoints: CheckpointLog | None = None
    budget: float | None = None  # the last `/budget N` of the file (None: the config's holds)


def restore(
    loaded: LoadedSession, handoff_dir: Path, setup: SessionSetup, tool: Callable[[str], Tool | None]
) -> Restored:
    """The session a LoadedSession's entries build, opened as `setup` says (no updates are sent). `tool` names
    ama's own tools, for the records of calls repaired at the end of the file."""
    rebuilt = Conversation.restore(loaded.entries, handoff_dir, setup.model_id)
    settings = _Settings(setup)
    for entry in loaded.entries:
        settings.apply(entry)
    paired = rebuilt.repaired
    _log_repair(setup.session_id, paired)
    repair: list[en.Entry] = []
    for call, result in paired.tail:
        # The tool_call the person saw live gets its end in replay, under the wire id it had (SessionHost.wire_id).
        if settings.recorded_after.get(call.id, -1) < settings.last_assistant:
            # The live session allocated its id after every recorded one: the next free id is the one it had.
            repair.append(_interrupted_record(call, settings.wire_ids.allocate(call.id), tool, setup.cwd))
        repair.append(en.MessageEntry(message=result))
    checkpoints = CheckpointLog.from_entries(loaded.entries)
    return Restored(
        settings.result(),
        rebuilt.conversation,
        rebuilt.figures,
        settings.wire_ids,
        repair,
        checkpoints,
        settings.budget,
    )


class _Settings:
    """What the file says of the person's choices, the title and time, and the tool calls' wire ids."""

    def __init__(self, setup: SessionSetup) -> None:
        self.setup = setup
        self.model_id, self.mode, self.thought_level = setup.model_id, setup.mode, setup.thought_level
        self.title, self.updated_at = setup.title, setup.updated_at
        self.wire_ids = WireIds()
        self.recorded_after: dict[str, int] = {}  # provider id → messages stored before its last tool-call record
        self.messages = 0  # MessageEntries so far
        self.last_assistant = 0  # MessageEntries stored once the last assistant message was
        self.budget: float | None = None

    def apply(self, entry: en.Entry) -> None:
        match entry:
            case en.MessageEntry():
                self.messages += 1
                if isinstance(entry.message, AssistantMessage):
                    self.last_assistant = self.messages
            case en.ModelEntry():
                self.model_id = entry.model_id
            case en.ModeEntry() if entry.mode_id in options.MODE_NAMES:  # an unknown mode would govern approvals
                self.mode = entry.mode_id
            case en.ConfigEntry(config_id="thought_level") if _thought_level(entry.value):
                self.thought_level = entry.value
            case en.ConfigEntry(config_id="budget") if budget_usd(entry.value) is not None:
                self.budget = budget_usd(entry.value)
            case en.TitleEntry():
                self.title = entry.title
            case en.ToolCallEntry():
                self.wire_ids.add(entry.wire_id)
                self.recorded_after[entry.provider_id] = self.messages
            case en.TurnEntry():
                self.updated_at = entry.at

    def result(self) -> SessionSetup:
        return self.setup._replace(
            model_id=self.model_id,
            mode=self.mode,
            thought_level=self.thought_level,
            title=self.title,
            updated_at=self.updated_at,
        )


def _thought_level(value: object) -> bool:
    return isinstance(value, str) and value in options.THOUGHT_LEVELS


def _log_repair(session_id: str, paired: PairResult) -> None:
    if paired.tail or paired.inserted or paired.dropped:
        log.warning(
            "session %s: repaired its context: %d tool call(s) interrupted at the end, %d earlier without a "
            "result, %d result(s) without a call dropped",
            session_id,
            len(paired.tail),
            paired.inserted,
            paired.dropped,
        )


def _interrupted_record(
    call: ToolCallPart, wire_id: str, tool: Callable[[str], Tool | None], cwd: str
) -> en.ToolCallEntry:
    title, kind, raw_input = call.name, "other", None
    try:
        args = call.parsed_arguments()
        raw_input = args
        described = describe_call(tool(call.name), call.name, args, cwd)
        if described is not None:
            title, kind = described.title, described.kind
    except (ValueError, RecursionError):
        pass  # arguments the model never finished: the record goes without them
    return en.ToolCallEntry(
        wire_id=wire_id,
        provider_id=call.id,
        name=call.name,
        title=title,
        kind=kind,
        status="failed",
        raw_input=raw_input,
        content_text=INTERRUPTED,
    )


def _plan(entries: object) -> list[dict[str, str]]:
    """Plan entries as the wire takes them, whatever the file held."""
    out: list[dict[str, str]] = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict) or not isinstance(e.get("content"), str):
            continue
        status, priority = e.get("status"), e.get("priority")
        out.append(
            {
                "content": e["content"],
                "status": status if is_plan_status(status) else "pending",
                "priority": priority if is_plan_priority(priority) else "medium",
            }
        )
    return out


# --- replay ------------------------------------------------------------------------------------------------


def replay_updates(loaded: LoadedSession) -> list[w.SessionUpdate]:
    """The conversation as the updates a live turn produced, in the original order (R66)."""
    out: list[w.SessionUpdate] = []
    # What the person saw as a message so far. A message replays under the id it had live (stored with it: a
    # reply's, a command's output); one without (user prompts, files written before ids were stored) gets `r<n>`,
    # its place among the shown messages, which no live id (`m-<uuid>`, agent/events.py) can equal, and which
    # stays the same on every load.
    n = 0
    for entry in loaded.entries:
        match entry:
            case en.MessageEntry():
                n += 1
                out += _message_updates(entry.message, entry.message_id or f"r{n}")
            case en.ToolCallEntry():
                out += _tool_call_updates(entry)
            case en.PlanEntry():
                out.append(plan_update(_plan(entry.entries)))
            case en.CommandEntry():
                n += 1
                out.append(w.UserMessageChunk(content=w.TextContent(text=entry.text), message_id=f"r{n}"))
            case en.CommandOutputEntry() if entry.text:
                n += 1
                said = w.TextContent(text=entry.text)
                out.append(w.AgentMessageChunk(content=said, message_id=entry.message_id or f"r{n}"))
    return out


def _message_updates(m: Message, mid: str) -> list[w.SessionUpdate]:
    match m:
        case UserMessage(origin="ama"):
            return []  # ama's own note to the model (a mode reminder): the person never wrote it
        case UserMessage():
            return _prompt_updates(m, mid)
        case AssistantMessage():
            return _reply_updates(m, mid)
    return []


def _prompt_updates(m: UserMessage, mid: str) -> list[w.SessionUpdate]:
    out: list[w.SessionUpdate] = []
    for part in m.content:
        if isinstance(part, TextPart):
            out.append(w.UserMessageChunk(content=w.TextContent(text=part.text), message_id=mid))
        elif isinstance(part, ImagePart):
            image = w.ImageContent(data=part.data, mime_type=part.mime_type)
            out.append(w.UserMessageChunk(content=image, message_id=mid))
    return out


def _reply_updates(m: AssistantMessage, mid: str) -> list[w.SessionUpdate]:
    """What the model thought (unless redacted) and said; an empty part is not replayed."""
    out: list[w.SessionUpdate] = []
    for said in m.content:
        if isinstance(said, ThinkingPart) and said.text and not said.redacted:
            out.append(w.AgentThoughtChunk(content=w.TextContent(text=said.text), message_id=mid))
        elif isinstance(said, TextPart) and said.text:
            out.append(w.AgentMessageChunk(content=w.TextContent(text=said.text), message_id=mid))
    return out


def _tool_call_updates(entry: en.ToolCallEntry) -> list[w.SessionUpdate]:
    """The call as it was asked (`pending`), then its end."""
    from ama_acp.mcp.shown import shown_input  # with the secret patterns: a replayed tool call's, not every load's

    locs = [w.ToolCallLocation(path=loc.path, line=wire_line(loc.line)) for loc in entry.locations]
    call = w.ToolCall(
        tool_call_id=entry.wire_id,
        title=entry.title,
        kind=entry.kind if entry.kind in _KINDS else "other",
        status="pending",
        locations=locs,
        raw_input=shown_input(entry.name, entry.raw_input),  # replayed as it went live: an MCP call's scrubbed
    )
    content: list[w.ToolCallContent] = []
    if entry.content_text:
        content.append(w.Content(content=w.TextContent(text=en.clip_replay_text(entry.content_text))))
    # A call cancelled or cut short is shown as failed: ACP has no other ending for it.
    status: w.ToolCallStatus = entry.status if is_tool_status(entry.status) else "failed"
    return [call, w.ToolCallUpdate(tool_call_id=entry.wire_id, status=status, content=content)]
