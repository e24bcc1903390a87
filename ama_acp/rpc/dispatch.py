"""The JSON-RPC 2.0 envelope and the method table.

Every decoded line is classified here into one typed value — `Request`, `Notification`, `Response` or
`Invalid` — before anything acts on it. Classification never raises: ids of any JSON type, params of any
shape and values of any depth become a specific answer (`Invalid`, answered with the request's id whenever
it has a usable one) or a quiet drop, never an exception in the reader. The peer decides what to write.

The rules (JSON-RPC 2.0 as ACP v1 uses it):
- a request id is a string or an int64 (or null, allowed by both specs though discouraged); any other id on
  a message with a method is -32600 answered with id null, since no usable id can be echoed;
- `params` absent means `{}`; an object is decoded per method with msgspec (-32602 names the field); an array
  is -32602 (ACP passes params by name); null, a string, a number or a boolean is -32600 (JSON-RPC: params
  must be a structured value), all answered with the request's id;
- a batch (a JSON array) is one -32600 with id null (ACP v1 has no batches, R8);
- a method without an id is a notification and never answered (R13), however broken: one that is not
  JSON-RPC 2.0, has a method that is not a string, params that are not an object or nests too deep is
  unusable (`params` None) and dropped without running anything;
- nesting deeper than `MAX_DEPTH` is -32600 with the id: deeper values would overflow the recursion limit of
  whatever walks them next (msgspec, the handlers, the log), and no ACP message needs them;
- a message without a method but with an id is a response, whatever else it holds; it is the client's word
  about one of our requests and is never answered.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from itertools import islice
from typing import Any, TypeGuard, TypeVar, overload

import msgspec

from ama_acp.rpc.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNEXPECTED,
    AcpError,
    ClientError,
    clip,
)

log = logging.getLogger(__name__)

# A JSON value as msgspec's untyped decoder returns it: what a message holds before a method's Struct checks it.
JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]
JSONObject = dict[str, JSONValue]
RequestId = str | int | None

P = TypeVar("P", bound=msgspec.Struct)
# A handler's result is encoded by msgspec as it is (a Struct, a dict, None for `{}`); anything msgspec cannot
# encode is answered -32603 (Peer._encode_response), so the honest static type is `object`.
Handler = Callable[[P], Awaitable[object]]
RawHandler = Callable[[JSONObject], Awaitable[object]]

MAX_DEPTH = 128
_INT64 = (-(2**63), 2**63 - 1)

# Work a handler wants done right after its response is written (see Peer._serve).
after_response: ContextVar[list[Callable[[], Awaitable[None]]]] = ContextVar("after_response")


def defer(run: Callable[[], Awaitable[None]]) -> None:
    after_response.get().append(run)


# --- the envelope --------------------------------------------------------------------------------------------


class Request(msgspec.Struct, frozen=True):
    id: RequestId
    method: str
    params: JSONObject


class Notification(msgspec.Struct, frozen=True):
    method: str
    params: JSONObject | None  # None: an unusable notification (a notification is never answered)


class Response(msgspec.Struct, frozen=True):
    id: JSONValue  # any JSON value: only an int can be one of ours
    result: JSONValue = None
    error: ClientError | None = None


class Invalid(msgspec.Struct, frozen=True):
    id: RequestId
    error: AcpError


Incoming = Request | Notification | Response | Invalid


def is_request_id(value: object) -> TypeGuard[str | int]:
    """A string or an int64; `type() is` keeps out bool and float, which would hash equal to ints."""
    return type(value) is str or (type(value) is int and _INT64[0] <= value <= _INT64[1])


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """True when containers nest more than `limit` levels (the top-level value is level 1). Iterative, so the
    check itself cannot overflow the stack it protects."""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def classify(message: Any) -> Incoming:  # Any: the decoder's output, not yet looked at
    if not isinstance(message, dict):
        return Invalid(None, _not_an_object(message))
    deep = too_deep(message)
    if "method" not in message:
        return _classify_response(message, deep)
    if "id" not in message:  # checked before anything is refused: no error may answer a notification (R13)
        return _classify_notification(message, deep)
    req_id = message["id"]
    if req_id is not None and not is_request_id(req_id):
        return Invalid(None, AcpError.invalid_request("id must be a string or an integer"))
    if deep:
        return Invalid(req_id, AcpError.invalid_request(f"the message nests deeper than {MAX_DEPTH} levels"))
    method = message["method"]
    if not isinstance(method, str):
        return Invalid(req_id, AcpError.invalid_request("method must be a string"))
    if message.get("jsonrpc") != "2.0":
        return Invalid(req_id, AcpError.invalid_request('jsonrpc must be "2.0"'))
    params = message.get("params", {})
    if not isinstance(params, dict):
        return Invalid(req_id, _params_not_an_object(params))
    return Request(req_id, method, params)


def _not_an_object(message: object) -> AcpError:
    if isinstance(message, list):
        return AcpError.invalid_request("batches are not supported in ACP v1; send one message a line")
    return AcpError.invalid_request("a message must be a JSON object")


def _params_not_an_object(params: object) -> AcpError:
    if isinstance(params, list):
        return AcpError.invalid_params("params must be an object (ACP passes params by name)")
    return AcpError.invalid_request("params must be an object")


def _classify_notification(message: dict[str, Any], deep: bool) -> Notification:
    method = message["method"]
    params = message.get("params", {})
    usable = not deep and isinstance(method, str) and message.get("jsonrpc") == "2.0" and isinstance(params, dict)
    return Notification(method if isinstance(method, str) else "", params if usable else None)


def _classify_response(message: dict[str, Any], deep: bool) -> Incoming:
    if "id" not in message:
        if "result" in message or "error" in message:
            return Response(None, error=ClientError.from_wire(None))  # matches nothing: ignored
        return Invalid(None, AcpError.invalid_request("not a request, a notification or a response"))
    rid = message["id"]
    if deep:
        return Response(rid, error=ClientError(INVALID_REQUEST, f"the response nests deeper than {MAX_DEPTH} levels"))
    error = message.get("error")
    if error is not None:
        return Response(rid, error=ClientError.from_wire(error))
    if "result" not in message:
        return Response(rid, error=ClientError(INVALID_REQUEST, "the response has neither result nor error"))
    return Response(rid, result=message["result"])


# A line too deep for msgspec (RecursionError before any value exists): its top-level members are found by a
# flat scan instead, a run of brackets counted in one match so `[[[[…` costs nothing. The scan stops after
# `_SCAN_TOKENS` tokens (a worst case `[1,[1,…` takes ~0.1 s for them): an id is almost always near the
# start, and the rest of such a line is junk anyway.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+|[:,]')
_SCAN_TOKENS = 50_000


def classify_too_deep(line: bytes) -> Incoming:
    """What to do with a line whose nesting overflowed the decoder, from its top-level `id` and `method`:
    a request is answered -32600 with its id; a notification (a method, no id seen) is never answered (R13);
    a response is an error for that request of ours; when the scan stopped before it could tell requests
    from responses, -32600 with id null."""
    members, complete = _top_level_scalars(line)
    rid = members.get("id")
    if "method" in members:
        if "id" not in members:
            return Notification("", None)
        if is_request_id(rid) or rid is None:
            return Invalid(rid, AcpError.invalid_request(f"the message nests deeper than {MAX_DEPTH} levels"))
    elif "id" in members and complete:
        return Response(rid, error=ClientError(INVALID_REQUEST, f"the response nests deeper than {MAX_DEPTH} levels"))
    return Invalid(None, AcpError.invalid_request(f"the message nests deeper than {MAX_DEPTH} levels"))


def _top_level_scalars(line: bytes) -> tuple[JSONObject, bool]:
    """The scalar `id` and the `method` key of a top-level object, and whether the whole object was seen."""
    found: JSONObject = {}
    if not line.lstrip().startswith(b"{"):
        return found, False
    depth = 0
    key: str | None = None  # the member name last seen at depth 1
    wanted: str | None = None  # `id` or `method` just after its ':', at `value_from`: the next token ends it
    value_from = 0
    for m in islice(_TOKEN.finditer(line), _SCAN_TOKENS):
        tok = m.group()
        if wanted is not None:
            found[wanted] = _member_value(line[value_from : m.start()], tok)
            wanted = None
        first = tok[:1]
        if first in (b"[", b"{"):
            depth += len(tok)
        elif first in (b"]", b"}"):
            depth -= len(tok)
            if depth <= 0:
                return found, True
        elif tok == b":":
            if depth == 1 and key in ("id", "method"):
                wanted, value_from = key, m.end()
        elif tok == b",":
            key = None
        elif depth == 1:
            key = _member_key(tok)
    return found, False


def _member_value(between: bytes, tok: bytes) -> JSONValue:
    """A member's value from what follows its `:`: the string token itself, or the bytes up to that token."""
    text = tok if tok[:1] == b'"' and not between.strip() else between
    try:
        value: JSONValue = msgspec.json.decode(text.strip())
    except msgspec.DecodeError:
        return []  # present, but not a scalar (an object or array starts here): no usable id
    return value


