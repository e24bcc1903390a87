"""Which session the acp-client works in (ama_acp/client/terminal/sessions.py): what the agent advertised, new/load/resume
sent as asked (and not sent when not offered), --list across pages, and the listing lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ama_acp.client.terminal.sessions import (
    MAX_LIST_PAGES,
    NotOffered,
    Opened,
    list_sessions,
    offers,
    open_session,
    session_lines,
)
from ama_acp.errors import ProtocolError
from ama_acp.rpc.dispatch import JSONObject
from tests.support.hypothesis_profiles import examples

EVERYTHING: JSONObject = {"agentCapabilities": {"loadSession": True, "sessionCapabilities": {"list": {}, "resume": {}}}}
NOTHING: dict[str, Any] = {"agentCapabilities": {}}


class FakeAgent:
    """Answers requests with `answer(method, params)` and records what was sent."""

    def __init__(
        self,
        answer: Callable[[str, Mapping[str, object] | None], Any] = lambda method, params: {},
        new_result: dict[str, Any] | None = None,
    ) -> None:
        self.session_cwds: dict[str, str] = {}
        self.sent: list[tuple[str, Mapping[str, object] | None]] = []
        self.answer = answer
        self.new_result = {"sessionId": "new-1"} if new_result is None else new_result
        self.new_calls: list[str] = []

    async def request(
        self, method: str, params: Mapping[str, object] | None = None, timeout: float | None = 60.0
    ) -> Any:  # what `answer` made of it: any JSON, hostile on purpose
        self.sent.append((method, params))
        return self.answer(method, params)

    async def new_session(self, cwd: str, mcp_servers: Sequence[object] | None = None) -> dict[str, Any]:
        self.new_calls.append(cwd)
        return self.new_result


def opened(agent: FakeAgent, init: dict[str, Any], cwd: str = "/w", **how: str | None) -> Opened:
    async def go() -> Opened:
        return await open_session(agent, init, cwd, **how)

    return anyio.run(go)


def listed(agent: FakeAgent, init: dict[str, Any] = EVERYTHING, cwd: str | None = "/w") -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        return await list_sessions(agent, init, cwd)

    return anyio.run(go)


# --- offers ------------------------------------------------------------------------------------------------


def test_everything_advertised_is_offered() -> None:
    assert all(offers(EVERYTHING, what) for what in ("load", "list", "resume"))


@pytest.mark.parametrize(
    "init",
    [
        {},
        NOTHING,
        {"agentCapabilities": None},
        {"agentCapabilities": "all"},
        {"agentCapabilities": []},
        {"agentCapabilities": {"loadSession": False, "sessionCapabilities": {}}},
        {"agentCapabilities": {"sessionCapabilities": None}},
    ],
)
def test_nothing_is_offered_when_not_advertised(init: dict[str, Any]) -> None:
    assert not any(offers(init, what) for what in ("load", "list", "resume"))


@pytest.mark.parametrize("value", ["yes", "true", 1, {}, [], None])
def test_load_needs_the_boolean_true(value: Any) -> None:
    assert not offers({"agentCapabilities": {"loadSession": value}}, "load")


@pytest.mark.parametrize("session_caps", [[], "list", True, None, 1, ["list", "resume"]])
def test_session_capabilities_must_be_an_object(session_caps: Any) -> None:
    init: JSONObject = {"agentCapabilities": {"loadSession": True, "sessionCapabilities": session_caps}}
    assert not offers(init, "list") and not offers(init, "resume")
    assert offers(init, "load")  # the other capability is read on its own


@pytest.mark.parametrize("value", [True, "yes", 1, [], None])
def test_only_an_object_offers_list_or_resume(value: Any) -> None:
    for what in ("list", "resume"):
        assert not offers({"agentCapabilities": {"sessionCapabilities": {what: value}}}, what), (what, value)
        assert offers({"agentCapabilities": {"sessionCapabilities": {what: {"x": 1}}}}, what)


def test_list_and_resume_are_separate() -> None:
    init: dict[str, Any] = {"agentCapabilities": {"sessionCapabilities": {"list": {}}}}
    assert offers(init, "list") and not offers(init, "resume") and not offers(init, "load")


# --- open_session ------------------------------------------------------------------------------------------


def test_new_session() -> None:
    agent = FakeAgent(new_result={"sessionId": "abc", "modes": {}})
    result = opened(agent, NOTHING, "/proj")
    assert result == Opened("abc", {"sessionId": "abc", "modes": {}}, "new")
    assert agent.new_calls == ["/proj"] and agent.sent == []


@pytest.mark.parametrize("result", [{}, {"sessionId": None}, {"sessionId": 7}, {"sessionId": ""}, {"sessionId": ["a"]}])
def test_new_session_without_a_string_id_is_a_protocol_error(result: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError, match="sessionId"):
        opened(FakeAgent(new_result=result), EVERYTHING)


@pytest.mark.parametrize("how", ["load", "resume"])
def test_load_and_resume_send_their_method_and_record_the_folder(how: str) -> None:
    agent = FakeAgent(answer=lambda method, params: {"modes": None})
    result = opened(agent, EVERYTHING, "/proj", **{how: "old-7"})
    assert agent.sent == [(f"session/{how}", {"sessionId": "old-7", "cwd": "/proj", "mcpServers": []})]
    assert agent.session_cwds == {"old-7": "/proj"}
    assert result == Opened("old-7", {"modes": None}, how)
    assert agent.new_calls == []


@pytest.mark.parametrize("how", ["load", "resume"])
@pytest.mark.parametrize("answer", [None, [], "ok", 3])
def test_a_load_or_resume_answer_that_is_not_an_object_reads_as_empty(how: str, answer: Any) -> None:
    result = opened(FakeAgent(answer=lambda method, params: answer), EVERYTHING, **{how: "old"})
    assert result.result == {} and result.session_id == "old"


@pytest.mark.parametrize(
    ("how", "init"),
    [
        ("load", NOTHING),
        ("load", {"agentCapabilities": {"loadSession": "yes", "sessionCapabilities": {"resume": {}}}}),
        ("resume", NOTHING),
        ("resume", {"agentCapabilities": {"loadSession": True, "sessionCapabilities": {"resume": True}}}),
    ],
)
def test_not_offered_sends_nothing(how: str, init: dict[str, Any]) -> None:
    agent = FakeAgent()
    with pytest.raises(NotOffered, match=f"session/{how}.*--{how}"):
        opened(agent, init, **{how: "old"})
    assert agent.sent == [] and agent.new_calls == [] and agent.session_cwds == {}


def test_not_offered_is_a_protocol_error() -> None:
    assert issubclass(NotOffered, ProtocolError)


# --- list_sessions -----------------------------------------------------------------------------------------


def paged(pages: list[Any]) -> Callable[[str, Mapping[str, object] | None], Any]:
    """Page n for the request whose cursor is "cN" (the first has none)."""

    def answer(method: str, params: Mapping[str, object] | None) -> Any:
        assert method == "session/list"
        cursor = (params or {}).get("cursor")
        assert cursor is None or isinstance(cursor, str), cursor
        return pages[0 if cursor is None else int(cursor[1:])]

    return answer


def test_list_follows_the_cursor_across_pages() -> None:
    agent = FakeAgent(
        answer=paged(
            [
                {"sessions": [{"sessionId": "a"}, {"sessionId": "b"}], "nextCursor": "c1"},
                {"sessions": [{"sessionId": "c", "title": "third"}], "nextCursor": "c2"},
                {"sessions": [{"sessionId": "d"}]},
            ]
        )
    )
    found = listed(agent, cwd="/proj")
    assert [s["sessionId"] for s in found] == ["a", "b", "c", "d"]
    assert found[2] == {"sessionId": "c", "title": "third"}
    assert agent.sent == [
        ("session/list", {"cwd": "/proj"}),
        ("session/list", {"cwd": "/proj", "cursor": "c1"}),
        ("session/list", {"cwd": "/proj", "cursor": "c2"}),
    ]


def test_list_without_a_folder_sends_no_cwd() -> None:
    agent = FakeAgent(answer=paged([{"sessions": [], "nextCursor": "c1"}, {"sessions": []}]))
    assert listed(agent, cwd=None) == []
    assert agent.sent == [("session/list", {}), ("session/list", {"cursor": "c1"})]


@pytest.mark.parametrize("cursor", [None, "", 1, ["c1"], {"c": 1}, True])
def test_list_stops_at_a_missing_empty_or_non_string_cursor(cursor: Any) -> None:
    agent = FakeAgent(answer=lambda method, params: {"sessions": [{"sessionId": "a"}], "nextCursor": cursor})
    assert listed(agent) == [{"sessionId": "a"}]
    assert len(agent.sent) == 1


def test_list_stops_after_max_pages_for_a_cursor_that_never_ends() -> None:
    agent = FakeAgent(answer=lambda method, params: {"sessions": [{"sessionId": "same"}], "nextCursor": "again"})
    found = listed(agent)
    assert len(agent.sent) == MAX_LIST_PAGES
    assert len(found) == MAX_LIST_PAGES


def test_list_skips_entries_that_are_not_sessions() -> None:
    junk_page = {
        "sessions": [
            "s1",
            None,
            7,
            ["sessionId", "x"],
            {},
            {"sessionId": 5},
            {"sessionId": None, "title": "no id"},
            {"id": "wrong-key"},
            {"sessionId": "ok", "title": 3},
        ]
    }
    assert listed(FakeAgent(answer=lambda method, params: junk_page)) == [{"sessionId": "ok", "title": 3}]


@pytest.mark.parametrize("page", [None, [], "sessions", 3, {}, {"sessions": None}, {"sessions": []}])
def test_list_of_a_page_that_is_not_an_object_or_has_no_sessions(page: Any) -> None:
    agent = FakeAgent(answer=lambda method, params: page)
    assert listed(agent) == [] and len(agent.sent) == 1


def test_list_not_offered_sends_nothing() -> None:
    agent = FakeAgent()
    for init in (NOTHING, {"agentCapabilities": {"sessionCapabilities": {"list": True}}}):
        with pytest.raises(NotOffered, match="--list"):
            listed(agent, init)
    assert agent.sent == []


junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
entry = junk | st.fixed_dictionaries({"sessionId": junk | st.text(max_size=5)}, optional={"title": junk, "cwd": junk})
iterable_sessions = st.lists(entry, max_size=5) | st.none() | st.text(max_size=3) | st.dictionaries(st.text(), junk)
cursor = st.none() | st.sampled_from(["", "next"]) | junk


def pages(sessions_member: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    page = st.fixed_dictionaries({}, optional={"sessions": sessions_member, "nextCursor": cursor}) | junk
    return st.lists(page, min_size=1, max_size=4)


def check_listing(answers: list[Any]) -> None:
    calls = iter(range(10**6))

    def answer(method: str, params: Mapping[str, object] | None) -> Any:
        return answers[min(next(calls), len(answers) - 1)]

    agent = FakeAgent(answer=answer)
    found = listed(agent)
    assert len(agent.sent) <= MAX_LIST_PAGES
    assert all(isinstance(s, dict) and isinstance(s["sessionId"], str) for s in found)
    json.dumps(agent.sent)
    lines = session_lines(found, "/w", lambda text: text)
    assert len(lines) == max(1, len(found))


@settings(max_examples=examples(300), deadline=None)
@given(pages(iterable_sessions))
def test_list_of_hostile_pages_keeps_only_sessions(answers: list[Any]) -> None:
    check_listing(answers)


@pytest.mark.parametrize("member", [5, True, 2.5])
def test_a_page_whose_sessions_are_a_number_is_empty_not_a_crash(member: Any) -> None:
    assert listed(FakeAgent(answer=lambda method, params: {"sessions": member})) == []


@settings(max_examples=examples(200), deadline=None)
@given(pages(iterable_sessions | junk))
@example([{"sessions": 5}])
def test_list_of_hostile_pages_with_any_sessions_member(answers: list[Any]) -> None:
    check_listing(answers)


# --- session_lines -----------------------------------------------------------------------------------------


def same(text: str) -> str:
    return text


def test_no_sessions() -> None:
    assert session_lines([], None, same) == ["no sessions"]
    assert session_lines([], "/proj", same) == ["no sessions in /proj"]


def test_a_line_has_id_activity_and_title() -> None:
    lines = session_lines(
        [{"sessionId": "s1", "updatedAt": "2025-01-02T03:04:05Z", "title": "fix tests", "cwd": "/proj"}], "/proj", same
    )
    assert lines == ["s1  2025-01-02T03:04:05Z  fix tests"]


@pytest.mark.parametrize("title", [None, "", 5, ["t"], {"t": 1}])
def test_a_missing_title_reads_untitled(title: Any) -> None:
    session: dict[str, Any] = {"sessionId": "s1"}
    if title is not None:
        session["title"] = title
    assert session_lines([session], None, same) == ["s1  (untitled)"]


def test_a_non_string_activity_is_left_out() -> None:
    assert session_lines([{"sessionId": "s1", "updatedAt": 12345, "title": "t"}], None, same) == ["s1  t"]


def test_another_folder_is_shown_in_brackets() -> None:
    sessions: list[dict[str, Any]] = [
        {"sessionId": "here", "title": "a", "cwd": "/proj"},
        {"sessionId": "here-too", "title": "b", "cwd": "/proj/./sub/.."},  # the same folder, spelled otherwise
        {"sessionId": "there", "title": "c", "cwd": "/elsewhere"},
        {"sessionId": "unknown", "title": "d", "cwd": 7},
        {"sessionId": "none", "title": "e"},
    ]
    assert session_lines(sessions, "/proj/", same) == [
        "here  a",
        "here-too  b",
        "there  c  [/elsewhere]",
        "unknown  d",
        "none  e",
    ]


def test_without_a_folder_every_folder_is_shown() -> None:
    assert session_lines([{"sessionId": "s", "title": "t", "cwd": "/proj"}], None, same) == ["s  t  [/proj]"]


def test_clean_is_applied_to_every_agent_string() -> None:
    seen: list[str] = []

    def clean(text: str) -> str:
        seen.append(text)
        return f"<{text.replace(chr(27), '')}>"

    evil = "\x1b]7501;state=done\x1b\\"
    session: JSONObject = {
        "sessionId": "id" + evil,
        "updatedAt": "when" + evil,
        "title": "title" + evil,
        "cwd": "/x" + evil,
    }
    (line,) = session_lines([session], "/proj", clean)
    assert sorted(seen) == sorted(str(value) for value in session.values())
    assert "\x1b" not in line
    assert (
        line == "<id]7501;state=done\\>  <when]7501;state=done\\>  <title]7501;state=done\\>  [</x]7501;state=done\\>]"
    )
