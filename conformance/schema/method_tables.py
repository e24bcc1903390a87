"""The method -> definition tables, derived from the schema's own structure.

Union branches that ``$ref`` a definition carrying ``x-method`` / ``x-side`` name each method's params or result;
the tables are cross-checked against the branch descriptions ("Successful result returned for a `initialize`
request.") and against the ``ClientRequest`` union, and must cover the methods ama and the suite rely on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Methods ama relies on; the derived tables must cover them (asserted when the validator is built).
REQUIRED_AGENT_REQUESTS = frozenset(
    {
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
)
REQUIRED_AGENT_NOTIFICATIONS = frozenset({"session/update"})
REQUIRED_RESULTS = frozenset(
    {
        "initialize",
        "authenticate",
        "logout",
        "session/new",
        "session/load",
        "session/resume",
        "session/list",
        "session/close",
        "session/delete",
        "session/prompt",
        "session/set_mode",
        "session/set_config_option",
    }
)

_DEF_PREFIX = "#/$defs/"
_RESULT_DESC = re.compile(r"`([^`]+)` request")


@dataclass(frozen=True)
class MethodDef:
    method: str
    definition: str  # name under $defs
    branch_title: str


def _def_name(ref: str) -> str:
    if not ref.startswith(_DEF_PREFIX):
        raise ValueError(f"unexpected $ref {ref!r}")
    return ref[len(_DEF_PREFIX) :]


def _ref_branches(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The union branches under ``node``: ``anyOf`` items of the form ``{title, allOf: [{$ref}]}``."""
    found: list[Mapping[str, Any]] = []
    for alt in node.get("anyOf", ()):
        all_of = alt.get("allOf")
        if all_of and isinstance(all_of[0], Mapping) and "$ref" in all_of[0]:
            found.append(alt)
        elif "anyOf" in alt:
            found.extend(_ref_branches(alt))
    return found


def _root_branch(schema: Mapping[str, Any], title: str) -> Mapping[str, Any]:
    for alt in schema.get("anyOf", ()):
        if alt.get("title") == title:
            return alt
    raise ValueError(f"schema root has no {title!r} branch")


def _side_defs(schema: Mapping[str, Any], side: str) -> dict[str, str]:
    """{'Request': 'AgentRequest', 'Response': 'AgentResponse', 'Notification': 'AgentNotification'} for side."""
    out: dict[str, str] = {}
    for alt in _root_branch(schema, side).get("anyOf", ()):
        out[alt["title"]] = _def_name(alt["allOf"][0]["$ref"])
    return out


def _union_methods(
    defs: Mapping[str, Any], node: Mapping[str, Any], *, expect_side: str, from_description: bool
) -> tuple[dict[str, MethodDef], list[str]]:
    """method -> MethodDef for every branch of the union under ``node``; also the extension branches."""
    table: dict[str, MethodDef] = {}
    extensions: list[str] = []
    for branch in _ref_branches(node):
        name = _def_name(branch["allOf"][0]["$ref"])
        target = defs[name]
        method = target.get("x-method")
        described = _RESULT_DESC.findall(branch.get("description", "")) if from_description else []
        if method is None:
            if described:
                raise ValueError(f"branch {branch.get('title')!r} describes {described} but {name} has no x-method")
            extensions.append(name)  # ExtRequest / ExtNotification / ExtResponse: arbitrary payloads
            continue
        if target.get("x-side") != expect_side:
            raise ValueError(f"{name} has x-side {target.get('x-side')!r}, expected {expect_side!r}")
        if from_description and described != [method]:
            raise ValueError(f"branch {branch.get('title')!r}: description names {described}, x-method is {method!r}")
        if method in table:
            raise ValueError(f"method {method!r} appears twice in one union")
        table[method] = MethodDef(method, name, branch.get("title", name))
    return table, extensions


def _payload_node(defs: Mapping[str, Any], envelope: str, prop: str) -> Mapping[str, Any]:
    """The ``params``/``result`` property node of a JSON-RPC envelope definition."""
    env = defs[envelope]
    if "properties" in env:
        return env["properties"][prop]
    for alt in env.get("anyOf", ()):  # responses: anyOf [Result, Error]
        if prop in alt.get("properties", {}):
            return alt["properties"][prop]
    raise ValueError(f"{envelope} has no {prop!r} property")


