"""The editor's answers, decoded where they arrive (wire/answers.py, session/editor/client.py) and used by the editor's
workspace (session/editor/workspaces.py).

The promise: whatever JSON value the client answers, each call gives its typed answer or one error —
`msgspec.ValidationError` from the decoder, `MalformedAnswer` from the `EditorClient`, a `ToolError` from the
workspace — and never an AttributeError or KeyError; a terminal that was created is released whatever came
after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.rpc.peer import Params
from ama_acp.session.editor.client import MalformedAnswer, PeerEditor
from ama_acp.session.editor.workspaces import TERMINAL_CREATE_TIMEOUT, TERMINAL_TIMEOUT, EditorWorkspace
from ama_acp.tools.base import ToolError
from ama_acp.tools.workspace import CommandResult
from ama_acp.wire import answers
from ama_acp.wire import types as w

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def near(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Objects with the schema's keys, each of the right type or any JSON value, or absent; or any value."""
    return st.fixed_dictionaries({}, optional={k: v | json_values for k, v in fields.items()}) | json_values


exit_fields = {"exitCode": st.integers(), "signal": st.sampled_from(["SIGKILL", "SIGTERM", "NOPE", ""])}
ANSWERS: dict[str, st.SearchStrategy[Any]] = {
    "fs/read_text_file": near(content=st.text()),
    "fs/write_text_file": near(_meta=st.dictionaries(st.text(), json_values)),
    "session/request_permission": near(
        outcome=st.fixed_dictionaries(
            {"outcome": st.sampled_from(["selected", "cancelled"]) | json_values},
            optional={"optionId": st.text() | json_values},
        )
    ),
    "terminal/create": near(terminalId=st.text()),
    "terminal/output": near(output=st.text(), truncated=st.booleans(), exitStatus=near(**exit_fields)),
    "terminal/wait_for_exit": near(**exit_fields),
    "terminal/kill": near(),
    "terminal/release": near(),
}

# method → (its decoder, its answer's type, how PeerEditor calls it)
SID = "ses_1"
REF = w.TerminalRequest(session_id=SID, terminal_id="t1")
CALLS: dict[str, tuple[Callable[[object], object], type, Callable[[PeerEditor], Any]]] = {
    "fs/read_text_file": (
        answers.read_text_file,
        w.ReadTextFileResponse,
        lambda e: e.read_text_file(w.ReadTextFileRequest(session_id=SID, path="/a")),
    ),
    "fs/write_text_file": (
        answers.write_text_file,
        w.WriteTextFileResponse,
        lambda e: e.write_text_file(w.WriteTextFileRequest(session_id=SID, path="/a", content="x")),
    ),
    "session/request_permission": (
        answers.request_permission,
        w.RequestPermissionResponse,
        lambda e: e.request_permission(
            w.RequestPermissionRequest(session_id=SID, tool_call=w.ToolCallFields(tool_call_id="c"), options=[])
        ),
    ),
    "terminal/create": (
        answers.create_terminal,
        w.CreateTerminalResponse,
        lambda e: e.create_terminal(w.CreateTerminalRequest(session_id=SID, command="ls")),
    ),
    "terminal/output": (answers.terminal_output, w.TerminalOutputResponse, lambda e: e.terminal_output(REF)),
    "terminal/wait_for_exit": (
        answers.wait_for_terminal_exit,
        w.WaitForTerminalExitResponse,
        lambda e: e.wait_for_terminal_exit(REF),
    ),
    "terminal/kill": (answers.kill_terminal, w.KillTerminalResponse, lambda e: e.kill_terminal(REF)),
    "terminal/release": (answers.release_terminal, w.ReleaseTerminalResponse, lambda e: e.release_terminal(REF)),
}
calls_and_answers = st.sampled_from(sorted(CALLS)).flatmap(lambda m: st.tuples(st.just(m), ANSWERS[m]))


def test_every_call_has_answers_to_try():
    assert set(CALLS) == set(ANSWERS)


def editor_answering(answer: object, sent: list[tuple[str, Params, float | None]] | None = None) -> PeerEditor:
    async def send(method: str, params: Params, timeout: float | None) -> object:
        if sent is not None:
            sent.append((method, params, timeout))
        return answer

    return PeerEditor(send)


