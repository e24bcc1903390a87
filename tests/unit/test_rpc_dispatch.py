"""rpc/dispatch.py: every envelope classified into one typed value, the method table, and `defer`.

`classify` is checked directly on decoded values; what the peer writes for each case (the id, the code, nothing
for a notification) is checked through a real Peer on in-process byte pipes (tests/support/byte_pipe.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import msgspec
import pytest

from ama_acp.rpc.dispatch import (
    MAX_DEPTH,
    Dispatcher,
    Invalid,
    JSONValue,
    Notification,
    Request,
    Response,
    classify,
    classify_too_deep,
    defer,
    is_request_id,
    too_deep,
)
from ama_acp.rpc.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNEXPECTED,
    AcpError,
)
from ama_acp.rpc.framing import read_lines
from ama_acp.rpc.peer import Peer
from tests.support.byte_pipe import byte_pipe

STEP = 10.0  # seconds any one step may take; they take milliseconds


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# --- classify: requests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rid", ["abc", "", 0, 7, -1, 2**63 - 1, -(2**63), None])
def test_a_request_keeps_its_id_of_any_valid_type(rid):
    got = classify({"jsonrpc": "2.0", "id": rid, "method": "m", "params": {"a": 1}})
    assert got == Request(rid, "m", {"a": 1})
    assert type(got.id) is type(rid)  # "1" stays a string, 1 an int (never coerced)


def test_absent_params_mean_an_empty_object():
    assert classify({"jsonrpc": "2.0", "id": 1, "method": "m"}) == Request(1, "m", {})


@pytest.mark.parametrize("rid", [1.5, 1.0, True, False, [1], {"a": 1}, [], {}, 2**63, -(2**63) - 1, 2**70])
def test_a_method_with_an_unusable_id_is_invalid_with_id_null(rid):
    got = classify({"jsonrpc": "2.0", "id": rid, "method": "m", "params": {}})
    assert isinstance(got, Invalid) and got.id is None and got.error.code == INVALID_REQUEST


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"jsonrpc": "2.0", "id": 4, "method": 42}, INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 4, "method": None}, INVALID_REQUEST),
        ({"jsonrpc": "1.0", "id": 4, "method": "m"}, INVALID_REQUEST),
        ({"id": 4, "method": "m"}, INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 4, "method": "m", "params": None}, INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 4, "method": "m", "params": "x"}, INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 4, "method": "m", "params": 3}, INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 4, "method": "m", "params": True}, INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 4, "method": "m", "params": [1, 2]}, INVALID_PARAMS),
    ],
)
def test_a_broken_request_is_invalid_with_its_own_id(message, code):
    got = classify(message)
    assert isinstance(got, Invalid) and got.id == 4 and got.error.code == code


@pytest.mark.parametrize("message", [[], [{"jsonrpc": "2.0", "id": 1, "method": "m"}], "x", 1, None, True])
def test_a_batch_or_a_non_object_is_invalid_with_id_null(message):
    got = classify(message)
    assert isinstance(got, Invalid) and got.id is None and got.error.code == INVALID_REQUEST


def test_an_object_that_is_neither_request_nor_response_is_invalid_with_id_null():
    got = classify({"jsonrpc": "2.0"})
    assert isinstance(got, Invalid) and got.id is None and got.error.code == INVALID_REQUEST


# --- classify: notifications ------------------------------------------------------------------------------


def test_a_notification_carries_its_params():
    assert classify({"jsonrpc": "2.0", "method": "n", "params": {"x": 1}}) == Notification("n", {"x": 1})
    assert classify({"jsonrpc": "2.0", "method": "n"}) == Notification("n", {})


@pytest.mark.parametrize("params", [None, [1], "x", 2, False])
def test_a_notification_with_params_that_are_not_an_object_is_unusable(params):
    assert classify({"jsonrpc": "2.0", "method": "n", "params": params}) == Notification("n", None)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": 42},
        {"jsonrpc": "2.0", "method": None, "params": {}},
        {"jsonrpc": "1.0", "method": "n", "params": {}},
        {"method": "n"},
    ],
)
def test_a_broken_notification_is_an_unusable_notification_never_answered(message):
    """R13: no id, no answer, however broken; `params` None makes the peer drop it without running anything."""
    got = classify(message)
    assert isinstance(got, Notification) and got.params is None


# --- classify: responses ----------------------------------------------------------------------------------


@pytest.mark.parametrize("rid", [1, "1", None, 1.5, True, [1], {"a": 1}, 2**70])
def test_a_message_without_method_but_with_an_id_is_a_response_whatever_its_id(rid):
    assert classify({"jsonrpc": "2.0", "id": rid, "result": {"ok": 1}}) == Response(rid, result={"ok": 1})


def test_a_response_result_of_any_json_type_is_kept():
    results: tuple[JSONValue, ...] = (None, 0, "s", [1], {"a": [1]})
    for result in results:
        assert classify({"jsonrpc": "2.0", "id": 3, "result": result}) == Response(3, result=result)


def test_an_error_response_becomes_a_client_error():
    got = classify({"jsonrpc": "2.0", "id": 3, "error": {"code": -32001, "message": "no", "data": {"k": 1}}})
    assert isinstance(got, Response) and got.id == 3 and got.error is not None
    assert (got.error.code, got.error.wire_message, got.error.data) == (-32001, "no", {"k": 1})


@pytest.mark.parametrize("error", ["boom", 7, [1], {"message": 5}, {"code": "x"}])
def test_a_malformed_error_object_is_still_an_error(error):
    got = classify({"jsonrpc": "2.0", "id": 3, "error": error})
    assert isinstance(got, Response) and got.error is not None and type(got.error.code) is int


def test_a_response_with_neither_result_nor_error_is_an_error_for_that_id():
    got = classify({"jsonrpc": "2.0", "id": 3})
    assert isinstance(got, Response) and got.id == 3 and got.error is not None
    assert got.error.code == INVALID_REQUEST


def test_a_result_or_error_without_an_id_matches_nothing():
    for message in ({"jsonrpc": "2.0", "result": 1}, {"jsonrpc": "2.0", "error": {"code": 1, "message": "x"}}):
        got = classify(message)
        assert isinstance(got, Response) and got.id is None and got.error is not None


# --- classify: depth ---------------------------------------------------------------------------------------


def test_too_deep_counts_the_top_level_as_one():
    assert not too_deep(nested(MAX_DEPTH - 1, {}))  # MAX_DEPTH containers
    assert too_deep(nested(MAX_DEPTH, {}))  # one more
    assert not too_deep("scalar") and not too_deep({}) and not too_deep([])


def test_too_deep_survives_what_would_overflow_recursion():
    assert too_deep(nested(100_000))


def test_a_deep_request_is_invalid_with_its_id_kept():
    got = classify({"jsonrpc": "2.0", "id": "deep-1", "method": "m", "params": {"x": nested(MAX_DEPTH)}})
    assert isinstance(got, Invalid) and got.id == "deep-1" and got.error.code == INVALID_REQUEST
    assert str(MAX_DEPTH) in got.error.message


def test_a_request_just_under_the_depth_cap_is_a_request():
    params = {"x": nested(MAX_DEPTH - 3)}  # message, params, x: the cap exactly
    assert not too_deep({"params": params})
    assert classify({"jsonrpc": "2.0", "id": 1, "method": "m", "params": params}) == Request(1, "m", params)


def test_a_deep_notification_is_unusable_and_a_deep_response_an_error_for_its_id():
    assert classify({"jsonrpc": "2.0", "method": "n", "params": {"x": nested(MAX_DEPTH)}}) == Notification("n", None)
    got = classify({"jsonrpc": "2.0", "id": 9, "result": nested(MAX_DEPTH)})
    assert isinstance(got, Response) and got.id == 9 and got.error is not None


def test_a_line_too_deep_for_the_decoder_keeps_the_request_id():
    line = b'{"jsonrpc":"2.0","id":17,"method":"m","params":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    got = classify_too_deep(line)
    assert isinstance(got, Invalid) and got.id == 17 and got.error.code == INVALID_REQUEST


def test_a_line_too_deep_for_the_decoder_finds_an_id_after_the_deep_member():
    line = b'{"params":' + b"[" * 5000 + b"]" * 5000 + b',"method":"m","id":"late","jsonrpc":"2.0"}'
    got = classify_too_deep(line)
    assert isinstance(got, Invalid) and got.id == "late"


def test_a_too_deep_notification_line_is_unusable_and_a_response_line_matches_its_id():
    note = b'{"jsonrpc":"2.0","method":"n","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert classify_too_deep(note) == Notification("", None)
    response = b'{"jsonrpc":"2.0","id":5,"result":' + b"[" * 5000 + b"]" * 5000 + b"}"
    got = classify_too_deep(response)
    assert isinstance(got, Response) and got.id == 5 and got.error is not None


def test_a_too_deep_line_with_an_unusable_id_is_invalid_with_id_null():
    line = b'{"jsonrpc":"2.0","id":[1],"method":"m","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
    got = classify_too_deep(line)
    assert isinstance(got, Invalid) and got.id is None


def test_is_request_id_keeps_out_bools_and_floats():
    assert is_request_id("x") and is_request_id(0) and is_request_id(2**63 - 1)
    odd: tuple[object, ...] = (True, False, 1.0, None, [1], {}, 2**63)
    assert not any(is_request_id(v) for v in odd)


# --- the method table ---------------------------------------------------------------------------------------


class Greet(msgspec.Struct, rename="camel", frozen=True):
    user_name: str
    times: int = 1


async def _greet(req: Greet) -> dict[str, Any]:
    return {"text": " ".join([f"hi {req.user_name}"] * req.times)}


async def _nothing(_params: dict[str, Any]) -> None:
    return None


def _table() -> Dispatcher:
    d = Dispatcher()
    d.add("greet", Greet, _greet)
    d.add("raw", None, _echo)
    d.add("nothing", None, _nothing)
    d.add("note", None, _nothing, notification=True)
    return d


async def _echo(params: dict[str, Any]) -> dict[str, Any]:
    return {"got": params}


@pytest.mark.anyio
async def test_call_decodes_params_into_the_methods_struct():
    assert await _table().call("greet", {"userName": "ann", "times": 2}) == {"text": "hi ann hi ann"}


@pytest.mark.anyio
async def test_call_without_a_params_type_passes_the_object_as_decoded():
    assert await _table().call("raw", {"a": [1, {"b": None}]}) == {"got": {"a": [1, {"b": None}]}}


@pytest.mark.anyio
async def test_a_handler_returning_none_answers_an_empty_object():
    assert await _table().call("nothing", {}) == {}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("params", "field"),
    [({}, "userName"), ({"userName": 5}, "userName"), ({"userName": "a", "times": "2"}, "times")],
)
async def test_params_that_break_the_struct_are_invalid_params_naming_the_field(params, field):
    with pytest.raises(AcpError) as caught:
        await _table().call("greet", params)
    assert caught.value.code == INVALID_PARAMS and field in caught.value.message
    assert caught.value.data == {"method": "greet"}


@pytest.mark.anyio
async def test_an_unknown_method_is_method_not_found_naming_it():
    with pytest.raises(AcpError) as caught:
        await _table().call("nope/x", {})
    assert caught.value.code == METHOD_NOT_FOUND and caught.value.data == {"method": "nope/x"}


@pytest.mark.anyio
async def test_a_request_method_called_as_a_notification_and_back_is_method_not_found():
    with pytest.raises(AcpError) as as_note:
        await _table().call("raw", {}, notification=True)
    with pytest.raises(AcpError) as as_request:
        await _table().call("note", {})
    assert as_note.value.code == as_request.value.code == METHOD_NOT_FOUND
    assert "request" in as_note.value.message and "notification" in as_request.value.message


def test_has_tells_requests_from_notifications():
    d = _table()
    assert d.has("note", notification=True) and not d.has("note")
    assert d.has("raw") and not d.has("raw", notification=True)
    assert not d.has("unknown") and not d.has("unknown", notification=True)


@pytest.mark.anyio
@pytest.mark.allow_traceback  # the handler's bug is logged with its traceback on purpose
async def test_a_handler_exception_is_an_internal_error_and_logged_with_its_traceback(caplog):
    async def broken(_params: dict[str, Any]) -> None:
        raise KeyError("the bug")

    d = Dispatcher()
    d.add("broken", None, broken)
    with caplog.at_level(logging.ERROR), pytest.raises(AcpError) as caught:
        await d.call("broken", {})
    assert caught.value.code == INTERNAL_ERROR and "KeyError" in caught.value.message
    logged = [r for r in caplog.records if r.getMessage().startswith(UNEXPECTED)]
    assert len(logged) == 1 and logged[0].exc_info and "broken" in logged[0].getMessage()


@pytest.mark.anyio
async def test_an_acp_error_from_a_handler_passes_unchanged(caplog):
    async def refuses(_params: dict[str, Any]) -> None:
        raise AcpError(-32002, "Session not found: x", {"sessionId": "x"})

    d = Dispatcher()
    d.add("refuses", None, refuses)
    with pytest.raises(AcpError) as caught:
        await d.call("refuses", {})
    assert (caught.value.code, caught.value.data) == (-32002, {"sessionId": "x"})
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# --- through a Peer: who gets answered, with what id, and what runs after ---------------------------------


class Wire:
    """A Peer on in-process byte pipes: the test is the client."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._to_peer, peer_in = byte_pipe()
        peer_out, self._from_peer = byte_pipe()
        self.peer = Peer(peer_in, peer_out, dispatcher)
        self._lines: AsyncIterator[bytes] = read_lines(self._from_peer)

    async def send(self, message: Any) -> None:
        await self._to_peer.send(message if isinstance(message, bytes) else msgspec.json.encode(message) + b"\n")

    async def recv(self) -> dict[str, Any]:
        with anyio.fail_after(STEP):
            return msgspec.json.decode(await self._lines.__anext__(), type=dict[str, Any])

    async def close(self) -> None:
        await self._to_peer.aclose()


