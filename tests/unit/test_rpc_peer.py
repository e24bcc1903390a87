"""rpc/peer.py: ama's own requests to the client and their answers, in-process on memory byte pipes.

The test is the client: it reads what the peer writes and writes answers back. Covered: matching answers to
requests (in any order, many at once), error answers as ClientError, ama's own timeout (the only case that
sends `$/cancel_request`), late and unknown answers (logged at debug, dropped), and the end of the connection
while requests wait (they fail, they never hang).
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ByteReceiveStream

from ama_acp.rpc.dispatch import Dispatcher, defer
from ama_acp.rpc.errors import METHOD_NOT_FOUND, REQUEST_CANCELLED, ClientError
from ama_acp.rpc.framing import read_lines
from ama_acp.rpc.peer import Peer, PeerClosed
from tests.support.byte_pipe import ChunkReceiveStream, byte_pipe

pytestmark = pytest.mark.anyio

STEP = 10.0  # seconds any one step may take; they take milliseconds


class Client:
    """The other end of a Peer: reads the lines it writes, writes lines to it."""

    def __init__(self, dispatcher: Dispatcher | None = None) -> None:
        self._to_peer, peer_in = byte_pipe()
        peer_out, self._from_peer = byte_pipe()
        self._from_peer_raw: ChunkReceiveStream = self._from_peer
        self.peer = Peer(peer_in, peer_out, dispatcher or Dispatcher())
        self._lines: AsyncIterator[bytes] = read_lines(self._from_peer)

    async def send(self, message: Any) -> None:
        await self._to_peer.send(msgspec.json.encode(message) + b"\n")

    async def recv(self) -> dict[str, Any]:
        with anyio.fail_after(STEP):
            return msgspec.json.decode(await self._lines.__anext__(), type=dict[str, Any])

    async def answer(self, rid: Any, result: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    async def probe(self) -> list[dict[str, Any]]:
        """Everything the peer writes before its answer to a fresh request (-32601: no methods here)."""
        await self.send({"jsonrpc": "2.0", "id": "probe", "method": "probe", "params": {}})
        written = [await self.recv()]
        while written[-1].get("id") != "probe":
            written.append(await self.recv())
        assert written[-1]["error"]["code"] == METHOD_NOT_FOUND
        return written[:-1]

    async def close_input(self) -> None:
        await self._to_peer.aclose()

    async def stop_reading(self) -> None:
        await self._from_peer_raw.aclose()


class Collected:
    """What tasks hand back; `until(n)` waits, within a deadline, until there are n of them."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._changed = anyio.Event()

    def add(self, item: Any) -> None:
        self.items.append(item)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, n: int) -> list[Any]:
        with anyio.fail_after(STEP):
            while len(self.items) < n:
                await self._changed.wait()
        return self.items


async def test_answers_reach_the_request_they_name_in_any_order():
    client = Client()
    results = Collected()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)

        async def ask(name: str) -> None:
            results.add((name, await client.peer.request("fs/read_text_file", {"path": name})))

        tg.start_soon(ask, "a")
        first = await client.recv()
        tg.start_soon(ask, "b")
        second = await client.recv()
        assert (first["id"], second["id"]) == (1, 2)  # ints, counted from 1
        assert first["method"] == "fs/read_text_file" and first["params"] == {"path": "a"}
        await client.answer(second["id"], {"content": "B"})
        await client.answer(first["id"], {"content": "A"})
        await results.until(2)
        await client.close_input()
    assert dict(results.items) == {"a": {"content": "A"}, "b": {"content": "B"}}


async def test_many_concurrent_requests_each_get_their_own_answer():
    client = Client()
    results = Collected()
    count = 50
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)

        async def ask(n: int) -> None:
            results.add((n, await client.peer.request("x/echo", {"n": n})))

        for n in range(count):
            tg.start_soon(ask, n)
        requests = [await client.recv() for _ in range(count)]
        assert len({r["id"] for r in requests}) == count
        random.Random(9).shuffle(requests)
        for r in requests:
            await client.answer(r["id"], {"echo": r["params"]["n"]})
        await results.until(count)
        await client.close_input()
    assert dict(results.items) == {n: {"echo": n} for n in range(count)}


async def test_a_result_of_any_json_type_is_returned_as_sent():
    client = Client()
    got = Collected()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)
        for n, result in enumerate((None, 0, "text", [1, {"a": None}])):

            async def ask() -> None:
                got.add(await client.peer.request("x/any", {}))

            tg.start_soon(ask)
            await client.answer((await client.recv())["id"], result)
            await got.until(n + 1)
        await client.close_input()
    assert got.items == [None, 0, "text", [1, {"a": None}]]


