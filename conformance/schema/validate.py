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
import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ama_conformance.schema.fast import Check, FastChecker, jsonschema_fast_checker
from ama_conformance.schema.files import SCHEMA_DIR as SCHEMA_DIR
from ama_conformance.schema.files import SchemaUnavailable as SchemaUnavailable
from ama_conformance.schema.files import schema_path as schema_path
from ama_conformance.schema.files import stable_schema_path as stable_schema_path
from ama_conformance.schema.method_tables import MethodDef, derive_method_tables
from ama_conformance.schema.tagged_unions import TAGGED_UNION_KEYWORD, optimize_tagged_unions, tagged_union_keyword

_MAX_SHOWN = 600  # characters of the offending message quoted in a failure


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


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise ValueError(f"duplicate key {k!r}")
            seen.add(k)
    return obj


# One decoder for every line (json.loads would build one per call): NaN/Infinity and duplicate keys rejected.
_STRICT_JSON = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_no_duplicates)

_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_RESPONSE_KEYS = frozenset({"jsonrpc", "id", "result", "error"})


class WireValidator:
    """Validates messages an agent writes, each against the schema definition of its method."""

    def __init__(self, schema: Mapping[str, Any], *, optimize: bool = True, fast: bool = True) -> None:
        """``optimize`` validates against an equivalent rewrite of the schema (``optimize_tagged_unions``)
        that is several times faster; ``optimize=False`` uses the schema exactly as published. ``fast`` asks a
        compiled validity check (``schema_fast.FastChecker``) first and runs jsonschema only on a message it finds
        invalid (same verdicts, same messages: they are jsonschema's); ``fast=False`` runs jsonschema always."""
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

            self._validator_cls = extend(Draft202012Validator, {TAGGED_UNION_KEYWORD: tagged_union_keyword})
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._compiled_schema = compiled_schema
        self._fast: FastChecker | None = None
        self._fast_checks: dict[str, Check] | None = {} if fast else None

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

    def _fast_checker(self) -> FastChecker:
        """The compiled checks of this schema (built on first use; the caller holds the lock)."""
        if self._fast is None:
            self._fast = jsonschema_fast_checker(
                self._compiled_schema, _SCHEMA_URI, self._validator_cls, self._registry, self._format_checker
            )
        return self._fast

    def is_valid_fast(self, name: str, instance: object) -> bool:
        """Whether ``instance`` is valid against ``$defs/<name>`` by the compiled check alone (False when there is
        none: ``fast=False``, or the check failed to build or run); True means jsonschema finds no error."""
        checks = self._fast_checks
        if checks is None:
            return False
        check = checks.get(name)
        try:
            if check is None:
                if name not in self.schema["$defs"]:
                    return False
                with self._lock:
                    check = checks.get(name) or self._fast_checker().definition(name)
                    checks[name] = check
            return check(instance)
        except Exception:  # jsonschema decides (and raises what it raises)
            return False

    def definition_errors(self, name: str, instance: object, where: str = "$") -> list[str]:
        """Human-readable errors of ``instance`` against ``$defs/<name>`` ([] when valid).

        ``where`` is the JSON path of ``instance`` inside its message (e.g. ``$.params``).
        """
        from jsonschema.exceptions import best_match

        def path(err) -> str:
            return where + err.json_path[1:]

        if self.is_valid_fast(name, instance):
            return []
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
        self._call_envelope(msg, method, kind)
        if method.startswith("_"):
            return  # extension method: envelope only
        md = self._call_definition(msg, method, is_request)
        if "params" not in msg:
            raise AssertionError(
                f"ACP violation: {method} {kind} has no params (expects {md.definition}): {_shorten(msg)}"
            )
        self.check_definition(md.definition, msg["params"], what=f"{method} params", where="$.params", msg=msg)

    def _call_envelope(self, msg: Mapping[str, Any], method: object, kind: str) -> None:
        """The JSON-RPC members of a request or notification, whatever its method."""
        extra = set(msg) - _REQUEST_KEYS
        if extra:
            raise AssertionError(f"ACP violation: {kind} has unexpected members {sorted(extra)}: {_shorten(msg)}")
        if not isinstance(method, str) or not method:
            raise AssertionError(f"ACP violation: {kind} method must be a non-empty string: {_shorten(msg)}")
        if "id" in msg:
            self.check_definition("RequestId", msg["id"], what=f"{method} request id", where="$.id", msg=msg)
            if msg["id"] is None:
                raise AssertionError(f"ACP violation: {method} request uses a null id: {_shorten(msg)}")
        if "params" in msg and msg["params"] is not None and not isinstance(msg["params"], Mapping | list):
            raise AssertionError(f"ACP violation: {method} params must be an object or array: {_shorten(msg)}")

    def _call_definition(self, msg: Mapping[str, Any], method: str, is_request: bool) -> MethodDef:
        """The schema's entry for a method the agent calls, as the request or notification it sent."""
        table = self.tables.agent_requests if is_request else self.tables.agent_notifications
        other = self.tables.agent_notifications if is_request else self.tables.agent_requests
        md = table.get(method)
        if md is not None:
            return md
        kind, other_kind = ("request", "notification") if is_request else ("notification", "request")
        if method in other:
            raise AssertionError(
                f"ACP violation: {method!r} is a {other_kind} in the schema but the agent sent it as a {kind}: "
                f"{_shorten(msg)}"
            )
        raise AssertionError(
            f"ACP violation: the agent sent a {kind} with method {method!r}, which the schema does not define for the "
            f"agent side (known: {sorted(table)}; extension methods must start with '_'): {_shorten(msg)}"
        )

    def _validate_response(self, msg: Mapping[str, Any], request_methods: Mapping[Any, str]) -> None:
        rid = msg["id"]
        _response_envelope(msg)
        self.check_definition("RequestId", rid, what="response id", where="$.id", msg=msg)
        has_error = "error" in msg
        if has_error:
            self.check_definition(self.tables.error_definition, msg["error"], what="error", where="$.error", msg=msg)
            if rid is None:
                return  # JSON-RPC: error for a request whose id could not be determined
        if rid is None or rid not in request_methods:
            raise AssertionError(
                f"ACP violation: response to id {rid!r}, which the client never sent "
                f"(sent ids: {_shorten(list(request_methods), 200)}): {_shorten(msg)}"
            )
        if not has_error:
            self._validate_result(msg, rid, request_methods[rid])

    def _validate_result(self, msg: Mapping[str, Any], rid: Any, method: str) -> None:
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

        try:
            if body.startswith("\ufeff"):  # what json.loads says of a str with a byte order mark
                raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", body, 0)
            msg = _STRICT_JSON.decode(body)
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


