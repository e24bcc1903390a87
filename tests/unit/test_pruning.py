"""Pruning, tier one of long sessions: which tool results are pruned (old, seen by the model, large, outside
the newest keep_tokens), that pruning is idempotent and never parts a call from its result, and a real
in-process session pruning at pruneAt, persisted and rebuilt the same on load."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.agent.pruning import MIN_CHARS, PLACEHOLDER, apply_prune, candidates, pruned
from ama_acp.config import ModelEntry
from ama_acp.conversation.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from ama_acp.session.store import entries as en
from ama_acp.session.store.session_store import read_session
from tests.support.conversation import paired_everywhere
from tests.support.hypothesis_profiles import examples
from tests.support.inprocess import make_manager, prompt, reload, workspace

BIG = "b" * (MIN_CHARS + 1)


def size(message: Message) -> int:
    """A deterministic stand-in for the token estimate: one token per 10 bytes of the stored form."""
    return len(msgspec.json.encode(message)) // 10 + 1


def asks(*ids: str) -> AssistantMessage:
    return AssistantMessage([TextPart("on it"), *(ToolCallPart(i, "read_file", "{}") for i in ids)], stop="tool_use")


def result(cid: str, text: str = BIG, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(cid, "read_file", [TextPart(text)], is_error=error)


# --- pruned / apply_prune -------------------------------------------------------------------------------


def test_a_pruned_result_keeps_its_call_id_name_and_error_flag_and_carries_only_the_placeholder():
    original = ToolResultMessage("c1", "run_command", [TextPart(BIG), ImagePart("AAAA", "image/png")], is_error=True)
    assert pruned(original) == ToolResultMessage("c1", "run_command", [TextPart(PLACEHOLDER)], is_error=True)


def test_apply_prune_touches_only_tool_results_at_valid_positions():
    context: list[Message] = [UserMessage([TextPart(BIG)]), asks("a"), result("a")]
    original = list(context)
    apply_prune(context, [0, 1, 2, 3, -1, 99])
    assert context[:2] == original[:2]  # not results: untouched
    assert context[2] == pruned(result("a"))


# --- candidates -----------------------------------------------------------------------------------------


def test_candidates_are_old_large_results_outside_the_protected_tail():
    messages: list[Message] = [
        UserMessage([TextPart("go")]),
        asks("a", "b", "c"),
        result("a"),  # 2: large, old → pruned
        result("b", "small"),  # 3: not worth a placeholder
        result("c", PLACEHOLDER),  # 4: already pruned
        asks("d"),
        result("d"),  # 6: inside the protected tail
        AssistantMessage([TextPart("done")]),
    ]
    keep = size(messages[-1]) + size(messages[-2])
    assert candidates(messages, keep, size) == [2]
    assert candidates(messages, 10**9, size) == []  # everything protected
    assert candidates(messages, 0, size) == [2, 6]


def test_results_the_model_has_not_answered_yet_are_never_candidates():
    # the last assistant message asked for d; its result has not been seen by the model
    messages: list[Message] = [UserMessage([TextPart("go")]), asks("a"), result("a"), asks("d"), result("d")]
    assert candidates(messages, 0, size) == [2]


def test_a_conversation_without_an_assistant_message_has_no_candidates():
    assert candidates([UserMessage([TextPart(BIG)])], 0, size) == []


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    n = 0
    for rounds in draw(st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=5)):
        messages.append(UserMessage([TextPart("u" * draw(st.integers(0, 50)))]))
        for ncalls in rounds:
            ids = [f"c{n + i}" for i in range(ncalls)]
            n += ncalls
            messages.append(asks(*ids))
            messages += [result(cid, "r" * draw(st.integers(0, 2 * MIN_CHARS))) for cid in ids]
        if draw(st.booleans()):
            messages.append(AssistantMessage([TextPart("done")]))
    return messages


@settings(max_examples=examples(200), deadline=None)
@given(messages=conversations(), keep=st.integers(0, 400))
def test_property_pruning_keeps_pairs_protects_the_tail_and_is_idempotent(messages, keep):
    positions = candidates(messages, keep, size)
    context = list(messages)
    apply_prune(context, positions)
    assert len(context) == len(messages)
    assert paired_everywhere(context) == paired_everywhere(messages)  # never a call without its result
    last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)
    changed = [i for i, (a, b) in enumerate(zip(messages, context, strict=True)) if a != b]
    assert changed == positions
    for i in changed:
        before, after = messages[i], context[i]
        assert isinstance(before, ToolResultMessage) and isinstance(after, ToolResultMessage)
        assert after.tool_call_id == before.tool_call_id and after.text == PLACEHOLDER
        assert len(before.text) > MIN_CHARS and i < last_assistant
    if changed:  # the newest keep_tokens are untouched
        assert sum(size(m) for m in messages[changed[-1] :]) > keep
    assert candidates(context, keep, size) == []  # idempotent: nothing left to prune
    again = list(context)
    apply_prune(again, positions)
    assert again == context


# --- a real session prunes at pruneAt -------------------------------------------------------------------


def test_a_session_past_prune_at_prunes_old_results_persists_it_and_reloads_the_same_context(tmp_path):
    ws = workspace(tmp_path)
    (ws / "big.txt").write_text("".join(f"line {i:05d} " + "x" * 60 + "\n" for i in range(400)))  # ~7k tokens
    # window 26,384 − reserve 13,192 (at most half the window, U13): autoCompactAt 13,192, pruneAt 9,234
    model = ModelEntry(id="scripted/test", context_window=26_384, max_output=1000, name="Test")
    replies: list[dict[str, Any]] = [
        {"text": "Reading.", "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "big.txt"}}]},
        # The read is cut to what the window holds (a quarter of autoCompactAt): the provider's count puts the
        # context past pruneAt.
        {"text": "Read it.", "usage": {"input": 9_300, "output": 10}},
        {"text": "Second answer."},
    ]
    manager, peer = make_manager(tmp_path, replies, keep_tokens=100, models=[model])

    async def main() -> tuple[str, list[Message], int, int]:
        session = manager.new_session(str(ws), None, [])
        await prompt(session, "read big.txt")
        used_before, prune_at = session.ctx.figures().used, session.ctx.figures().prune_at
        assert prune_at is not None and used_before >= prune_at  # the premise: the next request prunes
        await prompt(session, "and now?")
        await manager.close(session.id)
        return session.id, list(session.conversation.messages), used_before, session.conversation.compactions

    sid, context, used_before, compactions = anyio.run(main)
    read = [m for m in context if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.text) for m in read] == [("r1", PLACEHOLDER)]
    assert compactions == 0  # pruning was enough: no compaction followed
    assert paired_everywhere(context)

    loaded = read_session(manager.store.path(sid))
    edits = [e for e in loaded.entries if isinstance(e, en.ContextEditEntry)]
    assert [(e.action, e.message_indices, e.placeholder) for e in edits] == [("prune", [2], PLACEHOLDER)]
    stored = [e.message for e in loaded.entries if isinstance(e, en.MessageEntry)]
    assert isinstance(stored[2], ToolResultMessage) and "line 00100" in stored[2].text  # the result stays whole
    used = [u["used"] for u in peer.updates if u["sessionUpdate"] == "usage_update"]
    after_prune = used[used.index(used_before) + 1 :]
    assert after_prune and after_prune[0] < 7_000  # E5: a usage_update with the pruned context's estimate

    async def again() -> list[Message]:
        manager2, _ = make_manager(tmp_path, replies, keep_tokens=100, models=[model])
        return list((await reload(manager2, sid, ws)).conversation.messages)

    assert anyio.run(again) == context