def _member_key(tok: bytes) -> str | None:
    try:
        key = msgspec.json.decode(tok)
    except msgspec.DecodeError:
        return None
    return key if isinstance(key, str) else None


# --- the method table ----------------------------------------------------------------------------------------


class Dispatcher:
    """Methods by kind, as the schema has them: a request method is not run for a notification (nobody would
    see its result; R16 ignores unknown notifications) and a notification method asked as a request is
    -32601, as the official SDK answers it (the schema defines no result for it)."""

    def __init__(self) -> None:
        # Any: the table holds handlers of every params type; add() checks each against its own Struct.
        self._methods: dict[str, tuple[type[msgspec.Struct] | None, Callable[[Any], Awaitable[object]], bool]] = {}

    @overload
    def add(self, method: str, params_type: type[P], handler: Handler[P], *, notification: bool = False) -> None: ...

    @overload
    def add(self, method: str, params_type: None, handler: RawHandler, *, notification: bool = False) -> None: ...

    def add(
        self,
        method: str,
        params_type: type[msgspec.Struct] | None,
        handler: Callable[[Any], Awaitable[object]],
        *,
        notification: bool = False,
    ) -> None:
        """`params_type` None: the handler gets the params object as decoded."""
        self._methods[method] = (params_type, handler, notification)

    def has(self, method: str, *, notification: bool = False) -> bool:
        entry = self._methods.get(method)
        return entry is not None and entry[2] == notification

    async def call(self, method: str, params: JSONObject, *, notification: bool = False) -> object:
        """The handler's result (`{}` for None). Raises AcpError only: a handler's unexpected exception is
        logged with its traceback under UNEXPECTED and becomes -32603."""
        entry = self._methods.get(method)
        if entry is None:
            raise AcpError.method_not_found(method)
        params_type, handler, is_notification = entry
        if is_notification != notification:
            kind = "a notification: send it without an id" if is_notification else "a request: send it with an id"
            raise AcpError(METHOD_NOT_FOUND, f"Method not found: {method} is {kind}", {"method": method})
        try:
            args: msgspec.Struct | JSONObject = (
                params if params_type is None else msgspec.convert(params, params_type, strict=True)
            )
        except msgspec.ValidationError as exc:
            raise AcpError(INVALID_PARAMS, f"Invalid params: {exc}", {"method": method}) from None
        try:
            result = await handler(args)
        except AcpError:
            raise
        except Exception as exc:
            log.exception("%s internal error in %s", UNEXPECTED, method)
            raise AcpError.internal(f"{type(exc).__name__}: {clip(str(exc))}") from None
        return result if result is not None else {}