def _response_envelope(msg: Mapping[str, Any]) -> None:
    """The JSON-RPC members of a response, whatever it answers: one outcome, and an id of a JSON-RPC type."""
    extra = set(msg) - _RESPONSE_KEYS
    if extra:
        raise AssertionError(f"ACP violation: response has unexpected members {sorted(extra)}: {_shorten(msg)}")
    has_result, has_error = "result" in msg, "error" in msg
    if has_result and has_error:
        raise AssertionError(f"ACP violation: response has both result and error: {_shorten(msg)}")
    if not has_result and not has_error:
        raise AssertionError(f"ACP violation: response has neither result nor error: {_shorten(msg)}")
    if not _is_id(msg["id"]):
        raise AssertionError(f"ACP violation: response id must be a string, integer or null: {_shorten(msg)}")


def _explain(error, depth: int = 0) -> list:
    """The specific causes of a oneOf/anyOf failure, following the variant whose tag matched.

    A branch that fails a ``const``/``enum`` on the instance itself or on one of its direct members (a
    discriminator such as ``sessionUpdate`` or ``type``) is the wrong variant and is ignored; the errors of
    the remaining branches are explained recursively. When every branch is the wrong variant, the error
    itself is returned together with the values that would have been accepted.
    """
    if error.validator not in ("oneOf", "anyOf") or not error.context or depth > 8:
        return [error]
    kept, expected = _variants(error)
    if not kept:
        return [("expected", error, expected)]
    out: list = []
    for e in min(kept, key=_reach):  # several plausible variants: explain the one that got furthest
        out.extend(_explain(e, depth + 1))
    return out


def _variants(error) -> tuple[list[list], list]:
    """The errors of each branch of a oneOf/anyOf that may be the instance's variant, and the tag values of the
    branches that are not (their const / enum on a discriminator failed)."""
    branches: dict[Any, list] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    kept: list[list] = []
    expected: list = []
    for subs in branches.values():
        tags = [e for e in subs if e.validator in ("const", "enum") and len(e.relative_path) <= 1]
        if tags:
            expected.extend(e.validator_value if e.validator == "const" else tuple(e.validator_value) for e in tags)
        else:
            kept.append(subs)
    return kept, expected


def _reach(subs: list) -> tuple[int, int]:
    """A variant's errors ranked: deepest into the instance first, then fewest."""
    return -max(len(e.absolute_path) for e in subs), len(subs)


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