async def _served(dispatcher: Dispatcher, lines: list[Any]) -> list[dict[str, Any]]:
    """Every line the peer writes for `lines`, up to its answer to a probe request sent after them."""
    dispatcher.add("probe", None, _nothing)
    wire = Wire(dispatcher)
    async with anyio.create_task_group() as tg:
        tg.start_soon(wire.peer.run)
        for line in lines:
            await wire.send(line)
        await wire.send({"jsonrpc": "2.0", "id": "probe", "method": "probe"})
        written = [await wire.recv()]
        while written[-1].get("id") != "probe":
            written.append(await wire.recv())
        await wire.close()
    return written[:-1]


@pytest.mark.anyio
async def test_invalid_params_are_answered_with_the_request_id_and_the_named_code():
    written = await _served(_table(), [{"jsonrpc": "2.0", "id": "r-1", "method": "greet", "params": {"times": 1}}])
    assert len(written) == 1 and written[0]["id"] == "r-1"
    assert written[0]["error"]["code"] == INVALID_PARAMS and "userName" in written[0]["error"]["message"]


@pytest.mark.anyio
async def test_an_unknown_method_is_answered_method_not_found_with_its_id():
    written = await _served(_table(), [{"jsonrpc": "2.0", "id": 12, "method": "no/such", "params": {}}])
    assert [(w["id"], w["error"]["code"]) for w in written] == [(12, METHOD_NOT_FOUND)]


