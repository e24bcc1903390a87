"""A session's conversation as a value (session/conversation.py): its bookkeeping of where the context sits in the
session file, and `Conversation.restore` rebuilding the same context, and the stored figures, from the entries a
live session wrote."""

from __future__ import annotations

from pathlib import Path

from ama_acp.agent.prompt import Setting
from ama_acp.agent.pruning import PLACEHOLDER
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.session.conversation import Conversation
from ama_acp.session.store import entries as en
from ama_acp.session.store.repair import INTERRUPTED

METER = {"source": "usage", "usage_tokens": 105, "trailing_tokens": 0, "message_count": 2}
BILLING: dict[str, object] = {"cost": 0.5}


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextPart(text)])


def reads(cid: str) -> AssistantMessage:
    return AssistantMessage(content=[ToolCallPart(cid, "read_file", '{"path": "a"}')], stop="tool_use", usage=Usage())


def result(cid: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=cid, name="read_file", content=[TextPart("x" * 100)])


def text(m: Message) -> str:
    return "".join(p.text for p in m.content if isinstance(p, TextPart))


def stored(*messages: Message) -> list[en.Entry]:
    return [en.MessageEntry(message=m) for m in messages]


def test_file_index_and_position_are_each_others_inverse_before_and_after_a_compaction() -> None:
    c = Conversation()
    for i in range(10):
        c.append(user(f"m{i}"))
    assert [c.file_index(p) for p in range(3)] == [0, 1, 2]
    kept = c.messages[-3:]
    assert c.apply_compaction(1, user("handoff"), kept) == 7  # the file index of the first kept message
    assert c.messages == [user("handoff"), *kept] and c.compactions == 1
    assert c.file_index(1) == 7 and c.position(7) == 1
    assert all(c.position(c.file_index(p)) == p for p in range(4))


def test_a_live_compaction_never_keeps_from_before_the_previous_ones_tail() -> None:
    c = Conversation()
    for i in range(4):
        c.append(user(f"m{i}"))
    c.apply_compaction(1, user("handoff 1"), c.messages[-2:])  # keeps file indices 2 and 3
    assert c.apply_compaction(2, user("handoff 2"), c.messages) == 2  # the handoff is no stored message


def test_restore_rebuilds_the_compacted_and_pruned_context_the_live_session_had(tmp_path: Path) -> None:
    (tmp_path / "compaction-1").mkdir()
    (tmp_path / "compaction-1" / "handoff.md").write_text("the handoff", encoding="utf-8")
    entries = [
        *stored(user("old"), reads("r1"), result("r1"), user("go on"), reads("r2"), result("r2")),
        en.ContextEditEntry(message_indices=[2, 5], placeholder=PLACEHOLDER),
        en.CompactionEntry(number=1, summary_path="compaction-1/handoff.md", inventory_path=None, kept_from_index=3),
        *stored(AssistantMessage(content=[TextPart("done")])),
    ]
    rebuilt = Conversation.restore(entries, tmp_path, "scripted/test")
    c = rebuilt.conversation
    assert (c.compactions, c.context_first, c.context_synthetic, c.message_total) == (1, 3, 1, 7)
    assert "the handoff" in text(c.messages[0])
    assert [text(m) for m in c.messages[1:]] == ["go on", "", PLACEHOLDER, "done"]  # r2's result stays pruned
    assert not rebuilt.repaired.tail and not rebuilt.repaired.inserted


def test_restore_pairs_a_call_left_open_and_counts_its_result_as_stored(tmp_path: Path) -> None:
    rebuilt = Conversation.restore(stored(user("read a"), reads("r1")), tmp_path, "scripted/test")
    c = rebuilt.conversation
    assert text(c.messages[-1]) == INTERRUPTED and c.message_total == 3
    assert [call.id for call, _ in rebuilt.repaired.tail] == ["r1"]


def test_restore_keeps_the_first_system_prompt_and_the_last_setting_told(tmp_path: Path) -> None:
    entries: list[en.Entry] = [
        en.PromptEntry(mode_id="manual", system="first"),
        en.PromptEntry(mode_id="read_only", additional_directories=["/x"]),
        en.PromptEntry(mode_id="full_access", system="never written by ama"),
    ]
    c = Conversation.restore(entries, tmp_path, "scripted/test").conversation
    assert c.frozen_prompt == "first" and c.told == Setting("full_access", ())


def test_restore_takes_the_last_good_stored_figures_and_notes_a_later_model_switch(tmp_path: Path) -> None:
    usage = en.UsageEntry(model_id="scripted/test", usage=Usage(), meter=METER, billing=BILLING)
    damaged = en.UsageEntry(model_id="scripted/test", usage=Usage(), meter={"usage_tokens": -1}, billing={"cost": -1})
    entries: list[en.Entry] = [
        usage,
        damaged,
        en.CompactionHoldEntry(held=True),
        en.ModelEntry(model_id="scripted/other"),
        en.ModelEntry(model_id="scripted/test"),  # switched back: the anchor was void from the first switch on
    ]
    figures = Conversation.restore(entries, tmp_path, "scripted/test").figures
    assert figures.meter == METER and figures.billing == BILLING  # the damaged states are skipped
    assert figures.held and figures.switched
    measured_again = Conversation.restore([*entries, usage], tmp_path, "scripted/test").figures
    assert not measured_again.switched