@dataclass(frozen=True)
class MethodTables:
    agent_requests: dict[str, MethodDef]  # agent -> client requests: params definition
    agent_notifications: dict[str, MethodDef]  # agent -> client (and protocol-level) notifications: params
    agent_results: dict[str, MethodDef]  # client -> agent requests: definition of the result the agent returns
    client_requests: dict[str, MethodDef]  # client -> agent requests: params definition (cross-check only)
    client_notifications: dict[str, MethodDef]
    error_definition: str

    def format(self) -> str:
        lines = []
        for label, table, part in (
            ("agent -> client requests (params)", self.agent_requests, "params"),
            ("agent -> client notifications (params)", self.agent_notifications, "params"),
            ("client -> agent requests (result of ama's response)", self.agent_results, "result"),
        ):
            lines.append(f"{label}:")
            for method in sorted(table):
                lines.append(f"  {method:<28} {part} -> {table[method].definition}")
        lines.append(f"error responses: error -> {self.error_definition}")
        return "\n".join(lines)


def derive_method_tables(schema: Mapping[str, Any]) -> MethodTables:
    defs = schema["$defs"]
    agent = _side_defs(schema, "Agent")
    client = _side_defs(schema, "Client")

    agent_requests, _ = _union_methods(
        defs, _payload_node(defs, agent["Request"], "params"), expect_side="client", from_description=False
    )
    agent_notifications, _ = _union_methods(
        defs, _payload_node(defs, agent["Notification"], "params"), expect_side="client", from_description=False
    )
    # Protocol-level notifications ($/cancel_request) may be sent by either side.
    protocol = _root_branch(schema, "ProtocolLevel")
    proto_notifications, _ = _union_methods(
        defs, protocol["properties"]["params"], expect_side="protocol", from_description=False
    )
    for method, md in proto_notifications.items():
        if not method.startswith("$/"):
            raise ValueError(f"protocol-level notification {method!r} does not start with '$/'")
        agent_notifications.setdefault(method, md)
    agent_results, _ = _union_methods(
        defs, _payload_node(defs, agent["Response"], "result"), expect_side="agent", from_description=True
    )
    client_requests, _ = _union_methods(
        defs, _payload_node(defs, client["Request"], "params"), expect_side="agent", from_description=False
    )
    client_notifications, _ = _union_methods(
        defs, _payload_node(defs, client["Notification"], "params"), expect_side="agent", from_description=False
    )
    client_results, _ = _union_methods(
        defs, _payload_node(defs, client["Response"], "result"), expect_side="client", from_description=True
    )

    # Cross-checks: every request one side sends has a result definition on the other side.
    if set(client_requests) != set(agent_results):
        diff = sorted(set(client_requests) ^ set(agent_results))
        raise ValueError(f"ClientRequest methods and AgentResponse results differ: {diff}")
    if set(agent_requests) != set(client_results):
        diff = sorted(set(agent_requests) ^ set(client_results))
        raise ValueError(f"AgentRequest methods and ClientResponse results differ: {diff}")
    error_branch = [alt for alt in defs[agent["Response"]].get("anyOf", ()) if "error" in alt.get("properties", {})]
    if len(error_branch) != 1:
        raise ValueError("AgentResponse has no single error branch")
    error_definition = _def_name(error_branch[0]["properties"]["error"]["allOf"][0]["$ref"])

    missing = (
        (REQUIRED_AGENT_REQUESTS - set(agent_requests))
        | (REQUIRED_AGENT_NOTIFICATIONS - set(agent_notifications))
        | {f"result of {m}" for m in REQUIRED_RESULTS - set(agent_results)}
    )
    if missing:
        raise ValueError(f"the schema's method tables do not cover: {sorted(missing)}")
    return MethodTables(
        agent_requests=agent_requests,
        agent_notifications=agent_notifications,
        agent_results=agent_results,
        client_requests=client_requests,
        client_notifications=client_notifications,
        error_definition=error_definition,
    )
