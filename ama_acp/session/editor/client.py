"""The editor as the session layer calls it: one typed method per client call ama makes, the answer decoded
where it arrives.

`EditorClient` is shaped like the official SDK's `Client` (acp/interfaces.py), for the calls ama makes: the
request is a wire Struct, the result the typed answer of wire/types.py. `PeerEditor` implements it over the
connection's `request` (rpc/peer.py `Peer`, through the runtime): it sends the method's name and params and
decodes the client's JSON with wire/answers.py before anyone reads it. An answer that does not decode is a
`MalformedAnswer`, whatever its shape, so no caller picks a field out of a dict or meets a KeyError.

What else a call can raise is the connection's: `ClientError` (the client answered an error), `TimeoutError`
(after `timeout`), `PeerClosed`, or the caller's cancellation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import msgspec

from ama_acp.errors import ProtocolError
from ama_acp.rpc.peer import Params
from ama_acp.wire import answers
from ama_acp.wire import types as w

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# A request to the client and its raw JSON result: `Peer.request`, or the runtime's `client_request`.
SendRequest = Callable[[str, Params, float | None], Awaitable[object]]


class ClientRequests(Protocol):
    """What holds the way to the client (the runtime): a `PeerEditor` is built over its `client_request`."""

    async def client_request(self, method: str, params: Params, timeout: float | None = None) -> object: ...


class MalformedAnswer(ProtocolError):
    """The client answered one of ama's requests with a value its schema does not allow: not an object, a
    required field missing, a field of the wrong type. `reason` is the decoder's, naming the field."""

    def __init__(self, method: str, reason: str) -> None:
        self.method = method
        self.reason = reason
        super().__init__(f"The editor's answer to {method} was not understood: {reason}.")


class EditorClient(Protocol):
    """The client calls ama makes, one method each. `timeout`: seconds to wait for the answer (None: no limit)."""

    async def read_text_file(
        self, request: w.ReadTextFileRequest, *, timeout: float | None = None
    ) -> w.ReadTextFileResponse: ...

    async def write_text_file(
        self, request: w.WriteTextFileRequest, *, timeout: float | None = None
    ) -> w.WriteTextFileResponse: ...

    async def request_permission(
        self, request: w.RequestPermissionRequest, *, timeout: float | None = None
    ) -> w.RequestPermissionResponse: ...

    async def create_terminal(
        self, request: w.CreateTerminalRequest, *, timeout: float | None = None
    ) -> w.CreateTerminalResponse: ...

    async def terminal_output(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.TerminalOutputResponse: ...

    async def wait_for_terminal_exit(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.WaitForTerminalExitResponse: ...

    async def kill_terminal(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.KillTerminalResponse: ...

    async def release_terminal(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.ReleaseTerminalResponse: ...


class PeerEditor:
    """`EditorClient` over the JSON-RPC connection: encodes the request, decodes the answer at arrival."""

    def __init__(self, send: SendRequest) -> None:
        self._send = send

    async def _call(self, method: str, request: Params, decode: Callable[[object], _T], timeout: float | None) -> _T:
        answer = await self._send(method, request, timeout)
        try:
            return decode(answer)
        except msgspec.ValidationError as exc:
            log.warning("malformed answer to %s %s: %s", method, clip(answer), exc)
            raise MalformedAnswer(method, str(exc)) from None

    async def read_text_file(
        self, request: w.ReadTextFileRequest, *, timeout: float | None = None
    ) -> w.ReadTextFileResponse:
        return await self._call("fs/read_text_file", request, answers.read_text_file, timeout)

    async def write_text_file(
        self, request: w.WriteTextFileRequest, *, timeout: float | None = None
    ) -> w.WriteTextFileResponse:
        return await self._call("fs/write_text_file", request, answers.write_text_file, timeout)

    async def request_permission(
        self, request: w.RequestPermissionRequest, *, timeout: float | None = None
    ) -> w.RequestPermissionResponse:
        return await self._call("session/request_permission", request, answers.request_permission, timeout)

    async def create_terminal(
        self, request: w.CreateTerminalRequest, *, timeout: float | None = None
    ) -> w.CreateTerminalResponse:
        return await self._call("terminal/create", request, answers.create_terminal, timeout)

    async def terminal_output(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.TerminalOutputResponse:
        return await self._call("terminal/output", request, answers.terminal_output, timeout)

    async def wait_for_terminal_exit(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.WaitForTerminalExitResponse:
        return await self._call("terminal/wait_for_exit", request, answers.wait_for_terminal_exit, timeout)

    async def kill_terminal(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.KillTerminalResponse:
        return await self._call("terminal/kill", request, answers.kill_terminal, timeout)

    async def release_terminal(
        self, request: w.TerminalRequest, *, timeout: float | None = None
    ) -> w.ReleaseTerminalResponse:
        return await self._call("terminal/release", request, answers.release_terminal, timeout)


def clip(value: object, limit: int = 200) -> str:
    """A value from the client for the log: its repr, cut at `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
