"""The protocol layer's errors (the `ProtocolError` family of `ama_acp/errors.py`) and the one table of
JSON-RPC / ACP error codes: every code ama sends or reads is named here, and nowhere else in `ama_acp/` is
one written as a number (`tests/unit/test_error_families.py` checks it). `docs/errors.md` says when each
is sent.

Handlers raise `AcpError`; the dispatcher turns it into the JSON-RPC error object. `ClientError` is the
client's error answer to one of ama's requests.
"""

from __future__ import annotations

from typing import Any

from ama_acp.errors import ProtocolError

# JSON-RPC 2.0's own codes.
PARSE_ERROR = -32700  # a line that is not JSON
INVALID_REQUEST = -32600  # JSON that is not a JSON-RPC 2.0 request object
METHOD_NOT_FOUND = -32601  # an unknown method, or one whose capability ama did not advertise
INVALID_PARAMS = -32602  # params that break the method's schema (the message names the field)
INTERNAL_ERROR = -32603  # a bug in ama; the log has the traceback
# ACP's codes.
REQUEST_CANCELLED = -32800  # `$/cancel_request` for a request still running; also a request the closed pipe ended
AUTH_REQUIRED = -32000  # ACP `auth_required`: no usable model yet (sign in with one of the initialize methods)
RESOURCE_NOT_FOUND = -32002  # an unknown session id; a missing file (from ama's own client)
# ama's own (in the implementation-defined server-error range).
SESSION_BUSY = -32010  # a second `session/prompt` while a turn of that session is running


class AcpError(ProtocolError):
    """A JSON-RPC error ama answers a request with. `data`: any JSON-encodable value (msgspec encodes it)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    @classmethod
    def parse_error(cls, detail: str = "") -> AcpError:
        return cls(PARSE_ERROR, "Parse error" + (f": {detail}" if detail else ""))

    @classmethod
    def invalid_request(cls, detail: str) -> AcpError:
        return cls(INVALID_REQUEST, f"Invalid request: {detail}")

    @classmethod
    def method_not_found(cls, method: str) -> AcpError:
        return cls(METHOD_NOT_FOUND, f"Method not found: {clip(method)}", {"method": clip(method)})

    @classmethod
    def invalid_params(cls, detail: str) -> AcpError:
        return cls(INVALID_PARAMS, f"Invalid params: {detail}")

    @classmethod
    def internal(cls, detail: str = "internal error") -> AcpError:
        return cls(INTERNAL_ERROR, f"Internal error: {detail}")

    @classmethod
    def cancelled(cls) -> AcpError:
        return cls(REQUEST_CANCELLED, "Request cancelled")

    @classmethod
    def auth_required(cls, why: str, methods: list[dict[str, Any]]) -> AcpError:
        """No usable model: the client should offer the person `methods` (the initialize `authMethods`).
        `message` is one short sentence (JSON-RPC's, and R14's); `details` holds the whole of `why` with what to
        do, which some clients (toad) show in place of the message."""
        first, stop, _rest = why.partition(". ")
        message = f"Authentication required: {first}{'.' if stop else ''}"
        if len(message) > 200:  # a reason of more than a sentence's length: it stays whole in `details`
            message = "Authentication required."
        return cls(AUTH_REQUIRED, message, {"details": f"Authentication required: {why}", "authMethods": methods})

    @classmethod
    def session_not_found(cls, session_id: str) -> AcpError:
        return cls(RESOURCE_NOT_FOUND, f"Session not found: {clip(session_id)}", {"sessionId": clip(session_id)})

    @classmethod
    def session_busy(cls, session_id: str) -> AcpError:
        return cls(
            SESSION_BUSY,
            "This session is already running a prompt; wait for it to finish or cancel it first",
            {"sessionId": session_id},
        )


class ClientError(ProtocolError):
    """The client answered one of ama's requests with an error.

    `message` is the client's own words, fit to show to the model and the person: when the client put them in
    `data` under a generic JSON-RPC message (the official Python SDK sends `"Internal error"` with
    `data.details` for any exception in its handler), they are taken from there. `str()` is that message
    plus the code, on one short line. `wire_message` keeps the message exactly as sent.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:  # data: the client's JSON, unchecked
        self.code = code
        self.wire_message = message
        self.data = data
        self.message = _client_text(message, data)
        super().__init__(f"{self.message} ({code})")

    @classmethod
    def from_wire(cls, error: Any) -> ClientError:
        """The `error` member of a client's response, whatever its shape (it is the client's word, unchecked)."""
        if not isinstance(error, dict):
            return cls(INTERNAL_ERROR, "the client answered with a malformed error")
        code = error.get("code")
        message = error.get("message")
        return cls(
            code if type(code) is int else INTERNAL_ERROR,
            message if isinstance(message, str) and message.strip() else "",
            error.get("data"),
        )


# JSON-RPC's own names for its codes: a client that says only this has put its real words in `data`.
_GENERIC = frozenset(
    {"internal error", "invalid params", "invalid request", "parse error", "method not found", "server error", "error"}
)
_DETAIL_KEYS = ("details", "detail", "message", "reason", "error")
_MAX_TEXT = 500


def _client_text(message: str, data: Any) -> str:
    detail = _detail(data)
    message = message.strip()
    if detail and detail not in message:
        generic = not message or message.lower().rstrip(".") in _GENERIC
        message = detail if generic else f"{message}: {detail}"
    if not message:
        message = "the client answered with an error and no message"
    return clip(" ".join(message.split()), _MAX_TEXT)


def _detail(data: Any) -> str | None:
    """The client's own words in an error's `data`: a string, or the first string member of _DETAIL_KEYS that
    is not blank; stripped."""
    text = data if isinstance(data, str) else None
    if isinstance(data, dict):
        text = next((v for k in _DETAIL_KEYS if isinstance(v := data.get(k), str) and v.strip()), None)
    return text.strip() if text is not None and text.strip() else None


def clip(text: str, limit: int = 200) -> str:
    """Hostile text echoed in an error or a log line stays short (R14: one short sentence)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The one prefix of every log line about an exception ama did not expect (a bug): the test suite checks that
# no ama log contains it.
UNEXPECTED = "UNEXPECTED:"
