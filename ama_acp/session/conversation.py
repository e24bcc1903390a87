"""A session's conversation as one value: the context the next request carries, where that context sits in the
session file, and what the model has been told of the session's setting.

Every change to it is a method here — a message appended, tool results pruned, a compaction's handoff put in
place of the older messages, the system prompt frozen by the first request, a reminder of a changed setting —
so the session, its loop host and its compactor change it the same way, and nothing else writes its fields.
`Conversation.restore` rebuilds it from a session file's entries, with the meter's and the billing's stored
state beside it (`StoredFigures`), so a loaded session continues where the live one was (rule E4,
docs/rules.md): usage and cost are taken from what was stored, never re-estimated; a stored state that does
not decode is ignored and the last good one stands, else the meter estimates.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

import msgspec

from ama_acp.agent.compaction import context_message
from ama_acp.agent.inventory import LEGACY_LIST_CAPS, stored_caps
from ama_acp.agent.prompt import Setting
from ama_acp.agent.pruning import apply_prune
from ama_acp.context.billing import BillingState
from ama_acp.context.meter import MeterState
from ama_acp.conversation.messages import Message
from ama_acp.session.store import entries as en
from ama_acp.session.store.repair import PairResult, StoredState, pair_tool_calls, read_contained, stored_state

log = logging.getLogger(__name__)


class StoredFigures(NamedTuple):
    """What a session file says of the meter and the billing (`SessionContext.reload` applies it)."""

    meter: StoredState | None  # the last good meter state; None: the meter estimates
    billing: StoredState | None
    held: bool  # automatic compaction held (the last CompactionHoldEntry, released by a compaction)
    # A model switch after the last stored meter state: its anchor is void (U9), even if the model switched back
    # since — live, the first switch ended it (docs/context.md "Session load").
    switched: bool


class RestoredConversation(NamedTuple):
    conversation: Conversation
    figures: StoredFigures
    repaired: PairResult  # what pairing the tool calls changed (its tail is written back to the file)


class Conversation(msgspec.Struct):
    messages: list[Message] = msgspec.field(default_factory=list)  # the context the next request carries
    message_total: int = 0  # MessageEntries written to the session file (compaction indexes by it)
    compactions: int = 0
    # Where the context sits in the file: after a compaction it starts with `context_synthetic` messages of its
    # own (the handoff), then the stored messages from file index `context_first` on.
    context_first: int = 0
    context_synthetic: int = 0
    # The system prompt as the session's first request sent it (None before): never rewritten after, so the
    # provider's cached prefix stays valid (agent/prompt.py). `told` is the setting (mode, directories) the
    # model was last told of, by that prompt or a reminder message.
    frozen_prompt: str | None = None
    told: Setting | None = None

    def append(self, message: Message) -> None:
        """A message entered the context (and is stored as the next MessageEntry)."""
        self.messages.append(message)
        self.message_total += 1

    def file_index(self, position: int) -> int:
        """The MessageEntry index in the session file of the context message at `position`."""
        return self.context_first + position - self.context_synthetic

    def position(self, file_index: int) -> int:
        """The context position of the stored message at `file_index` (the inverse of `file_index`)."""
        return file_index - self.context_first + self.context_synthetic

    def prune(self, positions: list[int]) -> None:
        """The tool results at these context positions replaced by the placeholder (agent/pruning.py)."""
        apply_prune(self.messages, positions)

    def apply_compaction(self, number: int, handoff: Message, kept: list[Message], kept_from: int | None = None) -> int:
        """Compaction `number` replaced the context: its handoff message, then the kept tail. `kept_from` is the
        file index of the first kept message: read from the entry on load; for a live compaction it follows from
        the count (the kept tail holds stored messages only, never a previous handoff, so it is a valid file
        index). Returns it."""
        if kept_from is None:
            kept_from = max(self.context_first, self.message_total - len(kept))
        self.messages = [handoff, *kept]
        self.compactions = number
        self.context_first, self.context_synthetic = kept_from, 1
        return kept_from

    def freeze(self, system_prompt: str, setting: Setting) -> None:
        """The first request fixed the system prompt for the rest of the session (and its reloads)."""
        self.frozen_prompt = system_prompt
        self.told = setting

    def tell(self, setting: Setting) -> None:
        """A reminder message told the model of this setting."""
        self.told = setting

    @classmethod
    def restore(cls, entries: list[en.Entry], handoff_dir: Path, model_id: str) -> RestoredConversation:
        """The conversation a session file's entries build, repaired (every tool call paired with a result), and
        the stored figures; `model_id` is the model the session starts with before the file's ModelEntries."""
        rebuild = _Rebuild(handoff_dir, model_id)
        for entry in entries:
            rebuild.apply(entry)
        return rebuild.result()


