"""`ama sessions search` reads a session file a line at a time (session/store/search.py): the lines it decodes are
the same however the file's bytes are cut, a line past the cap is passed over unread, and a rewind hides what it
removed, as every reader of the file does."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.conversation.messages import AssistantMessage, TextPart, ToolResultMessage, UserMessage
from ama_acp.session.store import entries as en
from ama_acp.session.store.search import search_lines, whole_lines

_WANTED = (b'{"t":"msg",', b'{"t":"title",', b'{"t":"rewind",')


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


_LINE = st.one_of(
    st.sampled_from([w + b'"x":1}' for w in _WANTED]),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from(_WANTED).map(lambda w: w + b"y" * 30),
    # A tag's first bytes, or a tag and no more: a line that is decided only at its newline.
    st.tuples(st.sampled_from(_WANTED), st.integers(1, 14)).map(lambda t: t[0][: t[1]]),
)


@given(st.lists(_LINE, max_size=12), st.lists(st.integers(0, 600), max_size=40), st.booleans())
def test_the_wanted_lines_are_the_same_however_the_bytes_are_cut(
    lines: list[bytes], cuts: list[int], torn: bool
) -> None:
    data = b"".join(line + b"\n" for line in lines) + (b'{"t":"msg","torn' if torn else b"")
    max_line = 35
    expected = [line for line in lines if line.startswith(_WANTED) and len(line) <= max_line]
    assert list(whole_lines(_cut(data, cuts), max_line)) == expected


def test_a_line_past_the_cap_is_passed_over_without_being_held() -> None:
    huge = b'{"t":"msg",' + b"a" * 5000
    chunks = [
        b'{"t":"title","title":"x"}\n',
        huge[:100],
        *(huge[i : i + 100] for i in range(100, len(huge), 100)),
        b"\n",
    ]
    assert list(whole_lines(chunks, 1000)) == [b'{"t":"title","title":"x"}']


def _line(entry: en.Entry) -> bytes:
    return msgspec.json.encode(entry)


def _user(text: str) -> en.Entry:
    return en.MessageEntry(message=UserMessage(content=[TextPart(text)]))


def _reply(text: str) -> en.Entry:
    return en.MessageEntry(message=AssistantMessage(content=[TextPart(text)]))


def test_what_a_person_and_the_model_said_is_found_case_folded_and_tool_results_are_not() -> None:
    lines = [
        _line(_user("Please fix the Parser")),
        _line(en.MessageEntry(message=ToolResultMessage(tool_call_id="c", name="read", content=[TextPart("parser")]))),
        _line(_reply("The PARSER is fixed.")),
        b'{"t":"msg", not json',
        _line(en.TitleEntry(title="parser work")),
    ]
    found = search_lines(lines, "parser")
    assert found.matches == 2 and found.title
    assert [(m.index, m.role) for m in found.shown] == [(0, "user"), (2, "assistant")]
    assert "Parser" in found.shown[0].excerpt
    assert search_lines(lines, "nothing here").matches == 0


def test_a_rewound_prompt_and_its_reply_are_not_found_but_what_came_after_is() -> None:
    lines = [
        _line(_user("first")),
        _line(_reply("ok")),
        _line(_user("secret plan")),
        _line(_reply("the secret plan is done")),
        _line(en.RewindEntry(prompt=2, message_index=2)),
        _line(_user("another secret")),
    ]
    found = search_lines(lines, "secret")
    assert found.matches == 1 and [m.index for m in found.shown] == [2]
    assert "another" in found.shown[0].excerpt
    # A rewind that names no prompt (a reply's index, or past the end) is ignored, as the reader ignores it.
    ignored = search_lines([*lines[:4], _line(en.RewindEntry(prompt=2, message_index=3))], "secret")
    assert ignored.matches == 2


_TEXTS = st.sampled_from(["alpha", "Beta", "ALPHA beta", "gamma", "straße"])
_ENTRIES = st.lists(
    st.one_of(
        _TEXTS.map(_user),
        _TEXTS.map(_reply),
        _TEXTS.map(lambda t: en.MessageEntry(message=UserMessage(content=[TextPart(t)], origin="ama"))),
        _TEXTS.map(lambda t: en.TitleEntry(title=t)),
        st.integers(0, 8).map(lambda i: en.RewindEntry(prompt=i, message_index=i)),
    ),
    max_size=14,
)


@given(_ENTRIES, st.sampled_from(["alpha", "beta", "STRASSE", "delta"]))
def test_property_the_search_finds_what_the_reader_keeps_of_the_thread(entries: list[en.Entry], query: str) -> None:
    """The same messages as a full read with the rewinds applied (session/store/rewound_thread.py), matched
    case-folded: what a person would find by reading `ama sessions show`."""
    from ama_acp.session.store.rewound_thread import apply_rewinds

    kept = [e for e in apply_rewinds(list(entries)) if isinstance(e, en.MessageEntry)]
    needle = query.casefold()
    expected = []
    for index, entry in enumerate(kept):
        m = entry.message
        person = isinstance(m, UserMessage) and m.origin != "ama"
        if (person or isinstance(m, AssistantMessage)) and needle in "".join(
            p.text for p in m.content if isinstance(p, TextPart)
        ).casefold():
            expected.append(index)
    titles = [e.title for e in entries if isinstance(e, en.TitleEntry)]
    found = search_lines([_line(e) for e in entries], query)
    assert found.matches == len(expected)
    assert [m.index for m in found.shown] == expected[:3]
    assert found.title == bool(titles and needle in titles[-1].casefold())
