"""One JSON-RPC connection: incoming requests each in their own task, our own requests to the client with
their responses routed back, `$/cancel_request`, and one writer for the output stream.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable
from typing import Any

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from ama_acp.rpc.dispatch import Dispatcher, after_response
from ama_acp.rpc.errors import AcpError, ClientError
from ama_acp.rpc.framing import LineTooLong, LineWriter, read_lines

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class PeerClosed(Exception):
    """The connection ended before the client answered."""


class _Pending:
    __slots__ = ("event", "result", "error", "method")

    def __init__(self, method: str) -> None:
        self.event = anyio.Event()
        self.result: Any = None
        self.error: ClientError | None = None
        self.method = method


class Peer:
    def __init__(self, receive: ByteReceiveStream, send: ByteSendStream, dispatcher: Dispatcher) -> None:
        self._receive = receive
        self._writer = LineWriter(send)
        self._dispatcher = dispatcher
        self._ids = itertools.count(1)
        self._pending: dict[Any, _Pending] = {}
        self._running: dict[Any, tuple[str, Any, anyio.CancelScope]] = {}
        self._tg: TaskGroup | None = None
        self.closed = False
        # The prompt handler turns a `$/cancel_request` on its request into a session cancel (R25):
        # called with (method, params); True means handled.
        self.on_cancel_request: Callable[[str, Any], bool] | None = None

    # --- output ------------------------------------------------------------------------------------------

    async def send_message(self, message: Any) -> None:
        await self._writer.write(_encoder.encode(message))

    async def notify(self, method: str, params: Any) -> None:
        await self.send_message({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """Send a request to the client and wait for its result. Raises ClientError or PeerClosed."""
        if self.closed:
            raise PeerClosed(method)
        req_id = next(self._ids)
        pending = self._pending[req_id] = _Pending(method)
        try:
            await self.send_message({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params})
            with anyio.fail_after(timeout if timeout is not None else math.inf):
                await pending.event.wait()
        except BaseException:
            if not pending.event.is_set() and not self.closed:
                # Tell the client we no longer wait (R24); it may still answer, which we then ignore.
                with anyio.CancelScope(shield=True):
                    await self.notify("$/cancel_request", {"requestId": req_id})
            raise
        finally:
            self._pending.pop(req_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    # --- input -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until the input ends; then cancel what still runs and return."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                async for line in read_lines(self._receive):
                    self._handle_line(line, tg)
            except LineTooLong as exc:
                log.error("closing: %s", exc)
            self.closed = True
            for pending in self._pending.values():
                pending.error = ClientError(-32800, "connection closed")
                pending.event.set()
            tg.cancel_scope.cancel()

    def _handle_line(self, line: bytes, tg: TaskGroup) -> None:
        try:
            message = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            log.warning("parse error: %s", exc)
            tg.start_soon(
                self.send_message, {"jsonrpc": "2.0", "id": None, "error": AcpError.parse_error(str(exc)).to_dict()}
            )
            return
        if isinstance(message, dict):
            if "method" not in message and "id" in message and ("result" in message or "error" in message):
                self._handle_response(message)
                return
            if message.get("method") == "$/cancel_request":
                self._handle_cancel_request(message.get("params"))
                return
        tg.start_soon(self._serve, message)

    def _handle_response(self, message: dict[str, Any]) -> None:
        pending = self._pending.get(message["id"])
        if pending is None:
            log.warning("response to unknown request id %r ignored", message["id"])
            return
        err = message.get("error")
        if err is not None:
            if isinstance(err, dict):
                pending.error = ClientError(err.get("code", -32603), str(err.get("message", "")), err.get("data"))
            else:
                pending.error = ClientError(-32603, "malformed error response")
        else:
            pending.result = message.get("result")
        pending.event.set()

    def _handle_cancel_request(self, params: Any) -> None:
        if not isinstance(params, dict) or "requestId" not in params:
            return  # a notification: never answered, even when malformed (R13)
        running = self._running.get(params["requestId"])
        if running is None:
            return  # already finished: its response stands (R22)
        method, req_params, scope = running
        if self.on_cancel_request is not None and self.on_cancel_request(method, req_params):
            return  # handled as a session cancel: the prompt answers `cancelled`
        scope.cancel()

    async def _serve(self, message: Any) -> None:
        is_request = isinstance(message, dict) and "id" in message and isinstance(message.get("method"), str)
        req_id = message.get("id") if is_request else None
        hashable = is_request and isinstance(req_id, (str, int)) and req_id not in self._running
        scope = anyio.CancelScope()
        if hashable:
            self._running[req_id] = (message["method"], message.get("params"), scope)
        response: dict[str, Any] | None = None
        deferred: list[Callable[[], Any]] = []
        token = after_response.set(deferred)
        try:
            with scope:
                response = await self._dispatcher.dispatch(message)
        finally:
            after_response.reset(token)
            if hashable:
                self._running.pop(req_id, None)
        if scope.cancelled_caught and is_request:
            if self.closed:
                return
            response = {"jsonrpc": "2.0", "id": req_id, "error": AcpError.cancelled().to_dict()}  # R20
        if response is not None:
            await self.send_message(response)
        if response is not None and "error" in response:
            return  # nothing announced for a request that failed
        for run in deferred:  # updates that must follow the response (E4: the client knows the id now)
            await run()
