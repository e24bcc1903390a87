"""The agent's requests to the client: which methods are served (those advertised in `initialize`), each
request in a task of its own under a cancel scope that the agent's `$/cancel_request` cancels, and the
permission requests of a session answered `cancelled` once the client cancelled it (Appendix A).

The handlers themselves (files, terminals, the permission policy) are in `handlers.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping

import anyio
import msgspec

from ama_acp.client import handlers
from ama_acp.client.errors import AgentExited
from ama_acp.client.handlers import Outcome, TerminalManager
from ama_acp.client.options import ClientOptions
from ama_acp.client.violations import Record
from ama_acp.rpc.dispatch import JSONObject, JSONValue
from ama_acp.rpc.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, REQUEST_CANCELLED, AcpError

# A handler takes the request's params (an object, `{}` when the agent sent none or another type) and returns
# the result msgspec encodes, or raises AcpError (client.errors.RpcError) for an error answer.
Handler = Callable[[JSONObject], Awaitable[object]]
PermissionHook = Callable[[JSONObject, Outcome], None]

_FS_METHODS = ("fs/read_text_file", "fs/write_text_file")
_TERMINAL_METHODS = (
    "terminal/create",
    "terminal/output",
    "terminal/wait_for_exit",
    "terminal/kill",
    "terminal/release",
)


def _id_key(request_id: JSONValue) -> str:
    # JSON ids keep their type (R11): 1 and "1" are different ids.
    return msgspec.json.encode(request_id).decode()


class Serving:
    """Serves the agent's requests. `send` writes one message (raising client.errors.AgentExited when the
    agent's stdin is closed), `spawn` starts a task in the connection's task group, `exited` tells whether
    the agent's stdout has ended, `permission_hook` gives the connection's current `on_permission`."""

    def __init__(
        self,
        options: ClientOptions,
        terminals: TerminalManager,
        file_gate: handlers.FileGate | None,
        *,
        send: Callable[[Mapping[str, object]], Awaitable[None]],
        record: Record,
        spawn: Callable[[Callable[[], Coroutine[object, object, None]]], None],
        exited: Callable[[], bool],
        permission_hook: Callable[[], PermissionHook | None],
    ) -> None:
        self.options = options
        self._send, self._record, self._spawn, self._exited = send, record, spawn, exited
        self._permission_hook = permission_hook
        self.permission_log: list[tuple[JSONObject, Outcome]] = []
        self._incoming: dict[str, anyio.CancelScope] = {}
        self._permission_scopes: dict[int, tuple[JSONValue, anyio.CancelScope]] = {}
        self._permission_counter = 0
        self._cancelled_sessions: set[str] = set()
        self.handlers: dict[str, Handler] = {
            "session/request_permission": self._handle_permission,
            "fs/read_text_file": lambda params: handlers.read_text_file(params, file_gate),
            "fs/write_text_file": lambda params: handlers.write_text_file(params, file_gate),
            "terminal/create": terminals.create,
            "terminal/output": terminals.output,
            "terminal/wait_for_exit": terminals.wait_for_exit,
            "terminal/kill": terminals.kill,
            "terminal/release": terminals.release,
        }
        self.advertised = {"session/request_permission"}
        if options.fs:
            self.advertised.update(_FS_METHODS)
        if options.terminal:
            self.advertised.update(_TERMINAL_METHODS)

    def set_handler(self, method: str, handler: Handler, advertise: bool = True) -> None:
        self.handlers[method] = handler
        if advertise:
            self.advertised.add(method)
        else:
            self.advertised.discard(method)

    # --- requests and their cancellation -------------------------------------------------------------------

    def accept(self, request_id: JSONValue, method: str, params: JSONValue) -> None:
        """Start serving one request. Its scope is registered now, not when the task starts: a
        `$/cancel_request` on the very next line must find it."""
        scope = anyio.CancelScope()
        self._incoming[_id_key(request_id)] = scope
        self._spawn(lambda: self._serve(request_id, method, params, scope))

    def cancel_request(self, params: JSONObject) -> None:
        """The agent's `$/cancel_request`: the request it names stops (and is answered -32800)."""
        scope = self._incoming.get(_id_key(params.get("requestId")))
        if scope is not None:
            scope.cancel()

    def new_turn(self, session_id: str) -> None:
        """A new prompt turn: permission requests are answered by the policy again."""
        self._cancelled_sessions.discard(session_id)

    def session_cancelled(self, session_id: str) -> None:
        """The client is cancelling the session: every permission request of it from now until the next turn
        is answered `cancelled`."""
        self._cancelled_sessions.add(session_id)

    def withdraw_permissions(self, session_id: str) -> None:
        """The session's permission requests still waiting for the policy are answered `cancelled` now."""
        for sid, scope in list(self._permission_scopes.values()):
            if sid == session_id:
                scope.cancel()

    async def _serve(self, request_id: JSONValue, method: str, params: JSONValue, scope: anyio.CancelScope) -> None:
        key = _id_key(request_id)
        reply: dict[str, object] = {"jsonrpc": "2.0", "id": request_id}
        handler = self.handlers.get(method)
        if method not in self.advertised or handler is None:
            self._incoming.pop(key, None)
            kind = "unadvertised_method" if method in self.handlers else "unknown_method"
            self._record(kind, f"the agent called {method}, which this client did not advertise", None)
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
        else:
            try:
                with scope:
                    try:
                        reply["result"] = await handler(params if isinstance(params, dict) else {})
                    except AcpError as exc:
                        reply["error"] = exc.to_dict()
                    except Exception as exc:  # a handler bug must not take the connection down
                        reply["error"] = {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}
            finally:
                self._incoming.pop(key, None)
            if scope.cancelled_caught:
                # The agent withdrew the request with $/cancel_request: answer -32800 (Appendix A).
                reply.pop("result", None)
                reply["error"] = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
        if self._exited():
            return
        try:
            await self._send(reply)
        except AgentExited:
            pass

    # --- session/request_permission ---------------------------------------------------------------------------

    async def _handle_permission(self, params: JSONObject) -> JSONObject:
        sid = params.get("sessionId")
        outcome: Outcome = {"outcome": "cancelled"}
        if sid not in self._cancelled_sessions:
            scope = anyio.CancelScope()
            self._permission_counter += 1
            token = self._permission_counter
            self._permission_scopes[token] = (sid, scope)
            try:
                with scope:
                    outcome = await handlers.decide_permission(self.options.permission, params)
            finally:
                self._permission_scopes.pop(token, None)
            if scope.cancelled_caught:
                outcome = {"outcome": "cancelled"}
        self.permission_log.append((params, outcome))
        hook = self._permission_hook()
        if hook is not None:
            hook(params, outcome)
        return {"outcome": outcome}
