"""The transcript checks of the conformance suite (conformance/core/wire_checks.py) over synthetic transcripts: for each
rule a minimal transcript that breaks it and one that does not, and hypothesis: no sequence of lines, in either
direction, makes the analyzer raise (it runs on a hostile agent's output, after every group), nor makes
`shapes.unknown_fields` raise on any definition of the stable schema."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ama_acp.client.connection import TranscriptEntry, Violation
from ama_conformance.core.outcome import Checks, Finding, Status
from ama_conformance.core.transcript import validators
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS, ClientView, TranscriptAnalyzer
from ama_conformance.schema.shapes import unknown_fields
from tests.support.hypothesis_profiles import examples

Line = tuple[str, Any]  # ("in" | "out", a message to encode, or a raw line as str)
FULL = ClientView(fs=True, terminal=True)
BARE = ClientView(fs=False, terminal=False)
SID = "s1"


# --- building transcripts ---------------------------------------------------------------------------------------


def req(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params if params is not None else {}}


def note(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def res(rid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def err(rid: Any, code: int = -32602, message: str = "Invalid params") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def upd(kind: str, sid: str = SID, **fields: Any) -> dict[str, Any]:
    return note("session/update", {"sessionId": sid, "update": {"sessionUpdate": kind, **fields}})


def chunk(sid: str = SID, text: str = "hello") -> dict[str, Any]:
    return upd("agent_message_chunk", sid, content={"type": "text", "text": text})


def opened(new_result: dict[str, Any] | None = None) -> list[Line]:
    """initialize and one session/new, answered well (ids 0 and 1)."""
    return [
        ("out", req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})),
        ("in", res(0, {"protocolVersion": 1, "agentCapabilities": {}})),
        ("out", req(1, "session/new", {"cwd": "/work", "mcpServers": []})),
        ("in", res(1, new_result if new_result is not None else {"sessionId": SID})),
    ]


def prompt(rid: int, sid: str = SID) -> Line:
    return ("out", req(rid, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}))


def turn(rid: int, *during: dict[str, Any], stop: str = "end_turn", sid: str = SID) -> list[Line]:
    """A prompt, what the agent sends during it, and the prompt response."""
    return [prompt(rid, sid), *[("in", m) for m in during], ("in", res(rid, {"stopReason": stop}))]


def tool_call(tid: str, status: str = "pending", **fields: Any) -> dict[str, Any]:
    return upd("tool_call", toolCallId=tid, title=f"tool {tid}", status=status, **fields)


def tool_update(tid: str, status: str = "completed", **fields: Any) -> dict[str, Any]:
    return upd("tool_call_update", toolCallId=tid, status=status, **fields)


def analyse(
    lines: Iterable[Line],
    client: ClientView = FULL,
    violations: Sequence[Violation] = (),
    ended_by: str | None = "eof",
    stderr: str = "",
) -> tuple[TranscriptAnalyzer, list[Finding]]:
    stable, unstable = validators()
    checks = Checks("wire", (), TRANSCRIPT_IDS)
    analyzer = TranscriptAnalyzer(stable, unstable, client, checks)
    entries = [
        TranscriptEntry(d, m if isinstance(m, str) else json.dumps(m), float(i)) for i, (d, m) in enumerate(lines)
    ]
    analyzer.run(entries, list(violations), ended_by, stderr)
    return analyzer, checks.findings


def failing(lines: Iterable[Line], **kwargs: Any) -> set[str]:
    return {f.rid for f in analyse(lines, **kwargs)[1] if f.status is Status.FAIL}


def finding(lines: Iterable[Line], rid: str, **kwargs: Any) -> Finding | None:
    found = [f for f in analyse(lines, **kwargs)[1] if f.rid == rid]
    assert len(found) <= 1, found
    return found[0] if found else None


# --- a clean transcript ---------------------------------------------------------------------------------------


def test_a_clean_transcript_passes_every_rule_it_could_judge() -> None:
    permission = {
        "sessionId": SID,
        "toolCall": {"toolCallId": "t1"},
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }
    lines: list[Line] = [
        *opened(),
        ("out", note("_acp_conformance/notice", {})),
        prompt(2),
        ("in", chunk()),
        ("in", tool_call("t1", locations=[{"path": "/work/a.txt"}])),
        ("in", req(100, "session/request_permission", permission)),
        ("out", res(100, {"outcome": {"outcome": "selected", "optionId": "allow"}})),
        ("in", req(101, "fs/read_text_file", {"sessionId": SID, "path": "/work/a.txt"})),
        ("out", res(101, {"content": "text"})),
        ("in", req(102, "terminal/create", {"sessionId": SID, "command": "echo", "cwd": "/work"})),
        ("out", res(102, {"terminalId": "term-1"})),
        ("in", tool_update("t1", "in_progress", content=[{"type": "terminal", "terminalId": "term-1"}])),
        ("in", req(103, "terminal/release", {"sessionId": SID, "terminalId": "term-1"})),
        ("out", res(103, {})),
        ("in", tool_update("t1", "completed")),
        ("in", res(2, {"stopReason": "end_turn"})),
    ]
    _, findings = analyse(lines, stderr="a log line\n")
    assert [f for f in findings if f.status is not Status.PASS] == []
    # terminals, permissions and the exit all judged; R131/R132 are passed by the group that offers nothing
    assert {f.rid for f in findings} == set(TRANSCRIPT_IDS) - {"R131", "R132"}


def test_rules_with_nothing_to_judge_stay_silent() -> None:
    _, findings = analyse(opened(), ended_by=None)
    silent = set(TRANSCRIPT_IDS) - {f.rid for f in findings}
    assert silent == {"R7", "R131", "R132", "R133", "R134", "R136"}
    untested = {f.rid: f.detail for f in findings if f.status is Status.NOT_TESTED}
    assert untested == {"R13": "the client sent this agent no notification", "R105": "no prompt turn was answered"}
    assert all(f.status is Status.PASS for f in findings if f.rid not in untested)


@pytest.mark.parametrize(
    ("lines", "vacuous"),
    [
        ([], {"R1", "R3", "R4", "R6", "R11", "R12", "R13", "R105"}),  # the agent wrote nothing at all
        (
            [("out", req(0, "initialize", {"protocolVersion": 1}))],
            {"R1", "R3", "R4", "R6", "R11", "R12", "R13", "R105"},
        ),
        ([("out", note("session/cancel", {"sessionId": SID}))], {"R1", "R3", "R4", "R6", "R11", "R12", "R105"}),
    ],
)
def test_rules_about_what_the_agent_wrote_are_untested_not_passed_when_it_wrote_nothing(
    lines: list[Line], vacuous: set[str]
) -> None:
    """No vacuous PASS: an agent that wrote nothing, or answered nothing, or was sent no notification, has not
    shown R1/R3/R4/R6, R11/R12 or R13 — the transcript leaves them NOT_TESTED, saying why."""
    _, findings = analyse(lines, ended_by=None)
    assert {f.rid for f in findings if f.status is Status.NOT_TESTED} == vacuous
    assert not [f for f in findings if f.status is Status.PASS and f.rid in vacuous]


def test_r131_r132_are_never_passed_by_the_transcript_only_failed() -> None:
    """Whether a tool ran without the capability is the tools-unoffered group's to say; the transcript only
    fails a call the client did not offer."""
    ran = [
        *opened(),
        prompt(2),
        ("in", tool_call("t1")),
        ("in", tool_update("t1")),
        ("in", res(2, {"stopReason": "end_turn"})),
    ]
    _, findings = analyse(ran, client=BARE)
    assert not [f for f in findings if f.rid in ("R131", "R132")]
    call = ("in", req(100, "fs/read_text_file", {"sessionId": SID, "path": "/work/a.txt"}))
    assert "R131" in failing([*opened(), prompt(2), call], client=BARE)


def test_a_repeated_problem_or_note_is_reported_once() -> None:
    bad = ("in", req(100, "fs/read_text_file", {"sessionId": SID, "path": "rel.txt"}))
    found = finding([*opened(), prompt(2), bad, bad, bad], "R30")
    assert found is not None and found.status is Status.FAIL
    assert found.detail.count("rel.txt") == 1 and "more" not in found.detail


# --- framing and envelope: R1, R3, R4, R6 ---------------------------------------------------------------------


def test_r1_a_line_that_is_not_utf8() -> None:
    assert failing(opened(), violations=[Violation("invalid_utf8", "bad byte", "\\xff")]) == {"R1"}
    assert failing(opened(), violations=[Violation("non_json_stdout", "ignored here", "x")]) == set()


def test_r3_a_raw_newline_inside_a_message_and_an_unterminated_last_line() -> None:
    broken = json.dumps(res(1, {"sessionId": SID}), indent=1)
    assert "\n" in broken
    assert failing([*opened()[:3], ("in", broken)]) == {"R3"}
    assert failing(opened(), violations=[Violation("unterminated_line", "no newline")]) == {"R3"}
    assert failing(opened()) == set()


def test_r4_a_line_too_long_and_a_flood_of_lines_without_a_message() -> None:
    assert failing(opened(), violations=[Violation("line_too_long", "a stdout line is longer than 1 bytes")]) == {"R4"}
    assert failing(opened(), violations=[Violation("stdout_flood", "100000 stdout lines (…) in a row")]) == {"R4"}


@pytest.mark.parametrize(
    "line",
    [
        "Starting agent v1.2 ...",  # a banner
        "[1, 2, 3]",  # JSON, but no object
        '{"jsonrpc": "2.0", "id": 0, "id": 1, "result": {}}',  # a duplicate key
        '{"jsonrpc": "2.0", "method": "session/update", "params": {"x": NaN}}',
    ],
)
def test_r4_non_json_lines(line: str) -> None:
    assert failing([*opened(), ("in", line)]) == {"R4"}


def test_r4_a_schema_invalid_message() -> None:
    bad_init = [
        ("out", req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})),
        ("in", res(0, {"protocolVersion": "one", "agentCapabilities": {}})),
    ]
    assert failing(bad_init) == {"R4"}
    assert failing(turn(2, stop="finished")) == {"R4"}
    assert failing([*opened(), ("in", upd("agent_message_chunk", content="not a block"))]) == {"R4"}
    assert failing([*opened(), *turn(2, chunk())]) == set()


def test_r4_a_method_only_the_unstable_schema_defines_is_checked_there_and_noted() -> None:
    lines = [*opened(), ("out", req(2, "session/fork", {"sessionId": SID, "cwd": "/work", "mcpServers": []}))]
    lines.append(("in", res(2, {"sessionId": "s2"})))
    f = finding(lines, "R4")
    assert f is not None and f.status is Status.PASS and "unstable" in f.detail


@pytest.mark.parametrize("envelope", [{}, {"jsonrpc": "1.0"}, {"jsonrpc": 2}])
def test_r6_a_message_without_jsonrpc_2_0(envelope: dict[str, Any]) -> None:
    answer = {"id": 1, "result": {"sessionId": SID}, **envelope}
    assert failing([*opened()[:3], ("in", answer)]) == {"R6"}


# --- JSON-RPC pairing: R11, R12, R13, R14, R18 -----------------------------------------------------------------


def test_r11_a_response_to_an_id_the_client_never_used() -> None:
    assert failing([*opened(), ("in", res(99, {}))]) == {"R11"}


@pytest.mark.parametrize("other", ["1", 1.0, True, [1]])
def test_r11_a_response_id_of_another_json_type(other: Any) -> None:
    lines = [*opened()[:3], ("in", res(other, {"sessionId": SID}))]
    assert "R11" in failing(lines)


def test_r11_a_null_id_error_answers_an_unparsable_line() -> None:
    lines = [*opened(), ("out", '{"jsonrpc": "2.0", "id": 7, "method": '), ("in", err(None, -32700, "Parse error"))]
    assert failing(lines) == set()
    assert failing([*opened(), ("in", err(None, -32700, "Parse error"))]) == {"R11"}  # nothing to answer


def test_r12_a_response_with_both_result_and_error() -> None:
    both = {**res(1, {"sessionId": SID}), "error": {"code": -1, "message": "x"}}
    assert failing([*opened()[:3], ("in", both)]) == {"R12", "R4"}


def test_r12_two_responses_to_one_request() -> None:
    assert failing([*opened(), ("in", res(1, {"sessionId": SID}))]) == {"R12"}
    assert failing([*opened(), ("in", err(1))]) == {"R12"}


def test_r13_a_response_after_a_notification() -> None:
    cancel = ("out", note("session/cancel", {"sessionId": SID}))
    assert failing([*opened(), cancel, ("in", res(None, {}))]) == {"R13"}
    assert failing([*opened(), cancel, ("in", err(None, -32601, "Method not found"))]) == {"R13"}
    assert failing([*opened(), cancel]) == set()


def test_r14_an_error_message_that_is_not_one_short_sentence() -> None:
    lines = [*opened()[:3], ("in", err(1, -32603, "Internal error\nTraceback (most recent call last): ..."))]
    assert failing(lines) == {"R14"}
    assert failing([*opened()[:3], ("in", err(1, -32603, "x" * 201))]) == {"R14"}
    assert failing([*opened()[:3], ("in", err(1, -32602, "cwd must be absolute"))]) == set()


def test_r18_an_agent_request_reuses_a_pending_id() -> None:
    read = req(5, "fs/read_text_file", {"sessionId": SID, "path": "/work/a"})
    twice = [*opened(), prompt(2), ("in", read), ("in", read)]
    assert failing(twice) == {"R18"}
    answered = [*opened(), prompt(2), ("in", read), ("out", res(5, {"content": ""})), ("in", read)]
    assert failing(answered) == set()


# --- R26: no invented root fields ---------------------------------------------------------------------------


def test_r26_an_unknown_root_field_in_a_result() -> None:
    f = finding(opened({"sessionId": SID, "sessionTitle": "mine"}), "R26")
    assert f is not None and f.status is Status.FAIL and "sessionTitle" in f.detail
    assert failing(opened({"sessionId": SID, "_meta": {"x": 1}})) == set()


def test_r26_an_unknown_field_in_params_and_in_an_update() -> None:
    read = req(5, "fs/read_text_file", {"sessionId": SID, "path": "/work/a", "encoding": "utf-8"})
    assert failing([*opened(), prompt(2), ("in", read)]) == {"R26"}
    assert failing([*opened(), ("in", upd("agent_message_chunk", content={"type": "text", "text": "x"}, mood=1))]) == {
        "R26"
    }


def test_r26_prompt_response_usage_is_unstable_only_noted_not_failed() -> None:
    usage = {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}
    lines = [*opened(), prompt(2), ("in", res(2, {"stopReason": "end_turn", "usage": usage}))]
    f = finding(lines, "R26")
    assert f is not None and f.status is Status.PASS
    assert "usage" in f.detail and "unstable" in f.detail


# --- R30: absolute paths ------------------------------------------------------------------------------------


R30_CASES: dict[str, Callable[[str], dict[str, Any]]] = {
    "read": lambda path: req(5, "fs/read_text_file", {"sessionId": SID, "path": path}),
    "write": lambda path: req(5, "fs/write_text_file", {"sessionId": SID, "path": path, "content": "x"}),
    "terminal-cwd": lambda path: req(5, "terminal/create", {"sessionId": SID, "command": "ls", "cwd": path}),
    "location": lambda path: tool_call("t1", "completed", locations=[{"path": path}]),
    "diff": lambda path: tool_call(
        "t1", "completed", content=[{"type": "diff", "path": path, "oldText": "a", "newText": "b"}]
    ),
}


@pytest.mark.parametrize("build", list(R30_CASES.values()), ids=list(R30_CASES))
def test_r30_a_relative_path(build: Callable[[str], dict[str, Any]]) -> None:
    for relative in ("src/a.txt", "./a.txt", ""):
        assert "R30" in failing([*opened(), prompt(2), ("in", build(relative))]), relative
    assert "R30" not in failing([*opened(), prompt(2), ("in", build("/work/src/a.txt"))])


# --- R96: boolean config options ------------------------------------------------------------------------------


def _option(kind: str) -> dict[str, Any]:
    if kind == "boolean":
        return {"id": "think", "name": "Think", "type": "boolean", "currentValue": True}
    return {
        "id": "mode",
        "name": "Mode",
        "type": "select",
        "currentValue": "a",
        "options": [{"value": "a", "name": "A"}],
    }


def test_r96_a_boolean_option_the_client_did_not_advertise() -> None:
    assert "R96" in failing(opened({"sessionId": SID, "configOptions": [_option("boolean")]}))
    assert "R96" in failing([*opened(), ("in", upd("config_option_update", configOptions=[_option("boolean")]))])
    assert failing(opened({"sessionId": SID, "configOptions": [_option("select")]})) == set()


# --- R105 and R115: ordering around responses -------------------------------------------------------------------


def test_r105_a_chunk_after_the_prompt_response() -> None:
    assert failing([*opened(), *turn(2, chunk()), ("in", chunk())]) == {"R105"}
    assert failing([*opened(), *turn(2, chunk(), tool_call("t1", "completed"))]) == set()
    # Session-level state after the turn is not part of it.
    late_usage = ("in", upd("usage_update", used=10, size=1000))
    assert failing([*opened(), *turn(2, chunk()), late_usage]) == set()


def test_r105_replay_during_a_pending_load_is_fine_but_not_after_its_response() -> None:
    load = ("out", req(2, "session/load", {"sessionId": "old", "cwd": "/work", "mcpServers": []}))
    replay = [
        ("in", upd("user_message_chunk", "old", content={"type": "text", "text": "q"})),
        ("in", chunk("old", "a")),
        ("in", upd("tool_call", "old", toolCallId="t1", title="t")),
        ("in", upd("tool_call", "old", toolCallId="t1", title="t", status="completed")),  # replayed twice: fine
    ]
    lines = [*opened(), load, *replay, ("in", res(2, {}))]
    assert failing(lines) == set()
    assert failing([*lines, ("in", chunk("old"))]) == {"R105"}
    assert failing([*lines, *turn(3, chunk("old"), sid="old")]) == set()  # a new turn on the loaded session


def test_r115_an_update_before_the_session_new_response() -> None:
    early = [*opened()[:3], ("in", chunk()), ("in", res(1, {"sessionId": SID}))]
    assert failing(early) == {"R115"}
    assert failing([*opened(), ("in", chunk("never-named"))]) == {"R115"}
    assert failing([*opened(), ("in", upd("available_commands_update", availableCommands=[]))]) == set()


# --- R116 and tool calls: R120, R122, R123 -----------------------------------------------------------------------


def test_r116_an_unstable_update_kind_to_a_client_that_did_not_opt_in() -> None:
    notice = ("in", upd("notice", message="heads up", level="info"))
    assert "R116" in failing([*opened(), notice])
    opted_in = ClientView(fs=True, terminal=True, session_caps={"notices": {}})
    assert "R116" not in failing([*opened(), notice], client=opted_in)


def test_r120_a_tool_call_id_announced_twice() -> None:
    assert failing([*opened(), *turn(2, tool_call("t1", "completed"), tool_call("t1", "completed"))]) == {"R120"}
    assert failing([*opened(), *turn(2, tool_call("t1", "completed"), tool_call("t2", "completed"))]) == set()


def test_r122_an_update_to_a_tool_call_never_announced() -> None:
    assert failing([*opened(), *turn(2, tool_update("t9"))]) == {"R122"}
    assert failing([*opened(), *turn(2, tool_call("t9"), tool_update("t9"))]) == set()


def test_r123_a_turn_ending_with_a_tool_call_still_open() -> None:
    assert failing([*opened(), *turn(2, tool_call("t1"))]) == {"R123"}
    assert failing([*opened(), *turn(2, tool_call("t1"), tool_update("t1", "in_progress"))]) == {"R123"}
    assert failing([*opened(), *turn(2, tool_call("t1"), tool_update("t1", "failed"))]) == set()
    assert failing([*opened(), *turn(2, tool_call("t1"), stop="cancelled")]) == set()  # a cancelled turn may


# --- calls the client never offered: R131, R132, R138 -----------------------------------------------------------


@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file"])
def test_r131_fs_calls_only_when_offered(method: str) -> None:
    params = {"sessionId": SID, "path": "/work/a.txt"} | ({"content": "x"} if "write" in method else {})
    lines = [*opened(), prompt(2), ("in", req(5, method, params))]
    assert failing(lines, client=BARE) == {"R131"}
    assert failing(lines, client=FULL) == set()


def test_r132_terminal_calls_only_when_offered() -> None:
    lines = [*opened(), prompt(2), ("in", req(5, "terminal/create", {"sessionId": SID, "command": "ls"}))]
    assert "R132" in failing(lines, client=BARE)
    assert "R132" not in failing(lines, client=FULL)
    output = [*opened(), prompt(2), ("in", req(6, "terminal/output", {"sessionId": SID, "terminalId": "x"}))]
    assert "R132" in failing(output, client=BARE)


def test_r138_no_elicitation() -> None:
    lines = [*opened(), prompt(2), ("in", req(5, "elicitation/create", {"message": "Your API key?"}))]
    assert "R138" in failing(lines)
    assert "R138" not in failing([*opened(), prompt(2)])


# --- terminals and permissions: R133, R134, R136 ------------------------------------------------------------------


def _terminal(*after: Line) -> list[Line]:
    return [
        *opened(),
        prompt(2),
        ("in", req(5, "terminal/create", {"sessionId": SID, "command": "ls"})),
        ("out", res(5, {"terminalId": "term-1"})),
        *after,
    ]


SHOWN: Line = ("in", tool_call("t1", "completed", content=[{"type": "terminal", "terminalId": "term-1"}]))
RELEASE: Line = ("in", req(6, "terminal/release", {"sessionId": SID, "terminalId": "term-1"}))


def test_r133_a_terminal_never_released() -> None:
    assert failing(_terminal(SHOWN)) == {"R133"}
    released = finding(_terminal(SHOWN, RELEASE), "R133")
    assert released is not None and released.status is Status.PASS


def test_r134_a_terminal_released_before_it_was_shown() -> None:
    assert failing(_terminal(RELEASE, SHOWN)) == {"R134"}
    shown = finding(_terminal(SHOWN, RELEASE), "R134")
    assert shown is not None and shown.status is Status.PASS


def test_r133_a_terminal_create_that_failed_creates_no_terminal() -> None:
    lines = [*opened(), prompt(2), ("in", req(5, "terminal/create", {"sessionId": SID, "command": "ls"}))]
    lines.append(("out", err(5, -32603, "no shell")))
    assert finding(lines, "R133") is None and finding(lines, "R134") is None


def _permission(*option_ids: str) -> list[Line]:
    options = [{"optionId": o, "name": o, "kind": "allow_once"} for o in option_ids]
    params = {"sessionId": SID, "toolCall": {"toolCallId": "t1"}, "options": options}
    return [*opened(), prompt(2), ("in", tool_call("t1")), ("in", req(5, "session/request_permission", params))]


def test_r136_permission_option_ids_repeat() -> None:
    assert failing(_permission("allow", "allow")) == {"R136"}
    unique = finding(_permission("allow", "reject"), "R136")
    assert unique is not None and unique.status is Status.PASS


# --- R7: how the process ended -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ended_by", "expected"),
    [
        ("eof", Status.PASS),
        ("terminated", Status.FAIL),
        ("killed", Status.FAIL),
        ("exited before close", None),  # it never saw its stdin close: nothing to judge
        (None, None),
    ],
)
def test_r7_ended_by(ended_by: str | None, expected: Status | None) -> None:
    f = finding(opened(), "R7", ended_by=ended_by)
    assert (f.status if f else None) is expected


# --- hostile transcripts --------------------------------------------------------------------------------------

# Agent lines that once crashed the analyzer (each now an R4 finding like any other malformed message).
CRASHES = {
    "method-not-a-string": ("in", {"jsonrpc": "2.0", "id": 1, "method": 5}),
    "update-kind-a-list": (
        "in",
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": {"sessionUpdate": []}}},
    ),
    "locations-a-number": ("in", upd("tool_call", toolCallId="t1", title="t", locations=5)),
    "content-a-number": ("in", upd("tool_call", toolCallId="t1", title="t", content=7)),
    "option-id-a-list": (
        "in",
        req(5, "session/request_permission", {"sessionId": SID, "toolCall": {}, "options": [{"optionId": [1]}]}),
    ),
    "deeply-nested-line": ("in", "[" * 100_000),
}


@pytest.mark.parametrize("line", list(CRASHES.values()), ids=list(CRASHES))
def test_hostile_agent_lines_are_findings_not_exceptions(line: Line) -> None:
    failed = failing([*opened(), prompt(2), line])
    assert "R4" in failed


def test_a_client_request_with_an_unhashable_id() -> None:
    failing([("out", req([1], "_x")), ("in", res([1], {}))])  # once a TypeError ({rid: method} with a list id)


JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
KEYS = ["sessionId", "update", "sessionUpdate", "toolCallId", "status", "locations", "content", "options", "optionId"]
KEYS += ["terminalId", "path", "cwd", "configOptions", "type", "stopReason", "id", "result", "error", "method"]
METHODS = ["session/update", "session/prompt", "session/new", "session/load", "session/cancel", "fs/read_text_file"]
METHODS += [
    "terminal/create",
    "terminal/release",
    "session/request_permission",
    "elicitation/create",
    "_x",
    "initialize",
]


def _near_messages() -> st.SearchStrategy[Any]:
    """Objects shaped like messages, so hypothesis reaches past the envelope into the per-kind checks."""
    loose = st.dictionaries(
        st.sampled_from(KEYS), JSON_VALUES | st.sampled_from([SID, "tool_call", "terminal"]), max_size=6
    )
    update = st.fixed_dictionaries(
        {
            "sessionUpdate": st.sampled_from(["tool_call", "tool_call_update", "agent_message_chunk", "plan"])
            | JSON_VALUES
        },
        optional={k: JSON_VALUES | loose for k in ("toolCallId", "status", "locations", "content", "configOptions")},
    )
    params = (
        st.fixed_dictionaries(
            {}, optional={"sessionId": st.sampled_from([SID, "s2"]) | JSON_VALUES, "update": update | JSON_VALUES}
        )
        | loose
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.just("2.0") | JSON_VALUES,
            "id": st.integers(0, 3) | JSON_VALUES,
            "method": st.sampled_from(METHODS) | JSON_VALUES,
            "params": params | JSON_VALUES,
            "result": params | JSON_VALUES,
            "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text(max_size=5)}) | JSON_VALUES,
        },
    )


ENDINGS = st.sampled_from([None, "eof", "terminated", "killed", "exited before close"])
PLAIN_LINES = st.text(max_size=40) | JSON_VALUES.map(json.dumps)
SHAPED_LINES = PLAIN_LINES | _near_messages().map(json.dumps)


@given(st.lists(st.tuples(st.sampled_from(["in", "out"]), PLAIN_LINES), max_size=12), ENDINGS)
@settings(max_examples=examples(150), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_the_analyzer_never_raises_on_arbitrary_text_and_json(
    lines: list[tuple[str, str]], ended_by: str | None
) -> None:
    _, findings = analyse([*opened(), *lines], ended_by=ended_by)
    assert {f.rid for f in findings} <= set(TRANSCRIPT_IDS)


@given(st.lists(st.tuples(st.sampled_from(["in", "out"]), SHAPED_LINES), max_size=12), ENDINGS)
@example([("in", json.dumps({"jsonrpc": "2.0", "id": 1, "method": 5}))], "eof")
@settings(max_examples=examples(150), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_the_analyzer_never_raises_on_message_shaped_lines(lines: list[tuple[str, str]], ended_by: str | None) -> None:
    _, findings = analyse([*opened(), *lines], ended_by=ended_by)
    assert {f.rid for f in findings} <= set(TRANSCRIPT_IDS)


_STABLE, _UNSTABLE = (v.schema for v in validators())


@given(st.sampled_from(sorted(_STABLE["$defs"])), JSON_VALUES | st.dictionaries(st.sampled_from(KEYS), JSON_VALUES))
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_unknown_fields_never_raises(definition: str, instance: Any) -> None:
    unknown, unstable_only = unknown_fields(_STABLE, _UNSTABLE, definition, instance)
    assert not set(unknown) & set(unstable_only)
    if isinstance(instance, dict):
        assert set(unknown) | set(unstable_only) <= set(instance) - {"_meta"}
    else:
        assert (unknown, unstable_only) == ([], [])


# --- capabilities that are present but do not opt in --------------------------------------------


@pytest.mark.parametrize("caps", [{"configOptions": {}}, {"configOptions": {"boolean": None}}], ids=["empty", "null"])
def test_r96_config_options_capability_without_boolean(caps: dict[str, Any]) -> None:
    client = ClientView(fs=True, terminal=True, session_caps=caps)
    assert "R96" in failing(opened({"sessionId": SID, "configOptions": [_option("boolean")]}), client=client)


def test_r96_boolean_options_advertised_by_the_client() -> None:
    client = ClientView(fs=True, terminal=True, session_caps={"configOptions": {"boolean": {}}})
    assert "R96" not in failing(opened({"sessionId": SID, "configOptions": [_option("boolean")]}), client=client)


@pytest.mark.parametrize(
    ("update", "caps"),
    [
        (upd("plan_update", entries=[]), {}),
        (upd("notice", message="heads up", level="info"), {"notices": None}),
    ],
    ids=["unstable-only-kind", "null-capability"],
)
def test_r116_more_kinds_the_client_never_opted_in_to(update: dict[str, Any], caps: dict[str, Any]) -> None:
    client = ClientView(fs=True, terminal=True, session_caps=caps)
    assert "R116" in failing([*opened(), ("in", update)], client=client)


def test_r133_a_terminal_may_outlive_its_turn_if_released_before_the_end() -> None:
    """R133 asks for the release once the terminal is no longer needed, by the end of the connection at the
    latest: a terminal kept for a later turn is fine, one never released is not."""
    kept = _terminal(SHOWN, ("in", res(2, {"stopReason": "end_turn"})), prompt(3), RELEASE)
    assert failing(kept) == set()
    assert failing(_terminal(SHOWN, ("in", res(2, {"stopReason": "end_turn"})), prompt(3))) == {"R133"}