async def test_an_error_answer_raises_client_error_with_the_clients_words():
    client = Client()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)
        outcome = Collected()

        async def ask() -> None:
            try:
                await client.peer.request("fs/write_text_file", {"path": "/x"})
            except ClientError as exc:
                outcome.add(exc)

        tg.start_soon(ask)
        request = await client.recv()
        error = {"code": -32603, "message": "Internal error", "data": {"details": "File is locked"}}
        await client.send({"jsonrpc": "2.0", "id": request["id"], "error": error})
        await outcome.until(1)
        await client.close_input()
    exc = outcome.items[0]
    assert isinstance(exc, ClientError)
    assert (exc.code, exc.message, exc.wire_message) == (-32603, "File is locked", "Internal error")
    assert exc.data == {"details": "File is locked"}


async def test_own_timeout_sends_one_cancel_notice_and_the_late_answer_is_dropped_at_debug(caplog):
    client = Client()
    with caplog.at_level(logging.DEBUG, logger="ama_acp.rpc"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.peer.run)
            gave_up = anyio.Event()

            async def ask() -> None:
                with pytest.raises(TimeoutError):
                    await client.peer.request("terminal/wait_for_exit", {"terminalId": "t"}, timeout=0.05)
                gave_up.set()

            tg.start_soon(ask)
            request = await client.recv()
            assert await client.recv() == {
                "jsonrpc": "2.0",
                "method": "$/cancel_request",
                "params": {"requestId": request["id"]},
            }
            with anyio.fail_after(STEP):
                await gave_up.wait()
            await client.answer(request["id"], {"exitCode": 0})  # the client still owes it (R24)
            assert await client.probe() == []  # nothing written for the late answer
            await client.close_input()
    late = [r for r in caplog.records if "late answer" in r.getMessage()]
    assert len(late) == 1 and late[0].levelno == logging.DEBUG and "terminal/wait_for_exit" in late[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_no_cancel_notice_on_a_timeout_when_asked_not_to():
    client = Client()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)
        with pytest.raises(TimeoutError):
            await client.peer.request("terminal/output", {}, timeout=0.05, cancel_notice=False)
        assert (await client.recv())["method"] == "terminal/output"
        assert await client.probe() == []  # no $/cancel_request came before the probe's answer
        await client.close_input()


async def test_no_cancel_notice_when_the_waiting_task_is_cancelled_from_outside(caplog):
    client = Client()
    with caplog.at_level(logging.DEBUG, logger="ama_acp.rpc"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.peer.run)
            async with anyio.create_task_group() as asking:
                asking.start_soon(client.peer.request, "session/request_permission", {"sessionId": "s"})
                request = await client.recv()
                asking.cancel_scope.cancel()
            await client.answer(request["id"], {"outcome": {"outcome": "cancelled"}})
            assert await client.probe() == []
            await client.close_input()
    assert [r for r in caplog.records if "late answer" in r.getMessage()]


@pytest.mark.parametrize("rid", [999, "1", 1.0, True, None, [1], {"id": 1}])
async def test_an_answer_with_an_unknown_id_is_dropped_and_the_waiting_request_unharmed(caplog, rid):
    client = Client()
    got = Collected()
    with caplog.at_level(logging.DEBUG, logger="ama_acp.rpc"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.peer.run)

            async def ask() -> None:
                got.add(await client.peer.request("x/wait", {}))

            tg.start_soon(ask)
            request = await client.recv()
            assert request["id"] == 1
            await client.answer(rid, {"wrong": True})  # "1", 1.0 and True must not match the int id 1
            assert await client.probe() == []
            assert got.items == []
            await client.answer(1, {"right": True})
            await got.until(1)
            await client.close_input()
    assert got.items == [{"right": True}]
    assert [r for r in caplog.records if "unknown request id" in r.getMessage() and r.levelno == logging.DEBUG]


async def test_closing_the_input_fails_waiting_requests_and_refuses_new_ones():
    client = Client()
    failures = Collected()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)

        async def ask(n: int) -> None:
            try:
                await client.peer.request("session/request_permission", {"n": n})
            except ClientError as exc:
                failures.add(exc)

        for n in range(3):
            tg.start_soon(ask, n)
        for _ in range(3):
            await client.recv()
        await client.close_input()
        await failures.until(3)  # they fail promptly; a hang would end at the deadline
    assert all(isinstance(f, ClientError) and f.code == REQUEST_CANCELLED for f in failures.items)
    assert client.peer.closed
    with pytest.raises(PeerClosed):
        await client.peer.request("fs/read_text_file", {})


