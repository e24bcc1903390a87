"""Validate every message an agent writes against the pinned official ACP schema, per method.

The schema is vendored in ``<repo>/schema/v1/`` — ``schema.unstable.json`` and ``schema.json`` from the npm
package ``@agentclientprotocol/sdk`` at the version ``schema/pin.json`` names — and checked against the sha256
values in that pin once per test process. Nothing here fetches anything: no npm, no network, no cache. A file
that is missing or does not match its pin fails loudly (``SchemaUnavailable``); ``schema/refresh.py`` is the
person-run tool that re-fetches the files and rewrites the pin (see ``schema/README.md``).

The schema's root is an ``anyOf`` loose enough to accept almost anything, so messages are never
validated against the root. Instead each message is validated against the definition of *its*
method:

* requests and notifications the agent sends (agent -> client) by their ``method``: the params definition
  taken from the ``AgentRequest`` / ``AgentNotification`` unions (plus the protocol-level ``$/...``
  notifications);
* responses the agent sends by the method of the client request they answer: the result definition taken
  from the ``AgentResponse`` union; error responses against ``Error``.

The method -> definition tables are derived from the schema's own structure (union branches that
``$ref`` a definition carrying ``x-method`` / ``x-side``), cross-checked against the branch
descriptions ("Successful result returned for a `initialize` request.") and against the
``ClientRequest`` union, and asserted to cover the methods ama and the suite rely on.

Public API::

    schema_path(root=SCHEMA_DIR) -> Path           # v1/schema.unstable.json, verified against the pin
    stable_schema_path(root=SCHEMA_DIR) -> Path    # v1/schema.json, verified against the pin
    load_validator(path: Path | None = None) -> WireValidator
    WireValidator.validate_outgoing(msg, request_methods) -> None      # raises AssertionError
    WireValidator.validate_line(line, request_methods) -> dict         # raises AssertionError
    WireRecorder(validator).sent(msg) / .received(line) / .assert_clean()
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any


def _schema_dir() -> Path:
    """The vendored schema: ``<repo>/schema`` when the suite runs from a checkout (or an editable install),
    else the copy the wheel carries as ``conformance/_schema`` (pyproject maps that package onto schema/)."""
    here = Path(__file__).resolve().parent
    repo = here.parent / "schema"
    return repo if (repo / "pin.json").is_file() else here / "_schema"


SCHEMA_DIR = _schema_dir()
UNSTABLE_NAME = "schema.unstable.json"
STABLE_NAME = "schema.json"

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

_MAX_SHOWN = 600  # characters of the offending message quoted in a failure


# --------------------------------------------------------------------------------------------------
# Reading the vendored schema
# --------------------------------------------------------------------------------------------------


class SchemaUnavailable(RuntimeError):
    """The vendored schema is missing or does not match schema/pin.json. str() says which file and what to do."""


@functools.cache
def _pin_tool() -> ModuleType:
    """schema/refresh.py, which owns the pin format and its check. It is loaded from its path because schema/
    is data plus a person-run script, not a package (and a top-level package named ``schema`` would shadow
    the PyPI library of that name)."""
    path = SCHEMA_DIR / "refresh.py"
    spec = importlib.util.spec_from_file_location("ama_schema_refresh", path)
    if spec is None or spec.loader is None:
        raise SchemaUnavailable(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # msgspec resolves the Structs' postponed annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@functools.cache
def _verified(root: Path) -> Path:
    """``root`` once every file it vendors matches its pin (hashed once per process and root)."""
    tool = _pin_tool()
    try:
        found: list[str] = tool.problems(root)
    except tool.PinError as exc:
        found = [str(exc)]
    if found:
        raise SchemaUnavailable(
            f"the vendored ACP schema in {root} does not match its pin:\n  "
            + "\n  ".join(found)
            + "\nThe files are committed byte for byte; restore them from git, or, for a reviewed change of"
            " version, run `python schema/refresh.py` (see schema/README.md)."
        )
    return root


def schema_path(root: Path = SCHEMA_DIR) -> Path:
    """Path of the verified ``v1/schema.unstable.json`` (raises SchemaUnavailable, saying why)."""
    return _verified(root.resolve()) / "v1" / UNSTABLE_NAME


def stable_schema_path(root: Path = SCHEMA_DIR) -> Path:
    """Path of the verified stable ``v1/schema.json`` from the same package."""
    return _verified(root.resolve()) / "v1" / STABLE_NAME


# --------------------------------------------------------------------------------------------------
# Deriving the method -> definition tables from the schema
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------

_INT_FORMATS = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:\S*$")
_SCHEMA_URI = "urn:ama:acp-schema:v1:unstable"  # the id the validator registers the schema under


def _union_tag(branches: object) -> str | None:
    """The discriminator property of a tagged union, or None if ``branches`` is not one.

    A tagged union: every branch is ``{"type": "object", "required": [..tag..], "properties": {tag: {"const": c}}}``
    (plus anything else) and the constants are pairwise distinct.
    """
    if not isinstance(branches, list) or len(branches) < 2 or not all(isinstance(b, dict) for b in branches):
        return None
    candidates: set[str] | None = None
    for b in branches:
        props = b.get("properties")
        if b.get("type") != "object" or not isinstance(props, dict):
            return None
        tags = {
            k
            for k, v in props.items()
            if isinstance(v, dict) and "const" in v and k in b.get("required", ()) and isinstance(v["const"], str)
        }
        candidates = tags if candidates is None else candidates & tags
        if not candidates:
            return None
    for tag in sorted(candidates or ()):
        consts = [b["properties"][tag]["const"] for b in branches]
        if len(set(consts)) == len(consts):
            return tag
    return None


TAGGED_UNION_KEYWORD = "x-ama-tagged-union"


def optimize_tagged_unions(node: Any) -> tuple[Any, int]:
    """Rewrite tagged ``oneOf``/``anyOf`` unions into an equivalent, tag-dispatched form.

    jsonschema evaluates every branch of a ``oneOf``; ``SessionUpdate`` has 19, each pulling in further unions,
    which makes validating one ``session/update`` take about a millisecond. In a tagged union (see ``_union_tag``)
    only the branch whose constant equals the instance's tag can match, so ``oneOf``/``anyOf`` [b1..bn] accepts
    exactly what ``{type: object, required: [tag], properties: {tag: {enum: [c1..cn]}}}`` plus "the instance
    is valid against bi where ci == instance[tag]" accepts. The last part is the ``x-ama-tagged-union`` keyword
    (``{"tag": tag, "branches": {ci: bi}}``), implemented by ``_tagged_union_keyword``. The branches are kept
    unchanged. Returns a new tree (the input is not modified) and the number of unions rewritten.
    """
    count = 0

    def walk(n: Any) -> Any:
        nonlocal count
        if isinstance(n, list):
            return [walk(x) for x in n]
        if not isinstance(n, dict):
            return n
        out = {k: walk(v) for k, v in n.items()}
        for kw in ("oneOf", "anyOf"):
            tag = _union_tag(out.get(kw))
            if tag is None:
                continue
            branches = out.pop(kw)
            dispatch = {
                "type": "object",
                "required": [tag],
                "properties": {tag: {"enum": [b["properties"][tag]["const"] for b in branches]}},
                TAGGED_UNION_KEYWORD: {"tag": tag, "branches": {b["properties"][tag]["const"]: b for b in branches}},
            }
            out["allOf"] = [*out.get("allOf", ()), dispatch]
            count += 1
        return out

    return walk(node), count


def _tagged_union_keyword(validator, spec, instance, schema):
    if not validator.is_type(instance, "object"):
        return  # reported by the "type" keyword next to this one
    value = instance.get(spec["tag"])
    branch = spec["branches"].get(value) if isinstance(value, str) else None
    if branch is not None:  # a missing / unknown tag is reported by "required" / "enum"
        yield from validator.descend(instance, branch, schema_path=value)


def _format_checker():
    from jsonschema import FormatChecker

    checker = FormatChecker(())
    for fmt, (lo, hi) in _INT_FORMATS.items():

        def check(instance: object, lo: int = lo, hi: int = hi) -> bool:
            if isinstance(instance, bool) or not isinstance(instance, int | float):
                return True  # `type` reports non-numbers
            return lo <= instance <= hi and float(instance).is_integer()

        checker.checks(fmt)(check)

    @checker.checks("uri")
    def _uri(instance: object) -> bool:
        return not isinstance(instance, str) or bool(_URI_SCHEME.match(instance))

    return checker


def _shorten(obj: object, limit: int = _MAX_SHOWN) -> str:
    try:
        text = json.dumps(obj, ensure_ascii=False, sort_keys=False, default=repr)
    except (TypeError, ValueError):
        text = repr(obj)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _short_message(error) -> str:
    msg = error.message
    return msg if len(msg) <= 700 else f"{msg[:700]}..."


def _is_id(value: object) -> bool:
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_RESPONSE_KEYS = frozenset({"jsonrpc", "id", "result", "error"})


class WireValidator:
    """Validates messages an agent writes, each against the schema definition of its method."""

    def __init__(self, schema: Mapping[str, Any], *, optimize: bool = True) -> None:
        """``optimize`` validates against an equivalent rewrite of the schema (``optimize_tagged_unions``)
        that is several times faster; ``optimize=False`` uses the schema exactly as published."""
        from jsonschema import Draft202012Validator
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        self.schema = schema
        self.tables = derive_method_tables(schema)
        self.optimized_unions = 0
        compiled_schema: Any = schema
        if optimize:
            compiled_schema, self.optimized_unions = optimize_tagged_unions(schema)
        resource = Resource.from_contents(compiled_schema, default_specification=DRAFT202012)
        self._registry = Registry().with_resource(_SCHEMA_URI, resource).crawl()
        self._format_checker = _format_checker()
        self._validator_cls = Draft202012Validator
        if optimize:
            from jsonschema.validators import extend

            self._validator_cls = extend(Draft202012Validator, {TAGGED_UNION_KEYWORD: _tagged_union_keyword})
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- definitions --------------------------------------------------------------------------------

    def definition_validator(self, name: str):
        """A compiled validator for ``$defs/<name>`` (built once, cached)."""
        v = self._compiled.get(name)
        if v is None:
            if name not in self.schema["$defs"]:
                raise KeyError(f"schema has no definition {name!r}")
            with self._lock:
                v = self._compiled.get(name)
                if v is None:
                    v = self._validator_cls(
                        {"$ref": f"{_SCHEMA_URI}#/$defs/{name}"},
                        registry=self._registry,
                        format_checker=self._format_checker,
                    )
                    self._compiled[name] = v
        return v

    def definition_errors(self, name: str, instance: object, where: str = "$") -> list[str]:
        """Human-readable errors of ``instance`` against ``$defs/<name>`` ([] when valid).

        ``where`` is the JSON path of ``instance`` inside its message (e.g. ``$.params``).
        """
        from jsonschema.exceptions import best_match

        def path(err) -> str:
            return where + err.json_path[1:]

        validator = self.definition_validator(name)
        errors = list(validator.iter_errors(instance))
        if not errors:
            return []
        best = best_match(errors)
        schema_at = "/".join(map(str, best.absolute_schema_path))
        out = [f"{path(best)}: {_short_message(best)} [schema: {schema_at}]"]
        for cause in _explain(best)[:4]:
            if isinstance(cause, tuple):
                _, err, expected = cause
                values = sorted({json.dumps(v) for v in expected})
                out.append(f"  -> {path(err)}: no variant matches; expected one of {', '.join(values)}")
            elif cause is not best:
                out.append(f"  -> {path(cause)}: {_short_message(cause)}")
        return out

    def check_definition(self, name: str, instance: object, *, what: str, where: str, msg: object) -> None:
        errors = self.definition_errors(name, instance, where)
        if errors:
            details = "\n    ".join(errors)
            raise AssertionError(
                f"ACP schema violation: {what} does not match $defs/{name}:\n    {details}\n  message: {_shorten(msg)}"
            )

    # -- messages -----------------------------------------------------------------------------------

    def validate_outgoing(self, msg: object, request_methods: Mapping[Any, str]) -> None:
        """Raise AssertionError unless ``msg`` (a message the agent wrote) is valid for its method.

        ``request_methods`` maps the id of every request the client sent to that request's method; it
        decides which result definition a response is checked against.
        """
        if not isinstance(msg, Mapping):
            raise AssertionError(f"ACP violation: a message must be a JSON object, got {_shorten(msg)}")
        if msg.get("jsonrpc") != "2.0":
            raise AssertionError(f'ACP violation: message lacks "jsonrpc": "2.0": {_shorten(msg)}')
        if "method" in msg:
            self._validate_call(msg)
        elif "id" in msg:
            self._validate_response(msg, request_methods)
        else:
            raise AssertionError(
                f"ACP violation: message is neither a request, notification nor response: {_shorten(msg)}"
            )

    def _validate_call(self, msg: Mapping[str, Any]) -> None:
        method = msg["method"]
        is_request = "id" in msg
        kind = "request" if is_request else "notification"
        extra = set(msg) - _REQUEST_KEYS
        if extra:
            raise AssertionError(f"ACP violation: {kind} has unexpected members {sorted(extra)}: {_shorten(msg)}")
        if not isinstance(method, str) or not method:
            raise AssertionError(f"ACP violation: {kind} method must be a non-empty string: {_shorten(msg)}")
        if is_request:
            self.check_definition("RequestId", msg["id"], what=f"{method} request id", where="$.id", msg=msg)
            if msg["id"] is None:
                raise AssertionError(f"ACP violation: {method} request uses a null id: {_shorten(msg)}")
        if "params" in msg and msg["params"] is not None and not isinstance(msg["params"], Mapping | list):
            raise AssertionError(f"ACP violation: {method} params must be an object or array: {_shorten(msg)}")
        if method.startswith("_"):
            return  # extension method: envelope only
        table = self.tables.agent_requests if is_request else self.tables.agent_notifications
        other = self.tables.agent_notifications if is_request else self.tables.agent_requests
        md = table.get(method)
        if md is None:
            if method in other:
                raise AssertionError(
                    f"ACP violation: {method!r} is a {'notification' if is_request else 'request'} in the schema but "
                    f"the agent sent it as a {kind}: {_shorten(msg)}"
                )
            known = sorted(table)
            raise AssertionError(
                f"ACP violation: the agent sent a {kind} with method {method!r}, which the schema does not define for the "
                f"agent side (known: {known}; extension methods must start with '_'): {_shorten(msg)}"
            )
        if "params" not in msg:
            raise AssertionError(
                f"ACP violation: {method} {kind} has no params (expects {md.definition}): {_shorten(msg)}"
            )
        self.check_definition(md.definition, msg["params"], what=f"{method} params", where="$.params", msg=msg)

    def _validate_response(self, msg: Mapping[str, Any], request_methods: Mapping[Any, str]) -> None:
        rid = msg["id"]
        extra = set(msg) - _RESPONSE_KEYS
        if extra:
            raise AssertionError(f"ACP violation: response has unexpected members {sorted(extra)}: {_shorten(msg)}")
        has_result, has_error = "result" in msg, "error" in msg
        if has_result and has_error:
            raise AssertionError(f"ACP violation: response has both result and error: {_shorten(msg)}")
        if not has_result and not has_error:
            raise AssertionError(f"ACP violation: response has neither result nor error: {_shorten(msg)}")
        if not _is_id(rid):
            raise AssertionError(f"ACP violation: response id must be a string, integer or null: {_shorten(msg)}")
        self.check_definition("RequestId", rid, what="response id", where="$.id", msg=msg)
        if has_error:
            self.check_definition(self.tables.error_definition, msg["error"], what="error", where="$.error", msg=msg)
            if rid is None:
                return  # JSON-RPC: error for a request whose id could not be determined
        if rid is None or rid not in request_methods:
            raise AssertionError(
                f"ACP violation: response to id {rid!r}, which the client never sent "
                f"(sent ids: {_shorten(list(request_methods), 200)}): {_shorten(msg)}"
            )
        if has_error:
            return
        method = request_methods[rid]
        if method.startswith("_"):
            return  # extension request: envelope only
        md = self.tables.agent_results.get(method)
        if md is None:
            raise AssertionError(
                f"ACP violation: the agent returned a result for {method!r} (id {rid!r}), a method the schema does not "
                f"define for the agent side; it should have answered with an error: {_shorten(msg)}"
            )
        self.check_definition(md.definition, msg["result"], what=f"{method} result", where="$.result", msg=msg)

    def parse_line(self, line: str | bytes) -> dict:
        """Parse one raw stdout line strictly (one JSON object, no raw newline, no NaN, no duplicate keys)."""
        if isinstance(line, bytes | bytearray):
            raw = bytes(line)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise AssertionError(f"ACP violation: line is not valid UTF-8 ({exc}): {raw[:200]!r}") from exc
        body = line[:-1] if line.endswith("\n") else line
        if "\n" in body or "\r" in body:
            raise AssertionError(
                f"ACP violation: raw newline/carriage return inside a line (one message per line): "
                f"{body[:_MAX_SHOWN]!r}"
            )
        if not body.strip():
            raise AssertionError("ACP violation: empty line on the wire")

        def no_constants(name: str) -> None:
            raise ValueError(f"{name} is not valid JSON")

        def no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
            obj: dict = {}
            for k, v in pairs:
                if k in obj:
                    raise ValueError(f"duplicate key {k!r}")
                obj[k] = v
            return obj

        try:
            msg = json.loads(body, parse_constant=no_constants, object_pairs_hook=no_duplicates)
        except ValueError as exc:
            raise AssertionError(f"ACP violation: line is not valid JSON ({exc}): {body[:_MAX_SHOWN]!r}") from exc
        if not isinstance(msg, dict):
            raise AssertionError(f"ACP violation: line is not a JSON object: {body[:_MAX_SHOWN]!r}")
        return msg

    def validate_line(self, line: str | bytes, request_methods: Mapping[Any, str]) -> dict:
        """Parse and validate one raw line the agent wrote; returns the parsed message."""
        msg = self.parse_line(line)
        self.validate_outgoing(msg, request_methods)
        return msg


def _explain(error, depth: int = 0) -> list:
    """The specific causes of a oneOf/anyOf failure, following the variant whose tag matched.

    A branch that fails a ``const``/``enum`` on the instance itself or on one of its direct members (a
    discriminator such as ``sessionUpdate`` or ``type``) is the wrong variant and is ignored; the errors of
    the remaining branches are explained recursively. When every branch is the wrong variant, the error
    itself is returned together with the values that would have been accepted.
    """
    if error.validator not in ("oneOf", "anyOf") or not error.context or depth > 8:
        return [error]
    branches: dict[Any, list] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    kept: list = []
    expected: list = []
    for subs in branches.values():
        tags = [e for e in subs if e.validator in ("const", "enum") and len(e.relative_path) <= 1]
        if tags:
            expected.extend(e.validator_value if e.validator == "const" else tuple(e.validator_value) for e in tags)
            continue
        kept.append(subs)
    if not kept:
        return [("expected", error, expected)]
    if len(kept) > 1:  # several plausible variants: explain the one that got furthest
        kept.sort(key=lambda subs: (-max(len(e.absolute_path) for e in subs), len(subs)))
    out: list = []
    for e in kept[0]:
        out.extend(_explain(e, depth + 1))
    return out


@functools.lru_cache(maxsize=4)
def _load_validator_cached(path: str) -> WireValidator:
    with open(path, encoding="utf-8") as f:
        return WireValidator(json.load(f))


def load_validator(path: Path | None = None) -> WireValidator:
    """The WireValidator over the pinned schema (``schema_path()`` unless given); cached per path."""
    return _load_validator_cached(str((path or schema_path()).resolve()))


def validate_outgoing(msg: dict, request_methods: Mapping[Any, str]) -> None:
    """Module-level convenience: ``load_validator().validate_outgoing(msg, request_methods)``."""
    load_validator().validate_outgoing(msg, request_methods)


def validate_line(line: str | bytes, request_methods: Mapping[Any, str]) -> dict:
    """Module-level convenience: ``load_validator().validate_line(line, request_methods)``."""
    return load_validator().validate_line(line, request_methods)


# --------------------------------------------------------------------------------------------------
# Recorder for test clients
# --------------------------------------------------------------------------------------------------


class WireRecorder:
    """Collects schema violations over a whole conversation with the agent.

    Feed it every request the test client sends (``sent(msg)``, before or after writing it) and every raw
    line the agent writes on stdout (``received(line)``); call ``assert_clean()`` at the end. A response whose
    id is not (yet) known is parked until the matching ``sent`` arrives; still-unmatched ones are violations.
    """

    def __init__(self, validator: WireValidator, *, raise_immediately: bool = False) -> None:
        self.validator = validator
        self.raise_immediately = raise_immediately
        self.request_methods: dict[Any, str] = {}
        self.messages: list[dict] = []
        self.violations: list[str] = []
        self._answered: set = set()
        self._parked: list[dict] = []
        self._lock = threading.RLock()

    def sent(self, msg: Mapping[str, Any]) -> None:
        """Record a message the client sent to the agent (only requests matter: id -> method)."""
        if not isinstance(msg, Mapping) or "method" not in msg or "id" not in msg:
            return
        with self._lock:
            rid = msg["id"]
            try:
                if rid in self.request_methods:
                    self._violation(f"test client reused request id {rid!r}")
                self.request_methods[rid] = msg["method"]
            except TypeError:
                self._violation(f"test client sent an unhashable request id {rid!r}")
                return
            parked, self._parked = self._parked, []
            for response in parked:
                self._check_response(response, park=True)

    def received(self, line: str | bytes) -> dict | None:
        """Record one raw stdout line of the agent; returns the parsed message (None if unparseable)."""
        with self._lock:
            try:
                msg = self.validator.parse_line(line)
            except AssertionError as exc:
                self._violation(str(exc))
                return None
            self.messages.append(msg)
            if "method" not in msg and "id" in msg:
                self._check_response(msg, park=True)
            else:
                self._check(msg)
            return msg

    feed = received

    def _check_response(self, msg: dict, *, park: bool) -> None:
        rid = msg.get("id")
        try:
            known = rid in self.request_methods
        except TypeError:
            known = False
        if not known and park and rid is not None:
            self._parked.append(msg)
            return
        if known and rid in self._answered:
            self._violation(f"ACP violation: second response to id {rid!r}: {_shorten(msg)}")
            return
        if self._check(msg) and known:
            self._answered.add(rid)

    def _check(self, msg: dict) -> bool:
        try:
            self.validator.validate_outgoing(msg, self.request_methods)
        except AssertionError as exc:
            self._violation(str(exc))
            return False
        return True

    def _violation(self, text: str) -> None:
        self.violations.append(text)
        if self.raise_immediately:
            raise AssertionError(text)

    def pending_unknown(self) -> list[dict]:
        with self._lock:
            return list(self._parked)

    def assert_clean(self) -> None:
        with self._lock:
            problems = list(self.violations)
            for msg in self._parked:
                problems.append(
                    f"ACP violation: response to id {msg.get('id')!r}, which the client never sent: {_shorten(msg)}"
                )
        if problems:
            shown = "\n\n".join(problems[:20])
            more = f"\n\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
            raise AssertionError(
                f"{len(problems)} ACP wire violation(s) in {len(self.messages)} message(s) from the agent:\n\n"
                f"{shown}{more}"
            )
