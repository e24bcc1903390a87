"""Every path that prints someone else's text to a person, fed arbitrary strings: no control character reaches
the output but the layout's own newlines (and, in multi-line text, tabs), and a one-line field stays one line.

The paths: `ama acp-client` (updates, permission prompts, the stop reason, turn-usage keys, protocol-violation
lines, error messages and data, slash-command errors, the agent's name, the agent's stderr, session lists),
`ama conformance`'s text report, `ama sessions list/show`, `ama -p` (text and JSON), `ama doctor`, and ama's
own log lines (stderr and file). The rule itself is ama_acp/textsafe.py; issue 23, "one terminal-safe rendering".
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp import doctor, logs, oneshot
from ama_acp.client.connection import AgentProcess, Violation
from ama_acp.client.display.render import Renderer
from ama_acp.client.handlers import RpcError
from ama_acp.client.terminal import cli as client_cli
from ama_acp.client.terminal import repl, sessions, turn
from ama_acp.client.terminal.agent_stderr import MAX_LINE, AgentStderr
from ama_acp.client.terminal.turn_status import TurnStatus
from ama_acp.config import Config
from ama_acp.conversation.messages import AssistantMessage, TextPart, UserMessage
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.session.store import cli as sessions_cli
from ama_acp.session.store import entries as en
from ama_acp.session.store.listing import SessionSummary
from ama_acp.session.store.session_store import LoadedSession
from ama_acp.textsafe import json_safe, one_line, visible
from ama_conformance.core import report
from ama_conformance.core.outcome import Finding, Status
from ama_conformance.requirements.registry import REGISTRY
from tests.support.hypothesis_profiles import examples

# What a terminal acts on: C0 (tab and newline are checked apart), DEL, C1, bidi controls, LS/PS, surrogates.
ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
ATTACKS = [
    "\x1b]52;c;cm0gLXJmIH4K\x07",  # OSC 52: the clipboard
    "\x1b]0;pwned\x07",  # OSC 0: the window title
    "\x1b]7501;state=done\x1b\\",  # a forged program status
    "\x1b[6n",  # DSR: the terminal types its answer
    "\x9b6n",  # the same with C1 CSI
    "\x9d0;title\x9c",  # C1 OSC ... ST
    "\u202eevil\u202c",  # right-to-left override
    "\u2066\u2069\u2028\u2029",
    "\r\n  1. Allow always (allow_always)\n",  # a forged line in a permission prompt
    "\rover",
    "\x7f\x00\x85",
]
hostile = st.lists(st.one_of(st.sampled_from(ATTACKS), st.text(max_size=8)), max_size=6).map("".join)


def inert(text: str, *, tabs: bool = True) -> None:
    """Nothing a terminal would act on: no control but newline (and tab, where `tabs`)."""
    assert not ACTIVE.search(text), repr(text)
    assert "\r" not in text
    if not tabs:
        assert "\t" not in text, repr(text)


def one(text: str) -> None:
    """A single line, with its end: the field inside it forged no other."""
    inert(text)
    assert text.count("\n") == 1 and text.endswith("\n"), repr(text)


FAST = settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- the rule ----------------------------------------------------------------------------------------------


@FAST
@given(hostile)
def test_visible_and_one_line(text: str) -> None:
    inert(visible(text))
    assert visible(text).count("\n") == text.count("\n")
    inert(one_line(text), tabs=False)
    assert "\n" not in one_line(text)
    assert one_line(one_line(text)) == one_line(text) and visible(visible(text)) == visible(text)


@FAST
@given(hostile)
def test_nothing_is_dropped(text: str) -> None:
    """Each character not kept is shown: a caret form or <U+XXXX> for every one of them."""
    kept = re.sub("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]", "", text)
    out = one_line(text)
    shown = len(re.findall(r"\^[@A-Z\[\\\]^_?]|<U\+[0-9A-F]{4}>", out))
    assert shown >= len(text) - len(kept)


# --- ama acp-client ------------------------------------------------------------------------------------------


def renderer() -> tuple[Renderer, io.StringIO]:
    out = io.StringIO()
    return Renderer(out, colour=False), out


@FAST
@given(hostile, hostile, hostile)
def test_a_permission_prompt_is_one_line_per_option(title: str, name: str, kind: str) -> None:
    r, out = renderer()
    params: JSONObject = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "t", "title": title},
        "options": [{"optionId": "a", "name": name, "kind": kind}, {"optionId": "b", "name": kind, "kind": name}],
    }
    r.permission_request(params, numbered=True)
    r.permission(params, {"outcome": "selected", "optionId": "a"})
    text = out.getvalue()
    inert(text)
    assert text.count("\n") == 4, text  # the question, two options, the answer: no forged line
    assert r.permission_title(params).count("\n") == 0


@FAST
@given(hostile, hostile)
def test_updates_and_the_stop_reason(text: str, other: str) -> None:
    r, out = renderer()
    updates: list[dict[str, Any]] = [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
        {"sessionUpdate": "tool_call", "toolCallId": other, "title": text, "kind": other, "status": "pending"},
        {"sessionUpdate": "session_info_update", "title": text},
        {"sessionUpdate": "notice", "severity": other, "title": text, "description": other},
        {"sessionUpdate": "current_mode_update", "currentModeId": text},
        {"sessionUpdate": "plan", "entries": [{"content": text, "status": "pending"}]},
        {"sessionUpdate": text},
    ]
    for update in updates:
        r.update({"sessionId": "s", "update": update})
    r.end_stream()
    before = out.getvalue()
    r.turn_end("s", text)
    inert(out.getvalue())
    stop_lines = out.getvalue()[len(before) :]
    assert stop_lines.count("\n") == 2  # [stop: …] and the meter


@FAST
@given(st.dictionaries(hostile, st.integers(min_value=0, max_value=10**9), min_size=1, max_size=4))
def test_turn_usage_keys(usage: dict[str, int]) -> None:
    text = turn.usage_line(usage)
    assert text is not None
    one(text + "\n")


@FAST
@given(hostile, hostile, hostile)
def test_protocol_violation_lines(kind: str, detail: str, raw: str) -> None:
    conn = AgentProcess(["no-agent"])  # never started: only its record of violations is read
    conn.violations.append(Violation(kind, detail, raw or "x"))
    err = io.StringIO()
    turn.report_violations(conn, err)
    inert(err.getvalue())
    assert err.getvalue().count("\n") == 2


@FAST
@given(hostile, st.one_of(st.none(), hostile, st.dictionaries(hostile, hostile, max_size=2)), hostile)
def test_error_messages_and_data(message: str, data: Any, step: str) -> None:
    for exc in (RpcError(-32000, message, data), RuntimeError(message)):
        _, text = turn.describe_failure(exc, step)
        one(text + "\n")


@settings(max_examples=examples(40), deadline=None)
@given(hostile)
def test_a_slash_command_refused_by_the_agent(message: str) -> None:
    class Conn(AgentProcess):  # never started: only `request` is answered
        async def request(self, method: str, params: object = None, timeout: float | None = 60.0) -> JSONValue:
            raise RpcError(-32602, message, {"why": message})

    r, out = renderer()
    r.modes["s"] = {"code": message or "Code"}
    err = io.StringIO()
    anyio.run(repl.run_line, Conn(["no-agent"]), r, "s", "/mode code", err, TurnStatus(None))
    text = out.getvalue()
    inert(text)
    assert text.count("\n") == 2 and text.endswith("\nctx ? $?\n")  # the refusal on one line, then the meter


CLIENT_PARSER = client_cli._parser()  # built once; each example parses its own fresh arguments


@FAST
@given(hostile, hostile, hostile)
def test_the_agents_name_and_version(title: str, name: str, version: str) -> None:
    out = io.StringIO()
    client = client_cli._Client(CLIENT_PARSER.parse_args([]), out, io.StringIO(), None, None)
    client.renderer.colour = False
    client._show_agent({"protocolVersion": 1, "agentInfo": {"title": title, "name": name, "version": version}})
    one(out.getvalue())


@FAST
@given(st.lists(st.fixed_dictionaries({"sessionId": hostile, "title": hostile, "cwd": hostile}), min_size=1))
def test_the_agents_session_list(found: list[dict[str, Any]]) -> None:
    lines = sessions.session_lines(found, "/here", one_line)
    r, out = renderer()
    for text in lines:
        r.line(text)
    inert(out.getvalue())
    assert out.getvalue().count("\n") == len(found)


@FAST
@given(title=hostile, name=hostile)
def test_ask_person_without_a_terminal(title: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    params: JSONObject = {"toolCall": {"toolCallId": "t", "title": title}, "options": [{"optionId": "a", "name": name}]}
    assert anyio.run(client_cli.ask_person, params) is None
    inert(err.getvalue())
    assert err.getvalue().count("\n") == 2  # the question and one option, then the prompt


@FAST
@given(st.lists(st.binary(max_size=300) | st.sampled_from([a.encode() for a in ATTACKS]), max_size=8))
def test_the_agents_stderr(chunks: list[bytes]) -> None:
    shown = io.StringIO()
    pipe = AgentStderr(shown.write)
    try:
        for chunk in chunks:
            pipe.feed(chunk)
    finally:
        pipe.close()
    text = shown.getvalue()
    inert(text, tabs=False)
    data = b"".join(chunks)
    assert text.count("\n") == data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def test_an_endless_stderr_line_is_cut_not_kept() -> None:
    shown = io.StringIO()
    pipe = AgentStderr(shown.write)
    try:
        for _ in range(100):
            pipe.feed(b"\x1b]52;c;" + b"A" * 65536)
        assert len(pipe._partial) <= MAX_LINE
        pipe.feed(b"\nnext\n")
    finally:
        pipe.close()
    first, second = shown.getvalue().splitlines()
    assert first.startswith("^[]52;c;AAAA") and "more bytes of this line not shown" in first
    assert len(first) < MAX_LINE + 200 and second == "next"


# --- ama conformance -----------------------------------------------------------------------------------------


@FAST
@given(st.lists(hostile, min_size=1, max_size=3))
def test_the_conformance_text_report(details: list[str]) -> None:
    req = next(r for r in REGISTRY if r.id == "R41")
    findings = [Finding(req.id, Status.FAIL, d, "initialize") for d in details]
    results = [report.Outcome(req, Status.FAIL, findings)]
    verdicts = [report.verdict(req.profile, results)]
    text = report.text(results, verdicts, 1.0, partial=False)
    inert(text, tabs=False)
    # Details are wrapped now (issue 26), so their line count varies; what must hold is that a hostile detail
    # only adds indented lines of its own: none starts where the report's own lines start (a forged verdict).
    base = report.text([report.Outcome(req, Status.FAIL, [])], verdicts, 1.0, False).splitlines()
    added = [line for line in text.splitlines() if line not in base]
    assert all(line.startswith(" " * 17) for line in added), added


# --- ama sessions list / show ---------------------------------------------------------------------------------


@FAST
@given(user=hostile, answer=hostile, title=hostile, kind=hostile)
def test_sessions_show(user: str, answer: str, title: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    loaded = LoadedSession(
        header=en.Header(session_id="s1", cwd="/w" + kind, created_at=title),
        entries=[
            en.MessageEntry(message=UserMessage(content=[TextPart(text=user)])),
            en.MessageEntry(message=AssistantMessage(content=[TextPart(text=answer)])),
            en.ToolCallEntry(wire_id="t", provider_id="p", name="n", title=title, kind=kind, status=kind),
            en.TitleEntry(title=title),
        ],
    )
    assert sessions_cli._show(loaded, False) == 0
    text = capsys.readouterr().out
    inert(text)
    # The header, the tool call, the title: one line each, whatever their fields hold; a message keeps its lines.
    lines = 3 + sum(1 + visible(t[:500]).count("\n") for t in (user, answer) if t)
    assert text.count("\n") == lines


@FAST
@given(title=hostile, cwd=hostile, when=hostile)
def test_sessions_list(title: str, cwd: str, when: str, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = SessionSummary("s1", cwd, title, when, when, [])

    class Store:
        def __init__(self, data_dir: Any) -> None: ...

        def list(
            self, cwd: Any, cursor: Any, limit: int, spoken_only: bool = False
        ) -> tuple[list[SessionSummary], None]:
            return [summary, summary], None

    from ama_acp.session.store import session_store as store

    monkeypatch.setattr(store, "SessionStore", Store)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    cfg = Config(data_dir="/nowhere")
    assert sessions_cli.run_sessions(["list"], lambda args: cfg) == 0
    inert(out.getvalue(), tabs=False)
    assert out.getvalue().count("\n") == 2


# --- ama -p ---------------------------------------------------------------------------------------------------


@FAST
@given(text=hostile, title=hostile)
def test_print_mode_text_and_stderr(text: str, title: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    peer = oneshot._LocalPeer(oneshot._TextAnswer())

    async def go() -> None:
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}, "messageId": "m"}
        await peer.notify("session/update", {"sessionId": "s", "update": chunk})
        tool = {"sessionUpdate": "tool_call", "toolCallId": "t", "title": title}
        await peer.notify("session/update", {"sessionId": "s", "update": tool})
        await peer.request("session/request_permission", {"toolCall": {"title": title}})

    anyio.run(go)
    peer.answer.finish({})
    inert(out.getvalue())
    # The answer's lines, and one to end the last unless the answer did.
    assert out.getvalue().count("\n") == text.count("\n") + (not text.endswith("\n"))
    inert(err.getvalue(), tabs=False)
    assert err.getvalue().count("\n") == 2


@FAST
@given(pieces=st.lists(st.tuples(hostile, st.sampled_from(["m1", "m2"])), max_size=6), reason=hostile)
def test_print_mode_json(pieces: list[tuple[str, str]], reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The json output, written piece by piece as the answer streams, is byte for byte the one document
    (`json.dumps` of the whole) it was before: inert on a terminal, one line, the answer as the model wrote it."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    peer = oneshot._LocalPeer(oneshot._JsonAnswer({"sessionId": "s", "model": reason}))

    async def go() -> None:
        for text, mid in pieces:
            chunk = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
                "messageId": mid,
            }
            await peer.notify("session/update", {"sessionId": "s", "update": chunk})

    anyio.run(go)
    peer.answer.finish({"stopReason": reason, "error": None})
    answer = "".join(("\n\n" if i and mid != pieces[i - 1][1] else "") + t for i, (t, mid) in enumerate(pieces))
    whole = {"sessionId": "s", "model": reason, "answer": answer, "stopReason": reason, "error": None}
    document = out.getvalue()
    assert document == json_safe(json.dumps(whole, ensure_ascii=False)) + "\n"
    inert(document, tabs=False)
    assert document.count("\n") == 1
    assert json.loads(document) == whole


# --- ama doctor -----------------------------------------------------------------------------------------------


@FAST
@given(hostile, hostile, hostile)
def test_doctor(detail: str, path: str, why: str) -> None:
    rep = doctor.Report(
        config=doctor.FileFact(path, True, why),
        credentials=doctor.CredentialsFact(path, True, None, "0644", True, [why]),
        keys=[doctor.KeyFact(why, "environment")],
        model=doctor.ModelFact(why, why, "config", None, False),
        dataDir=doctor.FileFact(path, False),
        sessionsDir=doctor.FileFact(path, False),
        logFile=doctor.FileFact(path, False),
        providers=[doctor.ProviderFact(why, "openai", path, why, "status", 500, detail)],
        network=True,
        openPaths=[doctor.PathFact(path, "0666", "writable by group and others")],
        problem=detail,
    )
    for line in doctor.render(rep):
        one(line + "\n")


# --- ama's own log lines --------------------------------------------------------------------------------------


@FAST
@given(message=hostile, arg=hostile)
def test_log_lines(message: str, arg: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(logs._Redact())
    logger = logging.getLogger("ama_acp.test.textsafe")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.error("provider said: %s %s", message, arg)
        logger.error(message)
        try:
            raise RuntimeError(arg)
        except RuntimeError:
            logger.exception("failed: %s", message)
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    inert(text)
    lines = text.splitlines()
    assert lines[0].startswith("ERROR") and lines[1].startswith("ERROR") and lines[2].startswith("ERROR")
    assert lines[3] == "Traceback (most recent call last):"


def test_the_json_of_a_session_is_still_json() -> None:
    """`--json` outputs are `json.dumps` with ASCII escapes: already inert (checked, not changed)."""
    text = json.dumps({"t": "".join(ATTACKS)})
    inert(text, tabs=False)
    assert msgspec.json.decode(text) == {"t": "".join(ATTACKS)}