@given(calls_and_answers)
def test_any_answer_decodes_to_its_type_or_to_the_one_error(method_and_answer):
    method, answer = method_and_answer
    decode, kind, call = CALLS[method]
    try:
        decoded = decode(answer)
    except msgspec.ValidationError as exc:
        decoded, invalid = None, str(exc)
    assert decoded is None or isinstance(decoded, kind)
    # The EditorClient: the same answer, or MalformedAnswer with the decoder's reason; the request sent once.
    sent: list[tuple[str, Params, float | None]] = []
    try:
        assert anyio.run(lambda: call(editor_answering(answer, sent))) == decoded
    except MalformedAnswer as exc:
        assert decoded is None and (exc.method, exc.reason) == (method, invalid)
    assert [m for m, _, _ in sent] == [method]


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        ("fs/read_text_file", {"content": "hi", "_meta": {"x": 1}, "extra": 2}, w.ReadTextFileResponse("hi")),
        ("fs/write_text_file", None, w.WriteTextFileResponse()),  # the SDK's clients answer null
        ("fs/write_text_file", {}, w.WriteTextFileResponse()),
        ("terminal/create", {"terminalId": "t1"}, w.CreateTerminalResponse("t1")),
        ("terminal/wait_for_exit", None, w.TerminalExitStatus()),
        ("terminal/wait_for_exit", {"exitCode": 2, "signal": None}, w.TerminalExitStatus(exit_code=2)),
        ("terminal/wait_for_exit", {"exitCode": "2", "signal": ["KILL"]}, w.TerminalExitStatus()),  # read as absent
        ("terminal/wait_for_exit", {"exitCode": True, "signal": 9}, w.TerminalExitStatus(signal=9)),
        ("terminal/kill", None, w.KillTerminalResponse()),
        ("terminal/release", {"_meta": None}, w.ReleaseTerminalResponse()),
        (
            "terminal/output",
            {"output": "o", "truncated": True, "exitStatus": {"signal": "SIGKILL"}},
            w.TerminalOutputResponse("o", True, w.TerminalExitStatus(signal="SIGKILL")),
        ),
        (
            "terminal/output",
            {"output": "o", "truncated": False, "exitStatus": "done"},
            w.TerminalOutputResponse("o", False),
        ),
    ],
)
def test_well_formed_answers_and_the_schema_s_leniencies(method, answer, expected):
    assert CALLS[method][0](answer) == expected


@pytest.mark.parametrize(
    ("method", "answer", "named"),
    [
        ("fs/read_text_file", None, "Expected `object`, got `null`"),
        ("fs/read_text_file", {"text": "hi"}, "missing required field `content`"),
        ("fs/write_text_file", "ok", "Expected `object | null`, got `str`"),
        ("terminal/create", {}, "missing required field `terminalId`"),
        ("terminal/create", {"terminalId": ""}, "length >= 1"),
        ("terminal/create", {"terminalId": 5}, "$.terminalId"),
        ("terminal/output", {"output": "o"}, "missing required field `truncated`"),
        ("terminal/wait_for_exit", [0], "Expected `object | null`, got `array`"),
        ("session/request_permission", {"outcome": {"outcome": "maybe"}}, "$.outcome"),
    ],
)
def test_a_malformed_answer_names_what_is_wrong(method, answer, named):
    with pytest.raises(MalformedAnswer) as caught:
        anyio.run(lambda: CALLS[method][2](editor_answering(answer)))
    assert caught.value.method == method and named in caught.value.reason
    assert str(caught.value).startswith(f"The editor's answer to {method} was not understood: ")


# --- the editor's workspace, with a client whose every terminal answer is drawn ------------------------------------


class Host:
    """The session as the editor's workspace sees it (workspaces.TerminalHost)."""

    id = SID
    cancelled = False

    def __init__(self) -> None:
        self.updates: list[w.SessionUpdate] = []

    @contextmanager
    def graceful(self, timeout: float, grace: float) -> Iterator[anyio.CancelScope]:
        with anyio.CancelScope(shield=True) as scope:
            yield scope

    async def send(self, update: w.SessionUpdate) -> None:
        self.updates.append(update)


