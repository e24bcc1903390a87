"""The pieces of ama's client transport on their own: the line splitter it shares with the server
(rpc/framing.py), the pending-request table it shares with the server (rpc/pending.py), its own classification
(client/classify.py), the stdout reader (client/reader.py), the violations' bounds, the error family and the
lenient structs of what it shows (client/display/agent_types.py)."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.client import reader as reader_module
from ama_acp.client.classify import AgentNotification, AgentRequest, AgentResponse, classify, well_formed_error
from ama_acp.client.display.agent_types import UNSET, ListedSession, SessionInfo, ToolCall, Usage, lenient
from ama_acp.client.errors import RpcError
from ama_acp.client.reader import NOISE_KEPT, StdoutReader, TranscriptEntry
from ama_acp.client.violations import RAW_KEPT, VIOLATIONS_KEPT, Violations
from ama_acp.rpc.dispatch import JSONValue
from ama_acp.rpc.errors import INTERNAL_ERROR, AcpError
from ama_acp.rpc.framing import HEAD_KEPT, LineSplitter, LineTooLong
from ama_acp.rpc.pending import Pending, PendingRequests
from tests.support.byte_pipe import chunks_of

# --- LineSplitter ---------------------------------------------------------------------------------------------


def split(*chunks: bytes, max_line: int = 64) -> tuple[list[bytes], bytes]:
    splitter = LineSplitter(max_line)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    return lines, splitter.rest()


def test_lines_come_out_as_they_are_blank_and_cr_included() -> None:
    assert split(b"a\r\n\n  \nb", b"c\nd") == ([b"a\r", b"", b"  ", b"bc"], b"d")


def test_a_line_over_the_limit_keeps_only_its_head_after_the_lines_before_it() -> None:
    splitter = LineSplitter(8)
    seen: list[bytes] = []
    with pytest.raises(LineTooLong) as caught:
        for chunk in (b"ok\nabcd", b"efghijkl\nafter\n"):
            seen += splitter.feed(chunk)
    assert seen == [b"ok"]
    assert caught.value.head == b"abcdefghijkl"
    assert splitter.rest() == b""  # nothing is kept of it


def test_an_unfinished_line_over_the_limit_is_refused_and_its_head_is_bounded() -> None:
    splitter = LineSplitter(HEAD_KEPT * 2)
    with pytest.raises(LineTooLong) as caught:
        list(splitter.feed(b"x" * (HEAD_KEPT * 3)))
    assert caught.value.head == b"x" * HEAD_KEPT


# --- PendingRequests ----------------------------------------------------------------------------------------------


def test_ids_count_from_one_and_only_an_int_names_one() -> None:
    table = PendingRequests(Pending)
    first, second = table.open("a"), table.open("b")
    assert (first.id, second.id) == (1, 2)
    assert table.find(1) is first and table.find(True) is None and table.find(1.0) is None and table.find("1") is None
    table.close(first)
    assert table.find(1) is None and list(table) == [second]


def test_the_first_answer_counts_and_failing_all_spares_the_answered() -> None:
    table = PendingRequests(Pending)
    answered, waiting = table.open("a"), table.open("b")
    assert answered.resolve({"ok": True}) and not answered.resolve(error=RuntimeError("late"))
    table.fail_all(lambda p: RuntimeError(f"closed before {p.method}"))
    assert answered.result == {"ok": True} and answered.error is None
    assert waiting.done and str(waiting.error) == "closed before b"


# --- classify -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "problems"),
    [
        ([1], ["a stdout line is JSON but not a JSON-RPC object"]),
        ({"jsonrpc": "2.0", "method": 5}, ["`method` is not a string"]),
        ({"jsonrpc": "2.0", "id": 1}, ["neither a request, a notification nor a response"]),
        (
            {"id": 1, "result": 1, "error": {}},
            ['missing or wrong "jsonrpc": "2.0"', "a response carries both result and error"],
        ),
    ],
)
def test_what_breaks_json_rpc_is_a_problem_not_an_exception(message: JSONValue, problems: list[str]) -> None:
    assert classify(message).problems == problems


def test_requests_notifications_and_responses() -> None:
    assert classify({"jsonrpc": "2.0", "id": "x", "method": "m"}).message == AgentRequest("x", "m", None)
    assert classify({"jsonrpc": "2.0", "method": "n", "params": [1]}).message == AgentNotification("n", {})
    both = classify({"jsonrpc": "2.0", "id": 3, "result": 1, "error": {"code": 1, "message": "m"}}).message
    assert both == AgentResponse(3, 1, {"code": 1, "message": "m"}, True)
    assert well_formed_error({"code": 1, "message": "m"}) and not well_formed_error({"code": "1", "message": "m"})


# --- the error family ---------------------------------------------------------------------------------------------


def test_rpc_error_is_the_servers_acp_error_shown_with_its_code() -> None:
    err = RpcError(-32602, "bad", {"why": 1})
    assert isinstance(err, AcpError) and str(err) == "bad (-32602)"
    assert err.to_dict() == {"code": -32602, "message": "bad", "data": {"why": 1}}
    odd = RpcError.from_answer({"code": "x", "message": 5})
    assert (odd.code, odd.message, odd.data) == (INTERNAL_ERROR, "5", None)
    assert RpcError.from_answer("junk").code == INTERNAL_ERROR


# --- the reader and the violations --------------------------------------------------------------------------------


def test_violations_of_a_kind_are_bounded_and_counted() -> None:
    seen = Violations()
    for i in range(VIOLATIONS_KEPT + 5):
        seen.record("k", f"n{i}", "x" * (RAW_KEPT + 1))
    assert len(seen.of("k")) == VIOLATIONS_KEPT + 1
    assert seen.items[0].raw is not None and seen.items[0].raw.endswith(f"… ({RAW_KEPT + 1} chars)")
    assert seen.items[-1].detail == "5 more like the above (not kept)"


def read(*chunks: bytes, max_line: int = 1 << 16) -> tuple[list[JSONValue], Violations, list[TranscriptEntry], bool]:
    messages: list[JSONValue] = []
    seen = Violations()
    transcript: list[TranscriptEntry] = []
    stopped: list[bool] = []

    def on_message(message: JSONValue, raw: str) -> bool:
        messages.append(message)
        return isinstance(message, dict) and message != {}  # `{}` stands for JSON that is no message

    reader = StdoutReader(max_line, transcript, seen.record, lambda raw: None, on_message, lambda: None)

    async def go() -> None:
        await reader.read(await chunks_of(*chunks), lambda: stopped.append(True))

    anyio.run(go)
    return messages, seen, transcript, bool(stopped)


def test_the_reader_reports_bad_bytes_noise_and_an_unterminated_last_line() -> None:
    messages, seen, transcript, stopped = read(b'{"a": 1}\r\n\xff\n\nnot json\n{"b"', b": 2}")
    assert messages == [{"a": 1}, {"b": 2}] and not stopped
    assert [v.kind for v in seen.items] == ["invalid_utf8", "non_json_stdout", "non_json_stdout", "unterminated_line"]
    assert [e.raw for e in transcript] == ['{"a": 1}', "\ufffd", "", "not json", '{"b": 2}']


def test_the_reader_ends_at_a_line_over_its_cap() -> None:
    messages, seen, transcript, stopped = read(b'{"a": 1}\n' + b"y" * 5000 + b"\n{}\n", max_line=100)
    assert messages == [{"a": 1}] and stopped
    [too_long] = seen.of("line_too_long")
    assert too_long.raw == "y" * RAW_KEPT and "100 bytes" in too_long.detail
    assert NOISE_KEPT == 1000


@pytest.mark.parametrize(
    ("noise", "max_lines", "max_bytes", "said"),
    [
        (b"not json\n", 10, 10**9, "10 stdout lines (90 bytes) in a row"),
        (b"\n", 10, 10**9, "10 stdout lines (10 bytes) in a row"),  # blank lines carry no message either
        (b"{}\n", 10, 10**9, "10 stdout lines (30 bytes) in a row"),  # nor JSON that is no message
        (b"z" * 99 + b"\n", 10**6, 1000, "10 stdout lines (1000 bytes) in a row"),  # long lines: the byte bound
    ],
)
def test_the_reader_ends_a_flood_of_lines_without_a_message(
    monkeypatch: pytest.MonkeyPatch, noise: bytes, max_lines: int, max_bytes: int, said: str
) -> None:
    monkeypatch.setattr(reader_module, "MAX_NOISE_LINES", max_lines)
    monkeypatch.setattr(reader_module, "MAX_NOISE_BYTES", max_bytes)
    messages, seen, _, stopped = read(noise * 20 + b'{"a": 1}\n')
    [flood] = seen.of("stdout_flood")
    assert stopped and {"a": 1} not in messages  # nothing after the flood is read
    assert flood.detail.startswith(said) and "the connection was ended" in flood.detail


def test_a_message_between_resets_the_run_of_lines_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_module, "MAX_NOISE_LINES", 10)
    messages, seen, _, stopped = read((b"not json\n" * 9 + b'{"a": 1}\n') * 5)
    assert not stopped and not seen.of("stdout_flood") and len(messages) == 5


# --- lenient structs ----------------------------------------------------------------------------------------------


def test_a_member_of_the_wrong_type_reads_as_missing_and_the_others_stay() -> None:
    usage = lenient(Usage, {"used": True, "size": 10**400, "cost": "x", "other": 1})
    assert (usage.used, usage.size, usage.cost) == (None, 10**400, "x")
    listed = lenient(ListedSession, {"sessionId": "s", "title": 5, "cwd": "/w"})
    assert (listed.session_id, listed.title, listed.cwd) == ("s", None, "/w")
    assert lenient(ToolCall, [1]) == ToolCall()
    assert lenient(SessionInfo, {}).title is UNSET and lenient(SessionInfo, {"title": None}).title is None


@given(st.lists(st.sampled_from([b"not json", b"", b"{}", b"[1]", b'{"jsonrpc": "2.0", "method": "m"}']), max_size=40))
def test_the_reader_ends_exactly_at_the_first_run_of_lines_without_a_message_that_reaches_the_bound(
    lines: list[bytes],
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader_module, "MAX_NOISE_LINES", 5)
        messages, seen, _, stopped = read(b"".join(line + b"\n" for line in lines))
    run, flood_at = 0, None
    for i, line in enumerate(lines):
        run = 0 if line.startswith(b'{"jsonrpc"') else run + 1
        if run == 5:
            flood_at = i
            break
    assert stopped == (flood_at is not None) and len(seen.of("stdout_flood")) == (flood_at is not None)
    read_lines = lines if flood_at is None else lines[: flood_at + 1]  # nothing after the flood is taken
    assert len(messages) == sum(1 for line in read_lines if line.startswith((b"{", b"[")))
