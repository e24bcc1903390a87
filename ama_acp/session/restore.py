"""Rebuild a session from its file, and replay it to the client (session/load).

Usage and cost are taken from what was stored (the meter's and billing's state after the last request),
never re-estimated, so the meter after a load equals the meter before the close (rule E4, docs/rules.md).
A stored state that does not decode is ignored: the last good one stands, else the meter estimates.

The file is evidence of what happened, not a promise that it is well formed: ama may have been killed
between a tool call and its result, and a person may have edited the file. So the rebuilt context is
repaired before any request is built from it (`pair_tool_calls`): every tool call gets a result (an
"interrupted" error where none was written) and results without a call are dropped, because providers
refuse a conversation with a dangling call (HTTP 400) — every later prompt would fail. Paths read from the
file (handoffs) must stay inside the session's own folder.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ama_acp.agent.compaction import context_message
from ama_acp.agent.prompt import Setting
from ama_acp.agent.pruning import apply_prune
from ama_acp.context.billing import BillingState
from ama_acp.context.meter import MeterState
from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.session import entries as en
from ama_acp.session import options
from ama_acp.session.updates import is_plan_priority, is_plan_status, is_tool_status, plan_update, wire_line
from ama_acp.session.wire_ids import WireIds
from ama_acp.wire import types as w

if TYPE_CHECKING:
    from ama_acp.session.session import Session
    from ama_acp.session.store import LoadedSession

log = logging.getLogger(__name__)


INTERRUPTED = "This tool call was interrupted (ama stopped before it finished); its outcome is unknown."
MAX_HANDOFF_BYTES = 4 << 20  # a handoff is a few KB; anything this big was not written by ama

_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})


class PairResult(msgspec.Struct):
    messages: list[Message]
    tail: list[tuple[ToolCallPart, ToolResultMessage]]  # results added at the end (written back by the caller)
    inserted: int = 0  # results added before the end (in memory only: a file cannot take them there)
    dropped: int = 0  # results without a call (or a second result for one call)


def interrupted_result(call: ToolCallPart) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=[TextPart(INTERRUPTED)], is_error=True)


def pair_tool_calls(messages: list[Message]) -> PairResult:
    """The context with every tool call followed by its result, and no result without its call.

    A call's results belong right after its assistant message (before the next user or assistant message),
    which is where providers look for them.
    """
    out: list[Message] = []
    tail: list[tuple[ToolCallPart, ToolResultMessage]] = []
    open_calls: dict[str, ToolCallPart] = {}  # calls of the last assistant message still without a result
    inserted = dropped = 0
    for m in messages:
        if isinstance(m, ToolResultMessage):
            if open_calls.pop(m.tool_call_id, None) is not None:
                out.append(m)
            else:
                dropped += 1
            continue
        for call in open_calls.values():
            out.append(interrupted_result(call))
            inserted += 1
        open_calls = {}
        out.append(m)
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                open_calls.setdefault(call.id, call)
    for call in open_calls.values():
        result = interrupted_result(call)
        out.append(result)
        tail.append((call, result))
    return PairResult(out, tail, inserted, dropped)


def _state(value: dict[str, Any] | None, kind: type[msgspec.Struct]) -> dict[str, Any] | None:
    """A stored meter/billing state that decodes as one, else None (the caller keeps the last good one)."""
    if value is None:
        return None
    try:
        state = msgspec.convert(value, kind)
    except (msgspec.ValidationError, RecursionError, TypeError, ValueError):
        return None
    return value if _plausible(state) else None


def _plausible(state: msgspec.Struct) -> bool:
    """No negative or non-finite figure: such a state was damaged, and a figure not measured is unknown."""
    for value in msgspec.structs.astuple(state):
        if isinstance(value, msgspec.Struct):
            if not _plausible(value):
                return False
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int | float) and not (0 <= value < 1e18):
            return False
    return True


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


def restore(session: Session, loaded: LoadedSession, handoff_dir: Path) -> list[en.Entry]:
    """Apply a LoadedSession's entries to a fresh Session (no updates are sent).

    Returns the entries that make the file agree with the repaired context — an interrupted result (and a
    failed tool-call record for replay) for each call left without one at the end of the file. The caller
    appends them once it holds the writer, and adds them to `loaded.entries` so replay shows them.
    """
    all_messages: list[Message] = []
    context: list[Message] = []
    meter_state: dict[str, Any] | None = None
    billing_state: dict[str, Any] | None = None
    wire_ids = WireIds()
    recorded_after: dict[str, int] = {}  # provider id → messages stored before its last tool-call record
    pruned: set[int] = set()  # file indices of messages the context carries pruned
    held = False  # automatic compaction held: the last CompactionHoldEntry, released by a compaction
    # A model switch after the last stored meter state: its anchor is void (U9), even if the model switched back
    # since — live, the first switch ended it (docs/context.md "Session load").
    switched = False
    for entry in loaded.entries:
        if isinstance(entry, en.MessageEntry):
            all_messages.append(entry.message)
            context.append(entry.message)
        elif isinstance(entry, en.UsageEntry):
            # A damaged state is skipped: the last good one stands (never a made-up 0).
            billing_state = _state(entry.billing, BillingState) or billing_state
            if (state := _state(entry.meter, MeterState)) is not None:
                meter_state, switched = state, False
        elif isinstance(entry, en.CompactionEntry):
            kept_from = min(max(entry.kept_from_index, 0), len(all_messages))
            context = _compacted(entry, all_messages, kept_from, handoff_dir)
            meter_state = _state(entry.meter, MeterState)  # the context changed: the old state is void either way
            switched = switched and meter_state is None
            session.compactions = entry.number
            session.context_first, session.context_synthetic = kept_from, 1
            held = False
            # Messages kept through the compaction stay pruned, as they were in the live context.
            apply_prune(context, [i - kept_from + 1 for i in pruned if i >= kept_from])
        elif isinstance(entry, en.CompactionHoldEntry):
            held = entry.held
        elif isinstance(entry, en.ContextEditEntry) and entry.action == "prune":
            pruned.update(entry.message_indices)
            apply_prune(context, [i - session.context_first + session.context_synthetic for i in entry.message_indices])
            if (state := _state(entry.meter, MeterState)) is not None:
                meter_state, switched = state, False
        elif isinstance(entry, en.PromptEntry):
            if entry.system is not None and session.frozen_prompt is None:
                session.frozen_prompt = entry.system  # the next request starts with the bytes the last one did
            session.told = Setting(entry.mode_id, tuple(entry.additional_directories))
        elif isinstance(entry, en.ModelEntry):
            switched = switched or entry.model_id != session.model_id
            session.model_id = entry.model_id
        elif isinstance(entry, en.ModeEntry):
            if entry.mode_id in options.MODE_NAMES:  # a mode this ama does not know would govern approvals
                session.mode = entry.mode_id
        elif isinstance(entry, en.ConfigEntry) and entry.config_id == "thought_level":
            if isinstance(entry.value, str) and entry.value in options.THOUGHT_LEVELS:
                session.thought_level = entry.value
        elif isinstance(entry, en.TitleEntry):
            session.title = entry.title
        elif isinstance(entry, en.PlanEntry):
            session.todos = _plan(entry.entries)
        elif isinstance(entry, en.ToolCallEntry):
            wire_ids.add(entry.wire_id)
            recorded_after[entry.provider_id] = len(all_messages)
        elif isinstance(entry, en.TurnEntry):
            session.updated_at = entry.at
    paired = pair_tool_calls(context)
    if paired.tail or paired.inserted or paired.dropped:
        log.warning(
            "session %s: repaired its context: %d tool call(s) interrupted at the end, %d earlier without a "
            "result, %d result(s) without a call dropped",
            session.id,
            len(paired.tail),
            paired.inserted,
            paired.dropped,
        )
    repair: list[en.Entry] = []
    last_assistant = _last_assistant_index(all_messages)
    for call, result in paired.tail:
        # The tool_call the person saw live gets its end in replay, under the wire id it had (Session.wire_id).
        if recorded_after.get(call.id, -1) < last_assistant:
            # The live session allocated its id after every recorded one: the next free id is the one it had.
            repair.append(_interrupted_record(session, call, wire_ids.allocate(call.id)))
        repair.append(en.MessageEntry(message=result))
    session.messages = paired.messages
    session.message_total = len(all_messages) + len(paired.tail)
    session.adopt_restored(wire_ids)
    session.ctx.model_changed(session.model_id, session.model_id)  # window of the stored model
    session.ctx.restore(paired.messages, meter_state, billing_state)
    if switched:
        session.ctx.meter.invalidate()
    session.ctx.meter.set_compaction(held=held)
    return repair


def _last_assistant_index(messages: list[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AssistantMessage):
            return i + 1  # in `recorded_after` terms: the count of messages once it was stored
    return 0


def _interrupted_record(session: Session, call: ToolCallPart, wire_id: str) -> en.ToolCallEntry:
    title, kind, raw_input = call.name, "other", None
    try:
        args = call.parsed_arguments()
        raw_input = args
        described = session.describe_tool(call.name, args)
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


def _compacted(
    entry: en.CompactionEntry, all_messages: list[Message], kept_from: int, handoff_dir: Path
) -> list[Message]:
    def read(rel: str | None) -> str:
        if not rel:
            return ""
        text = read_contained(handoff_dir, rel)
        if text is None:
            log.warning("compaction %d: cannot use the handoff file %r; treated as missing", entry.number, rel)
            return f"(the handoff file {rel} is missing)"
        return text

    # The same function and budgets as the live compaction, from the saved full texts: the same message.
    message = context_message(
        entry.number,
        read(entry.summary_path),
        read(entry.inventory_path),
        handoff_path=str(handoff_dir / entry.summary_path),
        inventory_path=str(handoff_dir / (entry.inventory_path or "")),
        handoff_chars=_budget(entry.handoff_chars),
        inventory_chars=_budget(entry.inventory_chars),
    )
    return [message, *all_messages[kept_from:]]


def _budget(value: object) -> int | None:
    """A stored character budget, if it is one (a damaged file's is ignored: the text goes unclipped)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40 else None


def read_contained(folder: Path, rel: str, limit: int = MAX_HANDOFF_BYTES) -> str | None:
    """The text of `folder/rel` if it is a regular file inside `folder` (after resolving every symlink) of at
    most `limit` bytes; else None. A session file is not trusted to name what ama reads (`/etc/passwd`,
    `../../.ssh/id_rsa`, a symlink out, a FIFO that would block the load)."""
    if not isinstance(rel, str) or not rel or "\0" in rel or os.path.isabs(rel):
        return None
    parent = os.path.realpath(folder.parent)
    root = os.path.join(parent, folder.name)
    if os.path.islink(root) or not os.path.isdir(root):
        return None  # the session's own folder replaced by a link elsewhere
    target = os.path.realpath(os.path.join(root, rel))
    if os.path.commonpath([root, target]) != root or target == root:
        return None
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    return data.decode("utf-8", errors="replace")


def replay_updates(loaded: LoadedSession) -> list[w.SessionUpdate]:
    """The conversation as the updates a live turn produced, in the original order (R66)."""
    out: list[w.SessionUpdate] = []
    n = 0
    for entry in loaded.entries:
        if isinstance(entry, en.MessageEntry):
            m = entry.message
            n += 1
            mid = f"r{n}"
            if isinstance(m, UserMessage) and m.origin == "ama":
                continue  # ama's own note to the model (a mode reminder): the person never wrote it
            if isinstance(m, UserMessage):
                for part in m.content:
                    if isinstance(part, TextPart):
                        out.append(w.UserMessageChunk(content=w.TextContent(text=part.text), message_id=mid))
                    elif isinstance(part, ImagePart):
                        out.append(
                            w.UserMessageChunk(
                                content=w.ImageContent(data=part.data, mime_type=part.mime_type), message_id=mid
                            )
                        )
            elif isinstance(m, AssistantMessage):
                for said in m.content:
                    if isinstance(said, ThinkingPart) and said.text and not said.redacted:
                        out.append(w.AgentThoughtChunk(content=w.TextContent(text=said.text), message_id=mid))
                    elif isinstance(said, TextPart) and said.text:
                        out.append(w.AgentMessageChunk(content=w.TextContent(text=said.text), message_id=mid))
        elif isinstance(entry, en.ToolCallEntry):
            locs = [w.ToolCallLocation(path=loc.path, line=wire_line(loc.line)) for loc in entry.locations]
            out.append(
                w.ToolCall(
                    tool_call_id=entry.wire_id,
                    title=entry.title,
                    kind=entry.kind if entry.kind in _KINDS else "other",
                    status="pending",
                    locations=locs,
                    raw_input=entry.raw_input,
                )
            )
            content: list[w.ToolCallContent] = []
            if entry.content_text:
                content.append(w.Content(content=w.TextContent(text=en.clip_replay_text(entry.content_text))))
            # A call cancelled or cut short is shown as failed: ACP has no other ending for it.
            status: w.ToolCallStatus = entry.status if is_tool_status(entry.status) else "failed"
            out.append(w.ToolCallUpdate(tool_call_id=entry.wire_id, status=status, content=content))
        elif isinstance(entry, en.PlanEntry):
            out.append(plan_update(_plan(entry.entries)))
        elif isinstance(entry, en.CommandEntry):
            n += 1
            out.append(w.UserMessageChunk(content=w.TextContent(text=entry.text), message_id=f"r{n}"))
        elif isinstance(entry, en.CommandOutputEntry) and entry.text:
            n += 1
            out.append(w.AgentMessageChunk(content=w.TextContent(text=entry.text), message_id=f"r{n}"))
    return out