GOOD = {
    "terminal/create": {"terminalId": "t1"},
    "terminal/wait_for_exit": {"exitCode": 0},
    "terminal/output": {"output": "hi\n", "truncated": False},
    "terminal/kill": {},
    "terminal/release": {},
}
terminal_answers = st.fixed_dictionaries({m: st.just(good) | ANSWERS[m] for m, good in GOOD.items()})


def run_in_terminal(replies: dict[str, object], fs: bool = False) -> tuple[CommandResult | ToolError, list[str]]:
    asked: list[str] = []

    async def send(method: str, params: Params, timeout: float | None) -> object:
        asked.append(method)
        return replies[method]

    workspace = EditorWorkspace(PeerEditor(send), Host(), fs, fs, True)

    async def main() -> CommandResult | ToolError:
        try:
            return await workspace.run_command("echo hi", "/", 30.0, 1000)
        except ToolError as exc:
            return exc

    return anyio.run(main), asked


@given(terminal_answers)
def test_a_command_in_the_editor_s_terminal_gives_a_result_or_a_tool_error(replies):
    outcome, asked = run_in_terminal(replies)
    assert isinstance(outcome, CommandResult | ToolError)
    created = "terminal/wait_for_exit" in asked  # the terminal/create answer decoded: there is a terminal
    assert asked[-1:] == (["terminal/release"] if created else ["terminal/create"])
    if isinstance(outcome, CommandResult):
        assert isinstance(outcome.output, str) and isinstance(outcome.truncated, bool)


def test_the_output_s_exit_status_wins_and_an_empty_one_falls_back_to_the_wait():
    replies: dict[str, object] = {**GOOD, "terminal/wait_for_exit": {"exitCode": 3}}
    said = {**replies, "terminal/output": {"output": "", "truncated": False, "exitStatus": {"signal": "SIGKILL"}}}
    empty = {**replies, "terminal/output": {"output": "", "truncated": False, "exitStatus": {}}}
    assert run_in_terminal(said)[0] == CommandResult(
        exit_code=None, signal=9, output="", truncated=False, timed_out=False
    )
    assert run_in_terminal(empty)[0] == CommandResult(
        exit_code=3, signal=None, output="", truncated=False, timed_out=False
    )


@pytest.mark.parametrize(("signal", "number"), [("SIGTERM", 15), (9, 9), ("SIGNOPE", -1), ("signal", -1), (None, None)])
def test_a_signal_is_named_or_numbered(signal, number):
    replies = {**GOOD, "terminal/wait_for_exit": {"signal": signal}}
    result = run_in_terminal(replies)[0]
    assert isinstance(result, CommandResult) and result.signal == number


def test_a_read_whose_answer_is_malformed_is_a_tool_error_naming_the_field(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("on disk")

    async def send(method: str, params: Params, timeout: float | None) -> object:
        return {"content": ["not", "text"]}

    workspace = EditorWorkspace(PeerEditor(send), Host(), True, True, False)
    with pytest.raises(ToolError, match=r"fs/read_text_file was not understood: .*\$\.content"):
        anyio.run(lambda: workspace.read_text(str(target)))


@pytest.mark.parametrize(("call_deadline", "create_timeout"), [(None, TERMINAL_CREATE_TIMEOUT), (20.0, 19.0)])
def test_terminal_create_waits_for_a_person_but_never_past_the_call_s_deadline(call_deadline, create_timeout):
    """terminal/create's deadline is long (the client may be asking its person) and separate from the other
    terminal calls' 5 s; inside a tool call's deadline (run_command's timeout + 15 s) it ends before that one."""
    deadlines: dict[str, float | None] = {}

    async def send(method: str, params: Params, timeout: float | None) -> object:
        deadlines[method] = timeout
        return GOOD[method]

    workspace = EditorWorkspace(PeerEditor(send), Host(), False, False, True)

    async def main() -> None:
        with anyio.move_on_after(call_deadline if call_deadline is not None else float("inf")):
            await workspace.run_command("echo hi", "/", 1.0, 1000)

    anyio.run(main)
    assert deadlines["terminal/create"] == create_timeout
    assert deadlines["terminal/output"] == deadlines["terminal/release"] == TERMINAL_TIMEOUT == 5.0
