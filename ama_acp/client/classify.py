"""What a JSON line from the agent is, judged by the client itself.

This is the client's own reading of JSON-RPC 2.0, written apart from the server's (`rpc/dispatch.classify`) on
purpose: the conformance suite judges agents, ama among them, through this client, and a judge that shared
ama's classification would pass whatever ama's classification gets wrong. It is also more lenient than the
server's: what it can still understand it acts on, and every departure from the protocol becomes a problem
to record (a `not_jsonrpc` violation), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ama_acp.rpc.dispatch import JSONObject, JSONValue


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """A request of the agent's: it must be answered, with its `id` as it came (any JSON value)."""

    id: JSONValue
    method: str
    params: JSONValue  # None when absent; whatever it is, the handler for the method sees an object


@dataclass(frozen=True, slots=True)
class AgentNotification:
    method: str
    params: JSONObject  # `{}` when absent or not an object


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """The agent's answer to one of the client's requests: `error` when it has one (it wins over `result`)."""

    id: JSONValue
    result: JSONValue = None
    error: JSONValue = None
    has_error: bool = False


AgentMessage = AgentRequest | AgentNotification | AgentResponse


@dataclass(frozen=True, slots=True)
class Classified:
    message: AgentMessage | None  # None: nothing to act on
    problems: list[str] = field(default_factory=list)  # what breaks JSON-RPC 2.0, in the order found


def classify(message: JSONValue) -> Classified:
    if not isinstance(message, dict):
        return Classified(None, ["a stdout line is JSON but not a JSON-RPC object"])
    problems = [] if message.get("jsonrpc") == "2.0" else ['missing or wrong "jsonrpc": "2.0"']
    if "method" in message:
        return _call(message, problems)
    if "id" in message and ("result" in message or "error" in message):
        return _response(message, problems)
    return Classified(None, [*problems, "neither a request, a notification nor a response"])


def _call(message: JSONObject, problems: list[str]) -> Classified:
    """A message with a `method`: a request when it has an `id`, else a notification."""
    method = message["method"]
    if not isinstance(method, str):
        return Classified(None, [*problems, "`method` is not a string"])
    params = message.get("params")
    if "id" in message:
        return Classified(AgentRequest(message["id"], method, params), problems)
    return Classified(AgentNotification(method, params if isinstance(params, dict) else {}), problems)


def _response(message: JSONObject, problems: list[str]) -> Classified:
    if "result" in message and "error" in message:
        problems.append("a response carries both result and error")
    has_error = "error" in message
    return Classified(AgentResponse(message["id"], message.get("result"), message.get("error"), has_error), problems)


def well_formed_error(error: JSONValue) -> bool:
    """A JSON-RPC error object: an integer `code` and a string `message`."""
    return isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
