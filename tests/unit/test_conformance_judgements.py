"""Judgements the suite makes on its own (issue 43): which sign-in it may try by itself, a timeout is untested and
never failed, an update under another session's id, the agent's own answer to a batch, and an agent that could
not start as a verdict of its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.client.connection import TranscriptEntry
from ama_conformance.core.outcome import Blocked, Checks, Finding, Status, TurnTimedOut
from ama_conformance.core.report import Kind, Outcome, verdict
from ama_conformance.core.sign_in import choose, needs_person
from ama_conformance.groups.coverage_history import misrouted
from ama_conformance.groups.lifecycle import batch_replies
from ama_conformance.requirements.registry import BY_ID, Profile
from ama_conformance.schema.published import published_in

GEMINI: list[dict[str, Any]] = [
    {"id": "oauth-personal", "name": "Log in with Google", "description": None},
    {"id": "gemini-api-key", "name": "Use Gemini API key", "description": "Requires GEMINI_API_KEY"},
]


def test_a_browser_sign_in_is_passed_over_for_one_that_needs_no_person() -> None:
    assert needs_person(GEMINI[0]) and not needs_person(GEMINI[1])
    assert choose(GEMINI, None) == ("gemini-api-key", "")
    assert not needs_person({"id": "fixture-login", "name": "Fixture sign-in"})
    assert needs_person({"id": "x", "name": "X", "_meta": {"interactive": True}})


def test_only_person_methods_are_tried_only_when_named() -> None:
    method, why = choose(GEMINI[:1], None)
    assert method is None and "need a browser or a person" in why and "--auth-method" in why
    assert choose(GEMINI[:1], "oauth-personal") == ("oauth-personal", "")
    assert choose([], None) == (None, "no agent auth method is advertised")


@given(st.dictionaries(st.sampled_from(["id", "name", "description", "_meta"]), st.none() | st.text() | st.booleans()))
def test_any_advertised_method_shape_is_judged_without_error(method: dict[str, object]) -> None:
    assert needs_person(method) in (True, False)


def test_a_timeout_inside_a_step_is_untested_never_failed() -> None:
    c = Checks("g", ("R103", "R45"))
    with pytest.raises(Blocked) as info, c.at("R103"):
        raise TurnTimedOut("the turn did not complete within 1 s")
    assert c.findings == [Finding("R103", Status.NOT_TESTED, "the turn did not complete within 1 s", "g")]
    assert info.value.rid == "R103"
    c2 = Checks("g", ("R33",))
    with pytest.raises(Blocked), c2.at("R33"):
        raise TimeoutError
    assert [f.status for f in c2.findings] == [Status.NOT_TESTED]
    assert c2.findings[0].detail == "no answer came within the time limit"


def test_an_update_under_another_sessions_id_is_misrouted() -> None:
    words = {"a": "word-a", "b": "word-b"}
    updates = [
        {"sessionId": "a", "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "word-a"}}},
        {"sessionId": "b", "update": {"sessionUpdate": "session_info_update", "title": "Reply: word-a"}},
        {"sessionId": "b", "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "word-b word-a"}}},
    ]
    problems, own = misrouted(updates, words)
    assert own == 2  # the last carries its own words too: a bled history is R53.1's, not a misroute
    assert len(problems) == 1 and "session_info_update under session 'b' carries 'word-a'" in problems[0]


def _entries(*lines: tuple[str, object]) -> list[TranscriptEntry]:
    return [TranscriptEntry(d, m if isinstance(m, str) else json.dumps(m), float(i)) for i, (d, m) in enumerate(lines)]


def test_the_answer_to_a_batch_is_the_agents_not_the_barriers() -> None:
    batch = [{"jsonrpc": "2.0", "id": 78, "method": "_x"}]
    barrier = {"jsonrpc": "2.0", "id": 5, "method": "_conformance/barrier1", "params": {}}
    answer = {"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "no"}}
    silent = _entries(("out", batch), ("out", barrier), ("in", answer))
    assert batch_replies(silent) == []
    reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "batch"}}
    answered = _entries(("out", batch), ("in", reply), ("out", barrier), ("in", answer))
    assert batch_replies(answered) == [json.dumps(reply)[:120]]


def test_an_agent_that_could_not_start_has_a_verdict_of_its_own() -> None:
    untested = Outcome(BY_ID["R36"], Status.NOT_TESTED, [Finding("R36", Status.NOT_TESTED, "exited", "start-up")])
    v = verdict(Profile.ACP, [untested], "the agent exited before answering initialize (exit code 2)")
    assert v.kind is Kind.COULD_NOT_START and v.name == "COULD NOT START" and v.exit_code() == 2
    assert v.line.startswith("ACP v1: COULD NOT START — the agent exited before answering initialize (exit code 2)")
    assert verdict(Profile.ACP, [untested]).kind is Kind.NO_VIOLATION


def test_models_is_known_to_a_published_schema() -> None:
    assert "0.17.0" in (published_in("NewSessionResponse", "models") or "")
    assert published_in("NewSessionResponse", "extra") is None
    assert BY_ID["R26.1"].tier.value == "ADVISORY" and BY_ID["R101"].tier.value == "MANDATORY"
