"""One JSON-RPC connection: incoming requests each in their own task, our own requests to the client with
their responses routed back, `$/cancel_request`, and one writer for the output stream.

Containment: nothing one message does may end the connection. Each line is decoded and classified
(dispatch.classify) before anything acts on it, and every task this module starts runs under `_contained`,
which logs an exception it did not expect under the UNEXPECTED prefix, with its traceback, and carries on.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVarTuple

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from ama_acp.errors import ProtocolError
from ama_acp.rpc.dispatch import (
    Dispatcher,
    Invalid,
    JSONObject,
    JSONValue,
    Notification,
    Request,
    RequestId,
    Response,
    after_response,
    classify,
    classify_too_deep,
    is_request_id,
)
from ama_acp.rpc.errors import REQUEST_CANCELLED, UNEXPECTED, AcpError, ClientError, clip
from ama_acp.rpc.framing import LineTooLong, LineWriter, read_lines
from ama_acp.rpc.pending import Pending, PendingRequests

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

# Ids of requests ama stopped waiting for, so that the client's answer (which it owes us) is recognised as
# late rather than unknown. Bounded: a client that never answers must not grow it forever.
_ABANDONED_KEPT = 1024

# What ama sends as `params` (and the messages it writes): a wire Struct, or a mapping whose values msgspec
# encodes (they may hold Structs themselves). A value msgspec cannot encode is a bug in ama.
Params = msgspec.Struct | Mapping[str, object]

Ts = TypeVarTuple("Ts")


class PeerClosed(ProtocolError):
    """The connection ended before the client answered."""


class Peer:
    def __init__(self, receive: ByteReceiveStream, send: ByteSendStream, dispatcher: Dispatcher) -> None:
        self._receive = receive
        self._writer = LineWriter(send)
        self._dispatcher = dispatcher
        self._pending = PendingRequests(Pending)
        self._abandoned: OrderedDict[int, str] = OrderedDict()
        self._running: dict[str | int, tuple[str, JSONObject, anyio.CancelScope]] = {}
        self.closed = False
        # The prompt handler turns a `$/cancel_request` on its request into a session cancel (R25):
        # called with (method, params); True means handled.
        self.on_cancel_request: Callable[[str, JSONObject], bool] | None = None
        # At the end of input, what was read before it still gets up to `end_grace` seconds to be answered and to
        # send what follows its answer (E4: a session's opening updates; a client may close stdin right after
        # session/new's answer), except the methods in `cut_at_end` (a turn), which are cancelled at once.
        # 0: everything is cancelled at once.
        self.end_grace = 0.0
        self.cut_at_end: frozenset[str] = frozenset()
        self._in_flight = 0  # tasks started for lines read: requests, notifications, error answers
        self._settled = anyio.Event()  # set whenever `_in_flight` drops to 0

    # --- output ------------------------------------------------------------------------------------------

    async def send_message(self, message: Mapping[str, object]) -> None:
        await self._writer.write(_encoder.encode(message))

    async def notify(self, method: str, params: Params) -> None:
        await self.send_message({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(
        self, method: str, params: Params, timeout: float | None = None, *, cancel_notice: bool = True
    ) -> JSONValue:
        """Send a request to the client and wait for its result. Raises ClientError (the client's error answer,
        or -32800 "connection closed" when the connection ends during the wait), PeerClosed (the connection had
        ended, or the client stopped reading, before the request was out), TimeoutError (after `timeout`
        seconds) or the caller's cancellation.

        `$/cancel_request` is sent only when ama gives up for its own reason — `timeout` expired — and
        `cancel_notice` is true. When the wait ends because this task is cancelled from outside (the client's
        session/cancel, its `$/cancel_request` on the prompt, session/close, shutdown) the client already
        knows or the connection is going, and a notice would only be noise: the official Python SDK logs an
        ERROR traceback for every `$/cancel_request` it receives (it has no handler for it). Either way the id
        is remembered, and the client's late answer is accepted quietly.
        """
        if self.closed or self._writer.closed:
            raise PeerClosed(method)
        pending = self._pending.open(method)
        req_id = pending.id
        try:
            await self.send_message({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
            if self._writer.closed:  # the client stopped reading: it will never answer
                raise PeerClosed(method)
            await self._answer_to(pending, timeout, cancel_notice=cancel_notice)
        finally:
            self._pending.close(pending)
            if not pending.done:
                self._abandoned[req_id] = method
                if len(self._abandoned) > _ABANDONED_KEPT:
                    self._abandoned.popitem(last=False)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def _answer_to(self, pending: Pending, timeout: float | None, *, cancel_notice: bool) -> None:
        """Wait for the client's answer to our request, at most `timeout` seconds (then TimeoutError)."""
        try:
            with anyio.fail_after(timeout if timeout is not None else math.inf):
                await pending.event.wait()
        except TimeoutError:
            if cancel_notice and not self.closed:
                await self.notify("$/cancel_request", {"requestId": pending.id})  # R24
            raise

    # --- input -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until the input ends; then cancel what still runs and return.

        However it ends — EOF, a line too long, or `run` itself cancelled (a signal) — the peer is closed:
        requests of ours still waiting fail with -32800 "connection closed" (what callers already take as
        a cancelled request, R24) and later ones raise PeerClosed, so nothing waits for an answer that
        cannot come.
        """
        try:
            async with anyio.create_task_group() as tg:
                try:
                    async for line in read_lines(self._receive):
                        self._handle_line(line, tg)
                except LineTooLong as exc:
                    log.error("closing: %s", exc)
                except Exception:  # the input stream itself failed: nothing more can be read
                    log.exception("%s reading the input failed; closing", UNEXPECTED)
                self._close()  # before the handlers are cancelled: their clean-up must not ask the client
                await self._finish_in_flight()
                tg.cancel_scope.cancel()
        finally:
            self._close()

    async def _finish_in_flight(self) -> None:
        """The end of input: the requests read before it answer and send their deferred updates, within
        `end_grace` seconds (a stuck write or handler cannot hold the exit); those in `cut_at_end` are cut now.
        Counted from the moment each line was routed, so a request whose task has not run yet is waited for too."""
        if self.end_grace <= 0:
            return
        for method, _, scope in self._running.values():
            if method in self.cut_at_end:
                scope.cancel()
        with anyio.move_on_after(self.end_grace):
            while self._in_flight:
                await self._settled.wait()
        if self._in_flight:
            log.warning(
                "%d request(s) still running %.1f s after the end of input; cancelled", self._in_flight, self.end_grace
            )

    def _start(self, tg: TaskGroup, run: Callable[[*Ts], Awaitable[object]], *args: *Ts, name: str) -> None:
        """`run` in its own task, contained and counted as in flight (`_finish_in_flight`)."""
        if self._in_flight == 0:
            self._settled = anyio.Event()
        self._in_flight += 1
        tg.start_soon(self._counted, run, *args, name=name)

    async def _counted(self, run: Callable[[*Ts], Awaitable[object]], *args: *Ts) -> None:
        try:
            await self._contained(run, *args)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._settled.set()

    def _close(self) -> None:
        self.closed = True
        # An answer already read stands, even if its waiter has not woken.
        self._pending.fail_all(lambda _: ClientError(REQUEST_CANCELLED, "connection closed"))

    def _handle_line(self, line: bytes, tg: TaskGroup) -> None:
        try:
            self._route(line, tg)
        except Exception:
            log.exception("%s handling an input line failed: %r", UNEXPECTED, line[:200])

    def _route(self, line: bytes, tg: TaskGroup) -> None:
        try:
            message = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            log.warning("parse error: %s", exc)
            self._answer(tg, None, AcpError.parse_error(str(exc)))
            return
        except RecursionError:  # nested past the decoder's stack: valid JSON, perhaps, but not a message
            incoming = classify_too_deep(line)
        else:
            incoming = classify(message)
        if isinstance(incoming, Response):
            self._handle_response(incoming)
        elif isinstance(incoming, Invalid):
            log.warning("invalid message: %s", incoming.error.message)
            self._answer(tg, incoming.id, incoming.error)
        elif isinstance(incoming, Notification):
            self._route_notification(incoming, tg)
        else:
            # Registered now, not when the task starts: a `$/cancel_request` on the very next line finds it.
            scope = anyio.CancelScope()
            tracked = incoming.id is not None and incoming.id not in self._running
            if incoming.id is not None and tracked:
                self._running[incoming.id] = (incoming.method, incoming.params, scope)
            self._start(tg, self._serve, incoming, scope, tracked, name=incoming.method)

    def _route_notification(self, note: Notification, tg: TaskGroup) -> None:
        if note.method == "$/cancel_request":
            self._handle_cancel_request(note.params)
        elif note.params is not None and self._dispatcher.has(note.method, notification=True):
            self._start(tg, self._notification, note, name=note.method)
        # else: unknown or unusable notification, ignored silently (R13, R16)

    def _answer(self, tg: TaskGroup, req_id: RequestId, error: AcpError) -> None:
        self._start(tg, self.send_message, {"jsonrpc": "2.0", "id": req_id, "error": error.to_dict()}, name="error")

    async def _contained(self, run: Callable[[*Ts], Awaitable[object]], *args: *Ts) -> None:
        try:
            await run(*args)
        except Exception:
            log.exception("%s in %s", UNEXPECTED, getattr(run, "__name__", run))

    def _handle_response(self, response: Response) -> None:
        rid = response.id
        pending = self._pending.find(rid)  # bool/float ids never match ours
        if pending is None:
            if type(rid) is int and rid in self._abandoned:
                log.debug("late answer to request %d (%s), which ama stopped waiting for", rid, self._abandoned[rid])
                del self._abandoned[rid]
            else:
                log.debug("response to unknown request id %s ignored", clip(repr(rid), 100))
            return
        if not pending.resolve(response.result, response.error):
            log.debug("second response to request %d ignored", rid)

    def _handle_cancel_request(self, params: JSONObject | None) -> None:
        """Any malformed or unknown `requestId` is tolerated silently: a notification is never answered (R13)
        and a request that already finished keeps its response (R22)."""
        rid = params.get("requestId") if params is not None else None
        if not is_request_id(rid):
            return
        running = self._running.get(rid)
        if running is None:
            return
        method, req_params, scope = running
        try:
            if self.on_cancel_request is not None and self.on_cancel_request(method, req_params):
                return  # handled as a session cancel: the prompt answers `cancelled`
        except Exception:
            log.exception("%s in the cancel hook for %s", UNEXPECTED, method)
        scope.cancel()

    async def _notification(self, note: Notification) -> None:
        assert note.params is not None
        try:
            await self._dispatcher.call(note.method, note.params, notification=True)
        except AcpError as exc:  # never answered (R13); the log says why nothing happened
            log.info("notification %s failed: %s", note.method, exc.message)

    async def _serve(self, req: Request, scope: anyio.CancelScope, tracked: bool) -> None:
        response: dict[str, object] | None = None
        deferred: list[Callable[[], Awaitable[None]]] = []
        token = after_response.set(deferred)
        try:
            with scope:
                try:
                    result = await self._dispatcher.call(req.method, req.params)
                    response = {"jsonrpc": "2.0", "id": req.id, "result": result}
                except AcpError as exc:
                    response = {"jsonrpc": "2.0", "id": req.id, "error": exc.to_dict()}
        finally:
            after_response.reset(token)
            if tracked and req.id is not None:
                self._running.pop(req.id, None)
        if scope.cancelled_caught:
            if self.closed:
                return
            response = {"jsonrpc": "2.0", "id": req.id, "error": AcpError.cancelled().to_dict()}  # R20
        assert response is not None
        line, ok = self._encode_response(req, response)
        await self._writer.write(line)
        if not ok or "error" in response:
            return  # nothing announced for a request that failed
        for run in deferred:  # updates that must follow the response (E4: the client knows the id now)
            await self._contained(run)

    def _encode_response(self, req: Request, response: dict[str, object]) -> tuple[bytes, bool]:
        """The response as one line, and whether it is the one meant. A result that cannot be encoded is a bug
        in ama: this request is answered -32603 instead of the task dying and the client waiting forever."""
        try:
            return _encoder.encode(response), True
        except Exception as exc:
            log.exception("%s the result of %s could not be encoded", UNEXPECTED, req.method)
            error = AcpError.internal(f"the result could not be encoded ({type(exc).__name__}: {clip(str(exc))})")
            return _encoder.encode({"jsonrpc": "2.0", "id": req.id, "error": error.to_dict()}), False
