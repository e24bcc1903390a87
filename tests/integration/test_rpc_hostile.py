"""The JSON-RPC boundary under hostile input: every measured way to end the process, lose an id or make noise.

Most tests drive ama's server line by line (RawAma: in-process, the command's start-up code and `serve` behind
in-memory pipes; AMA_TEST_PROCESSES=1 makes it the real `ama --mode acp`); the last ones run a bare Peer on real
os.pipe() file descriptors (the same FdReceiveStream/FdSendStream as stdio) where only a custom handler can
provoke the case (a result that cannot be encoded, ama's own timeout on a client request).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from ama_acp.rpc.dispatch import Dispatcher, defer
from ama_acp.rpc.errors import UNEXPECTED, ClientError
from ama_acp.rpc.framing import read_lines
from ama_acp.rpc.peer import Peer
from ama_acp.rpc.stdio import FdReceiveStream, FdSendStream
from tests.support.harness import Ama, write_script
from tests.support.raw import RawAma

STEP = 10.0  # seconds any one protocol step may take; they take milliseconds


@pytest.fixture
def server(tmp_path):
    ama = Ama(tmp_path)
    raw = RawAma(ama, "--model", "scripted/demo")
    assert raw.request(1, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    yield raw, ama
    if raw.alive():
        assert raw.close() == 0
    assert_clean_logs(ama)


def assert_clean_logs(ama: Ama) -> None:
    text = ama.stderr.read_text(encoding="utf-8", errors="replace") + ama.log_text()
    assert UNEXPECTED not in text
    assert "Traceback" not in text


def only_the_sentinel(raw: RawAma, sentinel: int) -> None:
    """Nothing was written for what came before: the next line is the answer to a fresh request."""
    raw.send({"jsonrpc": "2.0", "id": sentinel, "method": "initialize", "params": {"protocolVersion": 1}})
    seen = raw.until(sentinel)
    assert len(seen) == 1, seen
    assert seen[0]["result"]["protocolVersion"] == 1
    assert raw.alive()


# --- 1. responses and $/cancel_request with ids of any JSON type ---------------------------------------------

ANY_IDS = [[1], {"a": 1}, [], {}, 1.5, 1.0, True, False, None, "zz", 2**70, -1, 424242]


@pytest.mark.parametrize("rid", ANY_IDS, ids=repr)
def test_responses_with_any_id_are_ignored_quietly(server, rid):
    raw, ama = server
    raw.send({"jsonrpc": "2.0", "id": rid, "result": {"x": [1, 2]}})
    raw.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "no"}})
    raw.send({"jsonrpc": "2.0", "id": rid, "error": [1, 2]})
    raw.send({"jsonrpc": "2.0", "id": rid})  # neither result nor error
    only_the_sentinel(raw, 900)
    assert "WARNING" not in ama.stderr.read_text()


@pytest.mark.parametrize("rid", ANY_IDS, ids=repr)
def test_cancel_request_with_any_request_id_is_tolerated_silently(server, rid):
    raw, ama = server
    raw.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rid}})
    only_the_sentinel(raw, 901)
    assert "WARNING" not in ama.stderr.read_text()


@pytest.mark.parametrize("params", [None, [], "x", 5, {}, {"requestId": [1]}, {"other": 1}], ids=repr)
def test_malformed_cancel_request_params_are_tolerated_silently(server, params):
    raw, _ = server
    raw.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": params})
    only_the_sentinel(raw, 902)


# --- 2. deep nesting -----------------------------------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [200, 900, 1000, 100_000, 2_000_000])
def test_deep_nesting_is_refused_with_the_id_and_the_server_keeps_serving(server, depth):
    raw, _ = server
    raw.methods[41] = raw.methods["late-id"] = "session/new"
    raw.send_line(b'{"jsonrpc":"2.0","id":41,"method":"session/new","params":{"cwd":' + nested(depth) + b"}}")
    err = raw.until(41)[-1]["error"]
    assert err["code"] == -32600 and "nest" in err["message"]
    # The id may come after the deep part.
    raw.send_line(b'{"jsonrpc":"2.0","method":"session/new","params":' + nested(depth) + b',"id":"late-id"}')
    assert raw.until("late-id")[-1]["error"]["code"] == -32600
    # A deep notification gets no answer; deep junk with no id gets one with id null.
    raw.send_line(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":' + nested(depth) + b"}}")
    raw.send_line(nested(depth))
    junk = raw.recv()
    assert junk["id"] is None and junk["error"]["code"] in (-32600, -32700)
    only_the_sentinel(raw, 903)


def test_deep_nesting_in_a_response_to_an_unknown_id_is_ignored(server):
    raw, _ = server
    raw.send_line(b'{"jsonrpc":"2.0","id":77,"result":' + nested(5000) + b"}")
    only_the_sentinel(raw, 904)


# --- 3. params that are not an object ------------------------------------------------------------------------


@pytest.mark.parametrize("params", [None, "x", 5, True, 1.5, [], [1, 2]], ids=repr)
def test_params_that_are_not_an_object_are_answered_with_the_request_id(server, params):
    raw, _ = server
    for req_id in (51, "str-id-52"):
        err = raw.request(req_id, "session/new", params)
        assert err["id"] == req_id and type(err["id"]) is type(req_id)
        assert err["error"]["code"] in (-32600, -32602) and "params" in err["error"]["message"]
    only_the_sentinel(raw, 905)


def test_absent_params_mean_an_empty_object(server):
    raw, _ = server
    raw.methods[53] = "session/list"
    raw.send({"jsonrpc": "2.0", "id": 53, "method": "session/list"})
    assert raw.until(53)[-1]["result"]["sessions"] == []


def test_invalid_ids_on_requests_are_answered_with_null(server):
    raw, _ = server
    raw.validate = False  # answers to ids the schema cannot name are checked by hand
    for bad in ([1], {"a": 1}, 1.5, True, 2**70):
        raw.send({"jsonrpc": "2.0", "id": bad, "method": "initialize", "params": {"protocolVersion": 1}})
        err = raw.recv()
        assert err["id"] is None and err["error"]["code"] == -32600 and "id" in err["error"]["message"]
    raw.validate = True
    only_the_sentinel(raw, 906)


def test_batches_are_refused_in_one_error(server):
    raw, _ = server
    raw.send([{"jsonrpc": "2.0", "id": 60, "method": "initialize", "params": {"protocolVersion": 1}}])
    err = raw.recv()
    assert err["id"] is None and err["error"]["code"] == -32600 and "batch" in err["error"]["message"]
    only_the_sentinel(raw, 907)


# --- 4, 5, 6. abandoned client requests, late answers, $/cancel_request, client errors ----------------------


def start_reading_turn(tmp_path: Path) -> tuple[Ama, RawAma, str, dict[str, Any]]:
    """A turn whose read_file goes through the editor (fs/read_text_file): returns ama's request to us."""
    ama = Ama(tmp_path)
    (ama.workspace / "f.txt").write_text("on disk\n", encoding="utf-8")
    script = write_script(
        tmp_path / "read.json",
        [
            {"tool_calls": [{"id": "t1", "name": "read_file", "arguments": {"path": "f.txt"}}]},
            {"text": "done"},
        ],
    )
    raw = RawAma(ama, "--model", "scripted/read", env={"AMA_SCRIPT": str(script)})
    caps = {"fs": {"readTextFile": True, "writeTextFile": False}, "terminal": False}
    raw.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "read it"}]},
        }
    )
    while True:
        msg = raw.recv(STEP)
        if msg.get("method") == "fs/read_text_file":
            return ama, raw, sid, msg