@pytest.mark.anyio
@pytest.mark.allow_traceback  # a notification handler's bug is logged with its traceback
async def test_notification_errors_are_never_answered():
    async def broken(_params: dict[str, Any]) -> None:
        raise RuntimeError("a bug in a notification handler")

    d = _table()
    d.add("broken-note", None, broken, notification=True)
    d.add("greet-note", Greet, _greet, notification=True)
    lines = [
        {"jsonrpc": "2.0", "method": "unknown/note", "params": {}},  # unknown
        {"jsonrpc": "2.0", "method": "greet-note", "params": {"userName": 5}},  # invalid params
        {"jsonrpc": "2.0", "method": "broken-note", "params": {}},  # the handler raises
        {"jsonrpc": "2.0", "method": "raw", "params": {}},  # a request method sent as a notification
        {"jsonrpc": "2.0", "method": "note", "params": [1]},  # params not an object
        {"jsonrpc": "2.0", "method": 42},  # a method that is not a string
        {"jsonrpc": "1.0", "method": "note", "params": {}},  # not JSON-RPC 2.0
        {"method": "note"},
    ]
    assert await _served(d, lines) == []


@pytest.mark.anyio
@pytest.mark.allow_traceback  # the handler's bug is logged with its traceback on purpose
async def test_a_handler_exception_is_answered_internal_error_with_the_id():
    async def broken(_params: dict[str, Any]) -> None:
        raise ZeroDivisionError("the bug")

    d = Dispatcher()
    d.add("broken", None, broken)
    written = await _served(d, [{"jsonrpc": "2.0", "id": 3, "method": "broken", "params": {}}])
    assert len(written) == 1 and written[0]["id"] == 3
    assert written[0]["error"]["code"] == INTERNAL_ERROR and "ZeroDivisionError" in written[0]["error"]["message"]