async def test_cancelling_the_peer_from_outside_fails_waiting_requests_too():
    """A signal ends the server by cancelling `run` (no EOF): a request waiting in another task group, or one
    asked afterwards from a shutdown path, must fail rather than wait for an answer that cannot come."""
    client = Client()
    failures = Collected()
    async with anyio.create_task_group() as sessions:

        async def ask() -> None:
            try:
                await client.peer.request("session/request_permission", {})
            except (ClientError, PeerClosed) as exc:
                failures.add(exc)

        async with anyio.create_task_group() as server:
            server.start_soon(client.peer.run)
            sessions.start_soon(ask)
            await client.recv()
            server.cancel_scope.cancel()
        await failures.until(1)
    assert isinstance(failures.items[0], ClientError) and failures.items[0].code == REQUEST_CANCELLED
    assert client.peer.closed
    with pytest.raises(PeerClosed):
        await client.peer.request("fs/read_text_file", {})
    await client.close_input()


class _AnswerThenEof(ByteReceiveStream):
    """Gives one line once `ready` is set, then EOF at once, without handing the event loop over in between:
    the peer reads the answer and the end of input in one go."""

    def __init__(self, line: bytes, ready: anyio.Event) -> None:
        self._line: bytes | None = line
        self._ready = ready

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._line is None:
            raise anyio.EndOfStream
        await self._ready.wait()
        line, self._line = self._line, None
        return line

    async def aclose(self) -> None:
        return None


async def test_an_answer_read_just_before_the_input_ends_is_kept():
    sent = anyio.Event()
    answer = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}) + b"\n"
    peer_out, from_peer = byte_pipe()
    peer = Peer(_AnswerThenEof(answer, sent), peer_out, Dispatcher())
    got: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            got.append(await peer.request("fs/read_text_file", {}))

        tg.start_soon(ask)
        with anyio.fail_after(STEP):
            await from_peer.receive()  # the request is out: id 1 is pending
        sent.set()
        await peer.run()
    assert got == [{"ok": True}]


async def test_a_client_that_stopped_reading_fails_the_request_at_once():
    client = Client()
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)
        await client.stop_reading()
        with anyio.fail_after(STEP), pytest.raises(PeerClosed):
            await client.peer.request("fs/read_text_file", {})
        with pytest.raises(PeerClosed):  # and every later one, before anything is sent
            await client.peer.request("fs/read_text_file", {})
        await client.close_input()


async def test_a_second_answer_to_the_same_id_is_ignored():
    client = Client()
    got: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)

        async def ask() -> None:
            got.append(await client.peer.request("x/once", {}))

        tg.start_soon(ask)
        rid = (await client.recv())["id"]
        await client.answer(rid, "first")
        await client.answer(rid, "second")
        assert await client.probe() == []
        await client.close_input()
    assert got == ["first"]


async def test_cancel_request_for_a_running_request_answers_it_cancelled_once():
    started = anyio.Event()

    async def slow(_params: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await anyio.sleep_forever()
        return {}

    d = Dispatcher()
    d.add("slow", None, slow)
    client = Client(d)
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.peer.run)
        await client.send({"jsonrpc": "2.0", "id": "s1", "method": "slow", "params": {}})
        with anyio.fail_after(STEP):
            await started.wait()
        await client.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "s1"}})
        assert await client.recv() == {
            "jsonrpc": "2.0",
            "id": "s1",
            "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"},
        }
        await client.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "s1"}})
        assert await client.probe() == []  # finished: a second cancel gets nothing (R22)
        await client.close_input()


async def test_the_end_of_input_lets_what_was_read_before_it_answer_and_announce():
    """`end_grace`: a request read with the end of input still answers and sends its deferred updates (E4: a
    client that closes stdin right after session/new); a method in `cut_at_end` (a turn) is cancelled at once;
    one that never ends is cut when the grace runs out, so the exit is bounded."""

    async def opens(_params: dict[str, Any]) -> dict[str, Any]:
        async def announce() -> None:
            await anyio.lowlevel.checkpoint()  # where a cancel at the end of input used to land
            await client.peer.notify("session/update", {"announced": True})

        defer(announce)
        return {"opened": True}

    turn_cut = anyio.Event()

    async def turn(_params: dict[str, Any]) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            turn_cut.set()
        return {}

    stuck_cut = anyio.Event()

    async def stuck(_params: dict[str, Any]) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            stuck_cut.set()
        return {}

    d = Dispatcher()
    for name, handler in (("open", opens), ("turn", turn), ("stuck", stuck)):
        d.add(name, None, handler)
    client = Client(d)
    client.peer.end_grace, client.peer.cut_at_end = 1.0, frozenset({"turn"})
    with anyio.fail_after(STEP):  # bounded by the grace: a stuck handler cannot hold the end
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.peer.run)
            for rid, method in ((1, "turn"), (2, "open"), (3, "stuck")):
                await client.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": {}})
            await client.close_input()
            got = [await client.recv(), await client.recv()]
            await turn_cut.wait()  # cut at once: the stuck one still has its grace
            assert not stuck_cut.is_set()
    assert got == [
        {"jsonrpc": "2.0", "id": 2, "result": {"opened": True}},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"announced": True}},
    ]
    assert stuck_cut.is_set()