class _Rebuild:
    """One pass over a session file's entries, as the live session wrote them."""

    def __init__(self, handoff_dir: Path, model_id: str) -> None:
        self.handoff_dir = handoff_dir
        self.model_id = model_id
        self.conversation = Conversation()
        self.stored: list[Message] = []  # every MessageEntry's message, compacted away or not
        self.pruned: set[int] = set()  # file indices of messages the context carries pruned
        self.meter: StoredState | None = None
        self.billing: StoredState | None = None
        self.held = False
        self.switched = False

    def apply(self, entry: en.Entry) -> None:
        match entry:
            case en.MessageEntry():
                self.stored.append(entry.message)
                self.conversation.append(entry.message)
            case en.UsageEntry():
                # A damaged state is skipped: the last good one stands (never a made-up 0).
                self.billing = stored_state(entry.billing, BillingState) or self.billing
                self._measured(entry.meter)
            case en.CompactionEntry():
                self._compaction(entry)
            case en.CompactionHoldEntry():
                self.held = entry.held
            case en.ContextEditEntry(action="prune"):
                self.pruned.update(entry.message_indices)
                c = self.conversation
                c.prune([c.position(i) for i in entry.message_indices])
                self._measured(entry.meter)
            case en.PromptEntry():
                self._prompt(entry)
            case en.ModelEntry():
                self._model(entry.model_id)

    def _prompt(self, entry: en.PromptEntry) -> None:
        if entry.system is not None and self.conversation.frozen_prompt is None:
            self.conversation.frozen_prompt = entry.system  # the next request starts with these bytes
        self.conversation.tell(Setting(entry.mode_id, tuple(entry.additional_directories)))

    def _model(self, model_id: str) -> None:
        self.switched = self.switched or model_id != self.model_id
        self.model_id = model_id

    def _measured(self, meter: StoredState | None) -> None:
        if (state := stored_state(meter, MeterState)) is not None:
            self.meter, self.switched = state, False

    def _compaction(self, entry: en.CompactionEntry) -> None:
        c = self.conversation
        kept_from = min(max(entry.kept_from_index, 0), len(self.stored))
        c.apply_compaction(entry.number, self._handoff(entry), self.stored[kept_from:], kept_from)
        self.meter = stored_state(entry.meter, MeterState)  # the context changed: the old state is void either way
        self.switched = self.switched and self.meter is None
        self.held = False
        # Messages kept through the compaction stay pruned, as they were in the live context.
        c.prune([c.position(i) for i in self.pruned if i >= kept_from])

    def _handoff(self, entry: en.CompactionEntry) -> Message:
        """The same function and budgets as the live compaction, from the saved full texts: the same message."""

        def read(rel: str | None) -> str:
            if not rel:
                return ""
            text = read_contained(self.handoff_dir, rel)
            if text is None:
                log.warning("compaction %d: cannot use the handoff file %r; treated as missing", entry.number, rel)
                return f"(the handoff file {rel} is missing)"
            return text

        return context_message(
            entry.number,
            read(entry.summary_path),
            read(entry.inventory_path),
            handoff_path=str(self.handoff_dir / entry.summary_path),
            inventory_path=str(self.handoff_dir / (entry.inventory_path or "")),
            handoff_chars=_budget(entry.handoff_chars),
            inventory_chars=_budget(entry.inventory_chars),
            # A compaction from before the caps were stored kept 30 a list; a damaged entry gets today's caps.
            list_caps=LEGACY_LIST_CAPS if entry.list_caps is None else stored_caps(entry.list_caps),
        )

    def result(self) -> RestoredConversation:
        c = self.conversation
        paired = pair_tool_calls(c.messages)
        c.messages = paired.messages
        c.message_total = len(self.stored) + len(paired.tail)  # the tail is written back as MessageEntries
        return RestoredConversation(c, StoredFigures(self.meter, self.billing, self.held, self.switched), paired)


def _budget(value: object) -> int | None:
    """A stored character budget, if it is one (a damaged file's is ignored: the text goes unclipped)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40 else None
