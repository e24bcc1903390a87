"""The `rewind` entry as every reader of a session file applies it (session/store/rewound_thread.py), and its decoding from
hostile lines: whatever a line holds, a read never raises and never cuts the thread anywhere but at a prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import event, given
from hypothesis import strategies as st

from ama_acp.conversation.messages import AssistantMessage, TextPart, Usage, UserMessage
from ama_acp.session.history.checkpoints import CheckpointLog
from ama_acp.session.store import entries as en
from ama_acp.session.store.reader import decode_session
from ama_acp.session.store.rewound_thread import apply_rewinds

HEADER = en.Header(session_id="ses_x", cwd="/w")


def prompt(text: str) -> en.MessageEntry:
    return en.MessageEntry(message=UserMessage(content=[TextPart(text)]))


def reply(text: str) -> en.MessageEntry:
    return en.MessageEntry(message=AssistantMessage(content=[TextPart(text)]))


def texts(entries: list[en.Entry]) -> list[str]:
    out = []
    for e in entries:
        if isinstance(e, en.MessageEntry):
            part = e.message.content[0]
            assert isinstance(part, TextPart)
            out.append(part.text)
    return out


def test_a_rewind_cuts_at_the_prompt_keeps_settings_billing_and_its_own_command():
    entries: list[en.Entry] = [
        prompt("one"),
        reply("r1"),
        en.UsageEntry(model_id="m", usage=msgspec.convert({"input": 1}, Usage), meter={"a": 1}, billing={"b": 1}),
        en.TurnEntry(stop_reason="end_turn"),
        prompt("two"),
        en.FileChangeEntry(prompt=2, path="/w/a", after="x", first=True),
        reply("r2"),
        en.UsageEntry(model_id="m", usage=msgspec.convert({"input": 2}, Usage), meter={"a": 2}, billing={"b": 2}),
        en.ModeEntry(mode_id="read_only"),
        en.CommandEntry(text="/context"),
        en.CommandOutputEntry(text="figures"),
        en.TurnEntry(stop_reason="end_turn"),
        en.CommandEntry(text="/rewind 2"),
        en.RewindEntry(prompt=2, message_index=2),
        en.CommandOutputEntry(text="Rewound"),
    ]
    out = apply_rewinds(entries)
    assert texts(out) == ["one", "r1"]
    usages = [e for e in out if isinstance(e, en.UsageEntry)]
    assert [u.meter for u in usages] == [{"a": 1}, None]  # the removed turn's meter state is void…
    assert usages[-1].billing == {"b": 2}  # …its cost was spent all the same
    assert en.ModeEntry(mode_id="read_only", at=entries[8].at) in out  # a setting chosen meanwhile stays
    commands = [e.text for e in out if isinstance(e, en.CommandEntry)]
    assert commands == ["/rewind 2"]  # /context ran in the removed part; the rewind itself is shown
    assert not any(isinstance(e, (en.RewindEntry, en.FileChangeEntry)) for e in out)
    assert isinstance(out[-1], en.CommandOutputEntry) and out[-1].text == "Rewound"


def test_a_rewind_that_names_no_prompt_is_ignored():
    base: list[en.Entry] = [prompt("one"), reply("r1"), prompt("two"), reply("r2")]
    for index in (-1, 1, 3, 4, 10**18):  # a reply, past the end, negative
        out = apply_rewinds([*base, en.RewindEntry(prompt=2, message_index=index)])
        assert texts(out) == ["one", "r1", "two", "r2"]


def test_rewinds_compose_on_the_thread_as_it_stands():
    entries: list[en.Entry] = [
        prompt("one"),
        reply("r1"),
        prompt("two"),
        reply("r2"),
        en.RewindEntry(prompt=2, message_index=2),
        prompt("three"),
        reply("r3"),
        en.RewindEntry(prompt=2, message_index=2),  # index 2 is now "three"
        prompt("four"),
    ]
    assert texts(apply_rewinds(entries)) == ["one", "r1", "four"]


# --- decoding hostile lines -----------------------------------------------------------------------------------

ODD = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)


def _line(kind: str, value: Any, extra: Any) -> dict[str, Any]:
    if kind == "p":
        return {"t": "msg", "message": {"type": "user", "content": [{"type": "text", "text": "p"}]}}
    if kind == "a":
        return {"t": "msg", "message": {"type": "assistant", "content": [{"type": "text", "text": "a"}]}}
    if kind == "n":  # ama's own note: never a prompt
        return {"t": "msg", "message": {"type": "user", "content": [{"type": "text", "text": "n"}], "origin": "ama"}}
    if kind == "r":
        # An unknown field (`zz`) is ignored, as in every entry; a mistyped index costs the line only.
        return {"t": "rewind", "prompt": 1, "message_index": value, "zz": extra}
    return {"t": "file_change", "prompt": value, "path": extra, "after": extra, "first": True, "before": value}


LINES = st.lists(
    st.tuples(
        st.sampled_from("pppaanrrrf"),
        # ODD as one branch (a mapped strategy is not flattened into one_of): most indices are plausible ones.
        st.one_of(st.integers(min_value=0, max_value=3), st.integers(min_value=-2, max_value=12), ODD.map(lambda v: v)),
        ODD,
    ),
    max_size=40,
)


@given(LINES)
def test_any_rewind_or_file_change_line_reads_without_raising_and_cuts_only_at_a_prompt(lines):
    lines = [("p", 0, None), ("a", 0, None), ("p", 0, None), ("a", 0, None), *lines]  # a thread to cut
    raw = [_line(k, v, x) for k, v, x in lines]
    data = (msgspec.json.encode(HEADER).decode() + "\n" + "".join(json.dumps(r) + "\n" for r in raw)).encode()
    loaded = decode_session([data], Path("x.jsonl"))
    # The model: messages in order; a rewind with an int index naming a person's prompt truncates there.
    model: list[str] = []
    cuts = 0
    for kind, value, _extra in lines:
        if kind in "pan":
            model.append(kind)
        elif kind == "r":
            if type(value) is int and 0 <= value < len(model) and model[value] == "p":
                del model[value:]
                cuts += 1
    event("a rewind cut the thread" if cuts else "no cut")
    assert [_kind(e) for e in loaded.entries if isinstance(e, en.MessageEntry)] == model
    assert not any(isinstance(e, en.RewindEntry) for e in loaded.entries)
    log = CheckpointLog.from_entries(loaded.entries)  # hostile file_change records never raise either
    assert len(log.prompts) == model.count("p")


def _kind(e: en.MessageEntry) -> str:
    if isinstance(e.message, UserMessage):
        return "n" if e.message.origin == "ama" else "p"
    return "a"