def test_after_session_cancel_no_cancel_notice_and_the_late_answer_is_accepted_quietly(tmp_path):
    ama, raw, sid, fs_request = start_reading_turn(tmp_path)
    raw.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    seen = raw.until(3, STEP)
    assert seen[-1]["result"]["stopReason"] == "cancelled"
    assert not [m for m in seen if m.get("method") == "$/cancel_request"]  # the client already knows
    # The client answers anyway, as the protocol says it must: accepted without a warning.
    raw.send({"jsonrpc": "2.0", "id": fs_request["id"], "result": {"content": "late"}})
    only_the_sentinel(raw, 908)
    assert raw.close() == 0
    stderr = ama.stderr.read_text()
    assert "WARNING" not in stderr, stderr
    assert_clean_logs(ama)


def test_a_client_error_reaches_the_tool_result_with_the_clients_message(tmp_path):
    ama, raw, sid, fs_request = start_reading_turn(tmp_path)
    # What the official Python SDK sends when its handler raises: the text is in data.details.
    error = {"code": -32603, "message": "Internal error", "data": {"details": "Path is outside allowed cwd subtree"}}
    raw.send({"jsonrpc": "2.0", "id": fs_request["id"], "error": error})
    seen = raw.until(3, STEP)
    assert seen[-1]["result"]["stopReason"] == "end_turn"
    failed = [
        m["params"]["update"]
        for m in seen
        if m.get("method") == "session/update" and m["params"]["update"].get("status") == "failed"
    ]
    assert failed and "Path is outside allowed cwd subtree" in json.dumps(failed)
    assert raw.close() == 0
    assert_clean_logs(ama)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {"code": -32603, "message": "Internal error", "data": {"details": "Path is outside"}},
            "Path is outside (-32603)",
        ),
        ({"code": -32002, "message": "Resource not found", "data": {"uri": "/x"}}, "Resource not found (-32002)"),
        ({"code": -32602, "message": "Invalid params", "data": "line must be >= 1"}, "line must be >= 1 (-32602)"),
        ({"code": 1, "message": "Editor refused: read-only buffer"}, "Editor refused: read-only buffer (1)"),
        (
            {"code": -32603, "message": "Write failed", "data": {"details": "disk full"}},
            "Write failed: disk full (-32603)",
        ),
        ({"code": "x", "message": 5}, "the client answered with an error and no message (-32603)"),
        ([1, 2], "the client answered with a malformed error (-32603)"),
    ],
)
def test_client_error_renders_as_the_clients_message(error, expected):
    assert str(ClientError.from_wire(error)) == expected


