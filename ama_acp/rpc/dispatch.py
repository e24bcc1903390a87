"""Method table → handler, through jsonrpcserver.

jsonrpcserver does the JSON-RPC 2.0 envelope work (request validation, -32600/-32601, no replies to
notifications). Each ACP method registers a handler taking one typed params Struct; this module decodes
the params with msgspec (so -32602 names the offending field) and maps `AcpError` to the error object.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import msgspec
from jsonrpcserver import Error, Result, Success, async_dispatch_to_serializable

from ama_acp.rpc.errors import AcpError

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]]

# Work a handler wants done right after its response is written (see Peer._serve).
after_response: ContextVar[list[Callable[[], Awaitable[None]]]] = ContextVar("after_response")


def defer(run: Callable[[], Awaitable[None]]) -> None:
    after_response.get().append(run)


class Dispatcher:
    def __init__(self) -> None:
        self._methods: dict[str, Callable[..., Awaitable[Result]]] = {}

    def add(self, method: str, params_type: type | None, handler: Handler) -> None:
        async def call(_ctx: Any, **params: Any) -> Result:
            try:
                if params_type is None:
                    args: Any = params
                else:
                    args = msgspec.convert(params, params_type, strict=True)
            except msgspec.ValidationError as exc:
                return Error(-32602, f"Invalid params: {exc}", {"method": method})
            try:
                result = await handler(args)
            except AcpError as exc:
                return Error(exc.code, exc.message, exc.data)
            except Exception as exc:
                log.exception("internal error in %s", method)
                return Error(-32603, f"Internal error: {type(exc).__name__}: {exc}")
            return Success(result if result is not None else {})

        self._methods[method] = call

    def has(self, method: str) -> bool:
        return method in self._methods

    async def dispatch(self, message: Any) -> dict[str, Any] | None:
        """Answer one decoded message; None for notifications (JSON-RPC never answers those)."""
        return await async_dispatch_to_serializable(
            "",  # already decoded: the deserializer hands jsonrpcserver the object itself
            self._methods,
            context=None,
            deserializer=lambda _text: message,
        )
