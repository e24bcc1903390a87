"""The subagents group (conformance/groups/subagents.py) and what it rests on: the `delegate` directive and the
scripted model's call to a delegation tool, the transcript checks' reading of child sessions for a client that
advertised `clientCapabilities.subagents`, a delegating fixture (tests/support/acp_fixtures/subagent_agent.py)
that conforms and whose one-rule breaks are each caught by exactly their rule, and ama, which passes every check
of the group when the suite's scripted model makes it delegate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.client.connection import TranscriptEntry
from ama_conformance.core.directives import Directive, delegated_prompt, directive_line, parse_directive
from ama_conformance.core.outcome import Checks, Status
from ama_conformance.core.transcript import validators
from ama_conformance.core.wire_checks import TRANSCRIPT_IDS, ClientView, TranscriptAnalyzer
from ama_conformance.requirements.subagents import SUBAGENTS
from ama_conformance.servers.model import ToolCall, choose_call, decide
from tests.support.acp_fixtures import launch_command
from tests.support.acp_fixtures.subagent_agent import BREAKS
from tests.support.conformance_inprocess import MODEL_ENV, run_conformance
from tests.support.conformance_runs import run_forked
from tests.support.harness import Ama, clean_env
from tests.support.hypothesis_profiles import examples

ROOT = Path(__file__).resolve().parents[2]
OWN = {row[0] for row in SUBAGENTS}
TASK_TOOL = (
    "task",
    {
        "type": "object",
        "properties": {"prompt": {"type": "string"}, "description": {"type": "string"}, "agent": {"type": "string"}},
        "required": ["prompt"],
    },
)


# --- the directive and the scripted model ---------------------------------------------------------------------


@settings(max_examples=examples(100), deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=60))
def test_a_delegate_directive_reads_back(text: str) -> None:
    found = parse_directive("Please delegate.\n" + directive_line("delegate", text))
    if text.strip():
        assert found == Directive("delegate", text=text.strip())
    else:
        assert found is None  # a delegation with nothing to ask is no directive


def test_the_delegated_prompt_asks_the_child_to_reply_and_never_to_delegate_again() -> None:
    assert parse_directive(delegated_prompt("marker-1")) == Directive("reply", text="marker-1")


def test_the_scripted_model_calls_the_task_tool_with_a_prompt_and_a_title() -> None:
    read = ("read_file", {"type": "object", "properties": {"path": {"type": "string"}}})
    call = choose_call(Directive("delegate", text="m-1"), [read, TASK_TOOL])
    assert call == ToolCall("task", {"prompt": delegated_prompt("m-1"), "description": "Conformance delegation"})
    # No delegation tool (or one without a text prompt): no call, so the agent simply does not delegate.
    assert choose_call(Directive("delegate", text="m-1"), [read]) is None
    odd = ("task", {"type": "object", "properties": {"prompt": {"type": "array"}}})
    assert choose_call(Directive("delegate", text="m-1"), [odd]) is None


@settings(max_examples=examples(200), deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.text(max_size=8), lambda kids: st.dictionaries(st.text(max_size=8), kids)
    )
)
def test_hostile_delegation_tool_schemas_never_break_the_choice(schema: Any) -> None:
    """An agent declares its tools: whatever shape the schema has, the choice is a call or None, never an error."""
    tools = [("task", schema)] if isinstance(schema, dict) else [("task", {"properties": schema})]
    call = choose_call(Directive("delegate", text="m"), tools)
    assert call is None or call.name == "task"


def test_the_parent_delegates_and_the_child_replies() -> None:
    tools = [{"type": "function", "function": {"name": TASK_TOOL[0], "parameters": TASK_TOOL[1]}}]
    parent = {
        "model": "m",
        "tools": tools,
        "messages": [{"role": "user", "content": directive_line("delegate", "m-2")}],
    }
    answer, call_id = decide("openai", parent, lambda: "call-1")
    assert answer.call is not None and answer.call.name == "task" and call_id == "call-1"
    child = {"model": "m", "messages": [{"role": "user", "content": answer.call.arguments["prompt"]}]}
    assert decide("openai", child, lambda: "call-2")[0].text == "m-2"


# --- the transcript checks, for a client that advertised subagents ---------------------------------------------


def _note(sid: str, update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}}


def _transcript(subagents: bool, *during: dict[str, Any]) -> list[TranscriptEntry]:
    init = {"protocolVersion": 1, "clientCapabilities": {"subagents": {}} if subagents else {}}
    lines: list[tuple[str, dict[str, Any]]] = [
        ("out", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
        ("in", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentCapabilities": {}}}),
        ("out", {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}),
        ("in", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "p"}}),
        ("out", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "p", "prompt": []}}),
        *[("in", m) for m in during],
        ("in", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
    ]  # fmt: skip
    return [TranscriptEntry(d, json.dumps(m), float(i)) for i, (d, m) in enumerate(lines)]


def _failed(entries: list[TranscriptEntry]) -> set[str]:
    stable, unstable = validators()
    checks = Checks("wire", (), TRANSCRIPT_IDS)
    TranscriptAnalyzer(stable, unstable, ClientView(fs=True, terminal=True), checks).run(entries, [], "eof", "")
    return {f.rid for f in checks.findings if f.status is Status.FAIL}


ANNOUNCE = {"sessionUpdate": "subagent_update", "sessionId": "c", "state": {"state": "running"}}
SAY = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "child"}}


def test_an_announced_child_is_a_known_session_for_a_client_that_opted_in() -> None:
    assert _failed(_transcript(True, _note("p", ANNOUNCE), _note("c", SAY))) == set()


def test_a_child_announced_late_is_left_to_the_subagents_group_and_one_never_announced_is_r115() -> None:
    assert _failed(_transcript(True, _note("c", SAY), _note("p", ANNOUNCE))) == set()  # R115.1's, not R115's
    assert _failed(_transcript(True, _note("x", SAY), _note("p", ANNOUNCE))) == {"R115"}
    # An announcement on a session the client does not know announces nothing.
    assert _failed(_transcript(True, _note("q", ANNOUNCE), _note("c", SAY))) == {"R115"}


def test_without_the_capability_a_child_is_an_unknown_session_and_its_announcement_an_unstable_kind() -> None:
    assert _failed(_transcript(False, _note("p", ANNOUNCE), _note("c", SAY))) == {"R115", "R116"}


# --- the group, on the delegating fixture and on ama ----------------------------------------------------------


def _fixture(tmp: Path, *breaks: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """The group's run on the fixture: the agent started from its compiled module (launch.py), the run forked from a server
    that has imported the suite (tests/support/conformance_runs.py), as `python -m ama_conformance` in every other way."""
    tmp.mkdir(parents=True, exist_ok=True)
    report = tmp / "report.json"
    command = launch_command("subagent_agent", *(f"--break={b}" for b in breaks))
    out = run_forked(
        ["-k", "subagents", "--report-json", str(report), "--", *command], timeout=120, env=clean_env(tmp), cwd=ROOT
    )
    assert report.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return out.returncode, {r["id"]: r for r in json.loads(report.read_text(encoding="utf-8"))["requirements"]}


def _failures(status: dict[str, dict[str, Any]]) -> set[str]:
    return {rid for rid, r in status.items() if r["status"] == "FAIL"}


def test_the_conforming_fixture_passes_what_it_shows_and_skips_what_it_cannot(tmp_path: Path) -> None:
    code, status = _fixture(tmp_path)
    assert code == 0 and _failures(status) == set()
    assert status["R115.1"]["status"] == "PASS" and status["R123.1"]["status"] == "PASS"
    # It talks to no model, and shows nothing to a client that did not opt in: no sign it delegated, no pass.
    assert status["R116.1"]["status"] == "SKIPPED"


# R116 is the digest item R116.1 narrows: an unstable update kind to a client that opted in to none.
ALSO = {"unasked-child": {"R116"}}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_break_of_the_fixture_is_caught_by_exactly_its_rule(tmp_path: Path, name: str) -> None:
    code, status = _fixture(tmp_path, name)
    assert _failures(status) == {BREAKS[name]} | ALSO.get(name, set()), {
        rid: status[rid]["findings"] for rid in _failures(status)
    }
    assert code == (0 if name == "stuck-running" else 1)  # R123.1 is ADVISORY: reported, it decides nothing


def _suite_in_process(tmp: Path, command: list[str], *options: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """The group's run on ama, in this process, ama launched in-process (tests/support/conformance_inprocess.py)."""
    report = tmp / "report.json"
    argv = ["-k", "subagents", *options, "--report-json", str(report), "--", *command]
    run = run_conformance(argv, clean_env(tmp), tmp / "agents")
    assert report.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return run.returncode, {r["id"]: r for r in run.report["requirements"]}


@pytest.mark.slow  # ama with the scripted model (~5 s)
def test_ama_passes_every_subagent_check(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    code, status = _suite_in_process(tmp_path, ama.command(), *MODEL_ENV)
    assert code == 0
    assert {rid: status[rid]["status"] for rid in sorted(OWN)} == dict.fromkeys(sorted(OWN), "PASS"), {
        rid: status[rid]["findings"] for rid in OWN
    }
    assert _failures(status) == set()