def test_client_error_text_is_one_short_line():
    text = str(ClientError.from_wire({"code": -1, "message": "a\nb" + "x" * 5000}))
    assert "\n" not in text and len(text) < 600


# --- 7, 8. in-process: a Peer on real pipes with handlers that misbehave -------------------------------------


class PipePeer:
    """A Peer serving on os.pipe() fds; the test writes lines in and reads the lines it writes out."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._in_r, self._in_w = os.pipe()
        self._out_r, self._out_w = os.pipe()
        self.peer = Peer(FdReceiveStream(self._in_r), FdSendStream(self._out_w), dispatcher)
        self._lines = read_lines(FdReceiveStream(self._out_r))

    def send(self, msg: Any) -> None:
        os.write(self._in_w, msg if isinstance(msg, bytes) else msgspec.json.encode(msg) + b"\n")

    async def recv(self) -> dict[str, Any]:
        with anyio.fail_after(STEP):
            return msgspec.json.decode(await self._lines.__anext__(), type=dict[str, Any])

    def close_input(self) -> None:
        os.close(self._in_w)

    async def aclose(self) -> None:
        """End both reader threads by EOF (closing an fd does not wake a thread blocked reading it)."""
        os.close(self._out_w)
        with anyio.fail_after(STEP):
            async for _ in self._lines:
                pass
        os.close(self._in_r)
        os.close(self._out_r)


class Unencodable:
    pass


@pytest.mark.anyio
@pytest.mark.allow_traceback  # it injects the bugs whose tracebacks it counts
async def test_a_result_that_cannot_be_encoded_is_an_internal_error_for_that_request(caplog):
    d = Dispatcher()

    async def bad(_params: Any) -> Any:
        return {"value": Unencodable()}

    async def boom(_params: Any) -> Any:
        raise RuntimeError("a bug")

    async def fine(_params: Any) -> Any:
        defer(failing_after)
        return {"ok": True}

    async def failing_after() -> None:
        raise RuntimeError("a deferred bug")

    d.add("bad", None, bad)
    d.add("boom", None, boom)
    d.add("fine", None, fine)
    pp = PipePeer(d)
    with caplog.at_level(logging.ERROR):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pp.peer.run)
            pp.send({"jsonrpc": "2.0", "id": 1, "method": "bad", "params": {}})
            err = await pp.recv()
            assert err["id"] == 1 and err["error"]["code"] == -32603
            pp.send({"jsonrpc": "2.0", "id": 2, "method": "boom", "params": {}})
            err = await pp.recv()
            assert err["id"] == 2 and err["error"]["code"] == -32603 and "RuntimeError" in err["error"]["message"]
            pp.send({"jsonrpc": "2.0", "id": 3, "method": "fine", "params": {}})
            assert (await pp.recv()) == {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}}
            pp.send({"jsonrpc": "2.0", "id": 4, "method": "fine", "params": {}})  # still serving
            assert (await pp.recv())["result"] == {"ok": True}
            pp.close_input()
    await pp.aclose()
    unexpected = [r for r in caplog.records if r.getMessage().startswith(UNEXPECTED)]
    assert len(unexpected) == 4 and all(r.exc_info for r in unexpected)  # bad, boom, two deferred failures


async def _give_up_by_timeout(cancel_notice: bool) -> list[dict[str, Any]]:
    """ama asks the client something and its own timeout expires; the client answers late. Returns every line
    ama wrote after the request, up to its answer to a probe request sent after the late answer."""
    pp = PipePeer(Dispatcher())
    async with anyio.create_task_group() as tg:
        tg.start_soon(pp.peer.run)
        gave_up = anyio.Event()

        async def ask() -> None:
            with pytest.raises(TimeoutError):
                await pp.peer.request("terminal/wait_for_exit", {"x": 1}, timeout=0.05, cancel_notice=cancel_notice)
            gave_up.set()

        tg.start_soon(ask)
        request = await pp.recv()
        assert request["method"] == "terminal/wait_for_exit"
        with anyio.fail_after(STEP):
            await gave_up.wait()
        pp.send({"jsonrpc": "2.0", "id": request["id"], "result": {"exitCode": 0}})  # late: accepted quietly
        pp.send({"jsonrpc": "2.0", "id": 99, "method": "nothing", "params": {}})
        written = [await pp.recv()]
        while written[-1].get("id") != 99:
            written.append(await pp.recv())
        pp.close_input()
    await pp.aclose()
    assert written[-1]["error"]["code"] == -32601
    return written[:-1]


@pytest.mark.anyio
async def test_own_timeout_sends_one_cancel_notice(caplog):
    with caplog.at_level(logging.DEBUG, logger="ama_acp.rpc"):
        written = await _give_up_by_timeout(cancel_notice=True)
    assert written == [{"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}}]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.anyio
async def test_no_cancel_notice_when_asked_not_to():
    assert await _give_up_by_timeout(cancel_notice=False) == []


@pytest.mark.anyio
async def test_no_cancel_notice_when_the_task_is_cancelled_from_outside():
    pp = PipePeer(Dispatcher())
    async with anyio.create_task_group() as tg:
        tg.start_soon(pp.peer.run)
        async with anyio.create_task_group() as asking:

            async def ask() -> None:
                await pp.peer.request("session/request_permission", {"x": 1})

            asking.start_soon(ask)
            request = await pp.recv()
            asking.cancel_scope.cancel()  # what session/cancel, $/cancel_request on the prompt or close do
        pp.send({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        pp.send({"jsonrpc": "2.0", "id": 99, "method": "nothing", "params": {}})
        answer = await pp.recv()  # the next line is the answer to 99: no $/cancel_request came before it
        assert answer["id"] == 99 and answer["error"]["code"] == -32601
        pp.close_input()
    await pp.aclose()
