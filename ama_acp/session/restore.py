"""Rebuild a session from its file, and replay it to the client (session/load).

Usage and cost are taken from what was stored (the meter's and billing's state after the last request),
never re-estimated, so the meter after a load equals the meter before the close (context-usage.md E4).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ama_acp.agent.compaction import handoff_message
from ama_acp.agent.messages import AssistantMessage, ImagePart, Message, TextPart, ThinkingPart, UserMessage
from ama_acp.agent.pruning import apply_prune
from ama_acp.session import entries as en
from ama_acp.session.updates import plan_update
from ama_acp.wire import types as w

log = logging.getLogger(__name__)


def restore(session: Any, loaded: Any, handoff_dir: Path) -> None:
    """Apply a LoadedSession's entries to a fresh Session (no updates are sent)."""
    all_messages: list[Message] = []
    context: list[Message] = []
    meter_state: dict | None = None
    billing_state: dict | None = None
    seen: dict[str, int] = {}
    pruned: set[int] = set()  # file indices of messages the context carries pruned
    for entry in loaded.entries:
        if isinstance(entry, en.MessageEntry):
            all_messages.append(entry.message)
            context.append(entry.message)
        elif isinstance(entry, en.UsageEntry):
            if entry.billing is not None:
                billing_state = entry.billing
            if entry.meter is not None:
                meter_state = entry.meter
        elif isinstance(entry, en.CompactionEntry):
            context = _compacted(entry, all_messages, handoff_dir)
            meter_state = entry.meter
            session.compactions = entry.number
            session.context_first, session.context_synthetic = entry.kept_from_index, 1
            # Messages kept through the compaction stay pruned, as they were in the live context.
            apply_prune(context, [i - entry.kept_from_index + 1 for i in pruned if i >= entry.kept_from_index])
        elif isinstance(entry, en.ContextEditEntry) and entry.action == "prune":
            pruned.update(entry.message_indices)
            apply_prune(context, [i - session.context_first + session.context_synthetic for i in entry.message_indices])
            if entry.meter is not None:
                meter_state = entry.meter
        elif isinstance(entry, en.ModelEntry):
            session.model_id = entry.model_id
        elif isinstance(entry, en.ModeEntry):
            session.mode = entry.mode_id
        elif isinstance(entry, en.ConfigEntry) and entry.config_id == "thought_level":
            session.thought_level = str(entry.value)
        elif isinstance(entry, en.TitleEntry):
            session.title = entry.title
        elif isinstance(entry, en.PlanEntry):
            session.todos = list(entry.entries)
        elif isinstance(entry, en.ToolCallEntry):
            seen[entry.provider_id] = seen.get(entry.provider_id, 0) + 1
        elif isinstance(entry, en.TurnEntry):
            session.updated_at = entry.at
    session.messages = context
    session.message_total = len(all_messages)
    session._seen_ids = seen
    session._sent_title = session.title
    session.ctx.model_changed(session.model_id, session.model_id)  # window of the stored model
    session.ctx.restore(context, meter_state, billing_state)


def _compacted(entry: Any, all_messages: list[Message], handoff_dir: Path) -> list[Message]:
    def read(rel: str | None) -> str:
        if not rel:
            return ""
        try:
            return (handoff_dir / rel).read_text(encoding="utf-8")
        except OSError as exc:
            log.warning("compaction %d: cannot read %s: %s", entry.number, rel, exc)
            return f"(the handoff file {rel} is missing)"

    kept = all_messages[entry.kept_from_index :]
    return [handoff_message(read(entry.summary_path), read(entry.inventory_path)), *kept]


def replay_updates(loaded: Any) -> list[w.SessionUpdate]:
    """The conversation as the updates a live turn produced, in the original order (R66)."""
    out: list[w.SessionUpdate] = []
    n = 0
    for entry in loaded.entries:
        if isinstance(entry, en.MessageEntry):
            m = entry.message
            n += 1
            mid = f"r{n}"
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
                for part in m.content:
                    if isinstance(part, ThinkingPart) and part.text and not part.redacted:
                        out.append(w.AgentThoughtChunk(content=w.TextContent(text=part.text), message_id=mid))
                    elif isinstance(part, TextPart) and part.text:
                        out.append(w.AgentMessageChunk(content=w.TextContent(text=part.text), message_id=mid))
        elif isinstance(entry, en.ToolCallEntry):
            locs = [w.ToolCallLocation(path=loc.path, line=loc.line) for loc in entry.locations]
            out.append(
                w.ToolCall(
                    tool_call_id=entry.wire_id,
                    title=entry.title,
                    kind=entry.kind,
                    status="pending",
                    locations=locs,
                    raw_input=entry.raw_input,
                )
            )
            content: list[w.ToolCallContent] = []
            if entry.content_text:
                content.append(w.Content(content=w.TextContent(text=en.clip_replay_text(entry.content_text))))
            out.append(w.ToolCallUpdate(tool_call_id=entry.wire_id, status=entry.status, content=content))  # type: ignore[arg-type]
        elif isinstance(entry, en.PlanEntry):
            out.append(plan_update(entry.entries))
    return out