@pytest.mark.anyio
async def test_deferred_work_runs_after_the_response_in_the_order_deferred():
    d = Dispatcher()
    wire_box: list[Wire] = []

    def notify_after(n: int) -> Callable[[], Awaitable[None]]:
        return lambda: wire_box[0].peer.notify("after", {"n": n})

    async def handler(_params: dict[str, Any]) -> dict[str, Any]:
        for n in (1, 2, 3):
            defer(notify_after(n))
        return {"done": True}

    d.add("work", None, handler)
    d.add("probe", None, _nothing)
    wire = Wire(d)
    wire_box.append(wire)
    async with anyio.create_task_group() as tg:
        tg.start_soon(wire.peer.run)
        await wire.send({"jsonrpc": "2.0", "id": 1, "method": "work", "params": {}})
        written = [await wire.recv() for _ in range(4)]
        await wire.close()
    assert written[0] == {"jsonrpc": "2.0", "id": 1, "result": {"done": True}}
    assert [w["params"]["n"] for w in written[1:]] == [1, 2, 3]


@pytest.mark.anyio
async def test_deferred_work_of_a_failed_request_never_runs():
    ran: list[str] = []

    async def handler(_params: dict[str, Any]) -> None:
        async def after() -> None:
            ran.append("after")

        defer(after)
        raise AcpError(INVALID_PARAMS, "Invalid params: no")

    d = Dispatcher()
    d.add("fails", None, handler)
    written = await _served(d, [{"jsonrpc": "2.0", "id": 1, "method": "fails", "params": {}}])
    assert [w["error"]["code"] for w in written] == [INVALID_PARAMS]
    assert ran == []


def test_defer_outside_a_request_is_an_error():
    async def nothing() -> None:
        return None

    with pytest.raises(LookupError):
        defer(nothing)
