"""The compiled validity check in front of jsonschema (conformance/schema/fast.py) changes no verdict and no message.

`WireValidator(fast=True)` (the default) asks the compiled check first and runs jsonschema only when it says "not
valid"; `fast=False` is plain jsonschema, as before. On near-valid ACP messages — valid examples with one to three
mutations: wrong types, missing required members, extra members, another tag or enum value, deleted list items —
both give the same verdict and the same error text, for the unstable and the stable schema; and the compiled check
alone agrees with jsonschema on every definition, over the optimised schema and over the schema as published; and on
a synthetic schema using every keyword the compiler implements.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ama_conformance.schema.validate import WireRecorder, WireValidator, load_validator, schema_path, stable_schema_path
from tests.support.hypothesis_profiles import examples

SID = "ses_01a235b1135ea5389ac2ac14"


def _note(update: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": update}}


def _request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


# (a valid message, the method of the client request it answers or None)
BASES: list[tuple[dict[str, Any], str | None]] = [
    (
        _note(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": " now returns `a + b`."},
                "messageId": "m-5633f2077e844c4d970c64aad2718b0d",
            }
        ),
        None,
    ),
    (_note({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "the bug"}}), None),
    (
        _note(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "f1387",
                "title": "Edit file",
                "kind": "edit",
                "status": "pending",
                "locations": [{"path": "/work/a.py", "line": 3}],
                "rawInput": {"path": "a.py", "edits": [{"old_text": "a", "new_text": "b"}]},
            }
        ),
        None,
    ),
    (
        _note(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "f1184",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "sub/\na.txt  11 B"}},
                    {"type": "diff", "path": "/work/a.py", "oldText": "a", "newText": "b"},
                    {"type": "terminal", "terminalId": "t-1"},
                ],
                "locations": [{"path": "/work"}],
                "rawOutput": {"ok": True},
            }
        ),
        None,
    ),
    (
        _note(
            {
                "sessionUpdate": "usage_update",
                "used": 2526,
                "size": 200000,
                "cost": {"amount": 0.002718, "currency": "USD"},
                "_meta": {"ama": {"percent": 1.3, "tier": "healthy"}},
            }
        ),
        None,
    ),
    (
        _note(
            {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": "Fix add()", "priority": "high", "status": "in_progress"},
                    {"content": "Run the tests", "priority": "medium", "status": "pending"},
                ],
            }
        ),
        None,
    ),
    (
        _note(
            {
                "sessionUpdate": "available_commands_update",
                "availableCommands": [
                    {"name": "compact", "description": "Summarise", "input": {"hint": "optional focus"}},
                    {"name": "context", "description": "Show what fills the context window"},
                ],
            }
        ),
        None,
    ),
    (
        _note(
            {
                "sessionUpdate": "config_option_update",
                "configOptions": [
                    {"id": "think", "name": "Think", "type": "boolean", "currentValue": True},
                    {
                        "id": "model",
                        "name": "Model",
                        "type": "select",
                        "currentValue": "a",
                        "options": [{"value": "a", "name": "A"}, {"value": "b", "name": "B"}],
                    },
                ],
            }
        ),
        None,
    ),
    (_note({"sessionUpdate": "current_mode_update", "currentModeId": "accept_edits"}), None),
    (_note({"sessionUpdate": "session_info_update", "title": "fix", "updatedAt": "2026-12-02T07:38:47.259Z"}), None),
    (_request(5, "fs/read_text_file", {"sessionId": SID, "path": "/work/a", "line": 3, "limit": 10}), None),
    (_request(6, "fs/write_text_file", {"sessionId": SID, "path": "/work/a", "content": "x"}), None),
    (_request(7, "terminal/create", {"sessionId": SID, "command": "ls", "args": ["-l"], "cwd": "/work"}), None),
    (
        _request(
            51,
            "session/request_permission",
            {
                "sessionId": SID,
                "toolCall": {"toolCallId": "f1460", "status": "pending", "title": "Find a.txt", "kind": "search"},
                "options": [
                    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
                ],
            },
        ),
        None,
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                "stopReason": "end_turn",
                "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
            },
        },
        "session/prompt",
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": True,
                    "promptCapabilities": {"image": True, "embeddedContext": True},
                    "mcpCapabilities": {"http": True, "sse": True},
                    "sessionCapabilities": {"list": {}, "close": {}},
                },
                "agentInfo": {"name": "ama", "version": "0.1.0", "title": "ama"},
                "authMethods": [{"id": "ama-credentials", "name": "Use ama's configured model"}],
            },
        },
        "initialize",
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "sessionId": SID,
                "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}]},
                "configOptions": [{"id": "think", "name": "Think", "type": "boolean", "currentValue": False}],
            },
        },
        "session/new",
    ),
    ({"jsonrpc": "2.0", "id": 3, "result": {"outcome": {"outcome": "selected", "optionId": "a"}}}, "_x/ext"),
    (
        {"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "Invalid params", "data": {"m": 1}}},
        "session/set_mode",
    ),
    ({"jsonrpc": "2.0", "id": 8, "result": {}}, "session/set_mode"),
]

# Values a mutation puts somewhere: wrong types, edge numbers (the int32/uint64 formats, `minimum`), strings.
VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    7,
    2**31,
    2**64,
    -(2**63) - 1,
    1.5,
    3.0,
    "",
    "x",
    "text",
    "/abs/path",
    "relative",
    [],
    [1],
    {},
    {"type": "text", "text": "t"},
    {"_meta": {}},
]
KEYS = ["_meta", "bogus", "type", "sessionUpdate", "content", "status", "kind", "text", "outcome", "usage", "id"]


@cache
def _strings() -> list[str]:
    """Every string `const` / `enum` value of the schema: the tags and enum values a mutation swaps in."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("const"), str):
                found.add(node["const"])
            for v in node.get("enum", ()) if isinstance(node.get("enum"), list) else ():
                if isinstance(v, str):
                    found.add(v)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(load_validator().schema)
    return sorted(found)


def _slots(node: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) of ``node``, the root's members first."""
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((node, k))
            _slots(v, out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append((node, i))
            _slots(v, out)
    return out


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, dict | list):
        out.append(node)
        for v in node.values() if isinstance(node, dict) else node:
            _containers(v, out)
    return out


OPS = ["replace", "tag", "delete", "add"]
_BASE = st.integers(min_value=0, max_value=len(BASES) - 1)
_PICK = st.integers(min_value=0, max_value=10_000)
_OP = st.sampled_from(OPS)
_VALUE = st.sampled_from(VALUES)
_KEY = st.sampled_from(KEYS)
_COUNT = st.integers(min_value=0, max_value=3)
_WHERE = st.integers(min_value=0, max_value=7)


def _mutate(msg: dict[str, Any], data: st.DataObject) -> None:
    """One mutation, inside the params / result / error seven times in eight, anywhere in the message otherwise."""
    payload = next((msg[k] for k in ("params", "result", "error") if isinstance(msg.get(k), dict | list)), None)
    root: Any = msg if payload is None or data.draw(_WHERE) == 0 else payload
    op = data.draw(_OP)
    if op == "add":
        containers = _containers(root, [])
        target = containers[data.draw(_PICK) % len(containers)]
        value = copy.deepcopy(data.draw(_VALUE))  # never the pool's own object (nor one already placed)
        if isinstance(target, dict):
            target[data.draw(_KEY)] = value
        else:
            target.append(value)
        return
    slots = _slots(root, [])
    if not slots:
        return
    parent, key = slots[data.draw(_PICK) % len(slots)]
    if op == "delete":
        del parent[key]
    elif op == "replace":
        parent[key] = copy.deepcopy(data.draw(_VALUE))
    else:
        strings = _strings()
        parent[key] = strings[data.draw(_PICK) % len(strings)]


@cache
def _pairs() -> list[tuple[str, WireValidator, WireValidator]]:
    """(name, fast, plain) for each pinned schema: the default validator and the same with jsonschema only."""
    out = []
    for name, path in (("unstable", schema_path()), ("stable", stable_schema_path())):
        fast = load_validator(path)
        out.append((name, fast, WireValidator(fast.schema, fast=False)))
    return out


@cache
def _published_fast() -> WireValidator:
    """The compiled check over the unstable schema as published (its `oneOf`s compiled, not dispatched)."""
    return WireValidator(load_validator().schema, optimize=False)


def _outcome(v: WireValidator, msg: Any, methods: dict[Any, str]) -> str | None:
    try:
        v.validate_outgoing(msg, methods)
    except AssertionError as exc:
        return str(exc)
    return None


def _definition(v: WireValidator, msg: object, method: str | None) -> tuple[str, Any] | None:
    """The definition the message's params or result is checked against, and that instance."""
    t = v.tables
    if not isinstance(msg, dict):
        return None
    if isinstance(msg.get("method"), str) and "params" in msg:
        md = t.agent_requests.get(msg["method"]) if "id" in msg else t.agent_notifications.get(msg["method"])
        return (md.definition, msg["params"]) if md else None
    if method and "result" in msg and method in t.agent_results:
        return t.agent_results[method].definition, msg["result"]
    if "error" in msg:
        return t.error_definition, msg["error"]
    return None


def _same(msg: dict[str, Any], method: str | None) -> None:
    methods = {msg.get("id"): method} if method is not None and isinstance(msg.get("id"), int | str) else {}
    for name, fast, plain in _pairs():
        got, want = _outcome(fast, msg, methods), _outcome(plain, msg, methods)
        assert got == want, (name, msg)
        target = _definition(fast, msg, method)
        if target is not None:
            definition, instance = target
            verdict = plain.definition_validator(definition).is_valid(instance)
            assert fast.is_valid_fast(definition, instance) == verdict, (name, definition, instance)
            if name == "unstable":
                assert _published_fast().is_valid_fast(definition, instance) == verdict, (definition, instance)
        if name == "unstable":  # the same through validate_line (its strict JSON reading is shared by both)
            line = json.dumps(msg)
            assert _outcome_line(fast, line, methods) == got, line


def _outcome_line(v: WireValidator, line: str, methods: dict[Any, str]) -> str | None:
    try:
        v.validate_line(line, methods)
    except AssertionError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("index", range(len(BASES)))
def test_bases_are_valid(index: int) -> None:
    msg, method = BASES[index]
    methods = {msg["id"]: method} if method else {}
    load_validator().validate_outgoing(msg, methods)
    _same(msg, method)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_fast_path_same_verdicts_and_messages(data: st.DataObject) -> None:
    msg, method = BASES[data.draw(_BASE)]
    msg = copy.deepcopy(msg)
    for _ in range(data.draw(_COUNT)):
        _mutate(msg, data)
    _same(msg, method)


@pytest.mark.parametrize(
    ("msg", "method"),
    [
        (_note({"sessionUpdate": "usage_update", "used": -1, "size": 2}), None),  # `minimum` of uint64
        (_note({"sessionUpdate": "usage_update", "used": 2**64, "size": 2}), None),  # the uint64 format
        (_note({"sessionUpdate": "usage_update", "used": 1.0, "size": 2}), None),  # an integer as a float
        (_note({"sessionUpdate": "usage_update", "used": True, "size": 2}), None),  # a bool is no integer
        (_note({"sessionUpdate": "usage_update", "used": 1}), None),
        (_note({"sessionUpdate": "bogus"}), None),
        (_note({"sessionUpdate": 3}), None),
        (_note({"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}), None),
        (_note({"sessionUpdate": "agent_message_chunk", "content": {"text": "x"}}), None),
        (_note({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]}), None),
        (_note({"sessionUpdate": "tool_call_update", "toolCallId": "c", "extra": 1}), None),
        (
            _note({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "urgent", "status": "pending"}]}),
            None,
        ),
        ({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "nope"}}, "session/prompt"),
        ({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "refusal", "x": None}}, "session/prompt"),
        ({"jsonrpc": "2.0", "id": 1, "result": {"configOptions": []}}, "session/new"),
        ({"jsonrpc": "2.0", "id": 4, "error": {"code": 1.5, "message": "m"}}, "session/set_mode"),
        ({"jsonrpc": "2.0", "id": 4, "error": {"code": 2**40, "message": "m"}}, "session/set_mode"),  # int32
        (_request(5, "fs/read_text_file", {"sessionId": SID, "path": "/a", "line": -3}), None),
        (_request(5, "fs/read_text_file", {"sessionId": SID}), None),
        (_request(True, "fs/read_text_file", {"sessionId": SID, "path": "/a"}), None),  # a boolean id
        (
            _request(
                5,
                "session/request_permission",
                {"sessionId": SID, "toolCall": {"toolCallId": "c"}, "options": [{"optionId": "a", "kind": "maybe"}]},
            ),
            None,
        ),
    ],
)
def test_fast_path_examples(msg: dict[str, Any], method: str | None) -> None:
    _same(msg, method)


def test_invalid_examples_keep_their_messages() -> None:
    """A few messages the suite shows people, word for word (the fast path only ever answers "valid")."""
    v = load_validator()
    text = _outcome(v, _note({"sessionUpdate": "usage_update", "used": 1}), {})
    assert text is not None and "'size' is a required property" in text
    text = _outcome(v, {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "nope"}}, {2: "session/prompt"})
    assert text is not None and '$.result.stopReason: no variant matches; expected one of "cancelled"' in text


def test_every_definition_compiles_without_jsonschema() -> None:
    """The pinned schemas use only keywords the compiled check implements: no node is handed back to jsonschema."""
    for name, fast, _ in _pairs():
        for definition in fast.schema["$defs"]:
            fast.is_valid_fast(definition, {})
        assert fast._fast is not None and fast._fast.fallbacks == 0, name


def test_fast_off_and_unknown_definitions() -> None:
    plain = _pairs()[0][2]
    assert plain.is_valid_fast("PromptResponse", {"stopReason": "end_turn"}) is False  # no compiled check
    assert load_validator().is_valid_fast("PromptResponse", {"stopReason": "end_turn"}) is True
    assert load_validator().is_valid_fast("NoSuchDefinition", {}) is False
    with pytest.raises(KeyError, match="NoSuchDefinition"):
        load_validator().definition_errors("NoSuchDefinition", {})


def _reference_parse(body: str) -> Any:
    """parse_line's JSON reading as it was before the shared decoder (json.loads with the two hooks)."""

    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not valid JSON")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for k, v in pairs:
            if k in obj:
                raise ValueError(f"duplicate key {k!r}")
            obj[k] = v
        return obj

    return json.loads(body, parse_constant=no_constants, object_pairs_hook=no_duplicates)


@pytest.mark.parametrize(
    "body",
    [
        '{"jsonrpc": "2.0", "method": "m", "params": {"a": 1, "b": {"c": [1, {"d": 2}]}}}',
        '{"a": 1, "a": 2}',
        '{"a": {"b": 1, "c": 2, "b": 3}, "a": 0}',
        '{"a": NaN}',
        '{"a": -Infinity}',
        "\ufeff{}",
        '{"a": 1',
        "[1, 2]",
        '"text"',
        '{"a": 1} x',
    ],
)
def test_parse_line_reads_json_as_before(body: str) -> None:
    try:
        want: Any = ("ok", _reference_parse(body))
    except ValueError as exc:
        want = ("error", str(exc))
    try:
        got: Any = ("ok", load_validator().parse_line(body))
    except AssertionError as exc:
        got = ("error", str(exc))
    if want[0] == "ok" and isinstance(want[1], dict):
        assert got == want
        assert list(got[1]) == list(want[1])
    else:
        assert got[0] == "error"
        if want[0] == "error":
            assert f"({want[1]})" in got[1]


def test_recorder_unchanged() -> None:
    """WireRecorder gives the same violations with either path."""
    lines = [json.dumps(m) for m, _ in BASES if "method" in m] + [
        json.dumps(_note({"sessionUpdate": "usage_update", "used": 1})),
        '{"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "nope"}}',
    ]
    found = []
    for v in (_pairs()[0][1], _pairs()[0][2]):
        rec = WireRecorder(v)
        rec.sent({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {}})
        for line in lines:
            rec.received(line)
        found.append(rec.violations)
    assert found[0] == found[1] and len(found[0]) == 2


@example(text="x" * 5)
@settings(max_examples=examples(50), deadline=None)
@given(text=st.text())
def test_chunk_text_any_string(text: str) -> None:
    _same(_note({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}), None)


# -- the compiler on every keyword it implements (the pinned schemas leave some unused) ------------------------------

SYNTHETIC: dict[str, Any] = {
    "$defs": {
        "Closed": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 0, "maximum": 10},
                "b": {"enum": ["x", "y", 1, None, [1]]},
                "c": True,
            },
            "required": ["a"],
            "additionalProperties": False,
        },
        "Typed": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1, "maxLength": 3}},
        "Overlapping": {"oneOf": [{"type": "integer"}, {"type": "number", "exclusiveMinimum": 0}]},
        "Either": {"anyOf": [{"type": ["string", "null"]}, {"const": [1, {"a": True}]}, {"const": 0}]},
        "Not": {"not": {"const": 1}, "exclusiveMaximum": 5},
        "Bounded": {"type": "integer", "minimum": 0, "maximum": 10},
        "List": {"type": "array", "items": {"$ref": "#/$defs/Closed"}, "minItems": 1, "maxItems": 2},
        "Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}},
        "Formats": {
            "type": "object",
            "properties": {"n": {"format": "uint16"}, "i": {"format": "int32"}, "u": {"format": "uri"}},
            "minProperties": 1,
            "maxProperties": 3,
        },
        "Tagged": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"k": {"const": "a"}, "v": {"type": "integer"}},
                    "required": ["k", "v"],
                },
                {
                    "type": "object",
                    "properties": {"k": {"const": "b"}, "v": {"$ref": "#/$defs/Tagged"}},
                    "required": ["k"],
                },
            ]
        },
        "Fallback": {
            "type": "object",
            "patternProperties": {"^x": {"type": "integer"}},
            "dependentRequired": {"a": ["b"]},
            "unevaluatedProperties": False,
        },
        "Booleans": {"allOf": [True, {"properties": {"f": False, "t": True}}], "anyOf": [True, False]},
        "Unknown": {"x-vendor": {"type": "string"}, "discriminator": {"propertyName": "k"}, "type": "object"},
    }
}

_LEAF = st.sampled_from(
    [0, 1, -1, 5, 10, 11, 1.0, 0.5, -0.5, 65535, 65536, 2**31, True, False, None, "", "x", "abcd", "a", "b", "y"]
    + ["http://x", "no uri", "mailto:a@b"]
)
_KEY_NAMES = st.sampled_from(["a", "b", "c", "f", "t", "k", "v", "kids", "n", "i", "u", "x1", "zz"])
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY_NAMES, inner, max_size=4),
    max_leaves=12,
)


@cache
def _synthetic() -> list[tuple[Any, Any]]:
    """(compiled check maker, jsonschema validator maker) over SYNTHETIC, optimised and as written."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    from ama_conformance.schema.fast import jsonschema_fast_checker
    from ama_conformance.schema.tagged_unions import TAGGED_UNION_KEYWORD, optimize_tagged_unions, tagged_union_keyword
    from ama_conformance.schema.validate import _format_checker

    uri = "urn:test:synthetic"
    out = []
    optimised, count = optimize_tagged_unions(SYNTHETIC)
    assert count == 1
    for root, cls in (
        (optimised, extend(Draft202012Validator, {TAGGED_UNION_KEYWORD: tagged_union_keyword})),
        (SYNTHETIC, Draft202012Validator),
    ):
        registry = Registry().with_resource(uri, Resource.from_contents(root, default_specification=DRAFT202012))
        formats = _format_checker()
        fast = jsonschema_fast_checker(root, uri, cls, registry, formats)
        plain = {
            name: cls({"$ref": f"{uri}#/$defs/{name}"}, registry=registry, format_checker=formats)
            for name in root["$defs"]
        }
        out.append((fast, plain))
    return out


@example(instance=1.0)
@example(instance=True)
@example(instance=-1)
@example(instance={"a": -1.0, "b": [1]})
@example(instance={"n": 65536, "i": 2**31, "u": "no uri"})
@settings(max_examples=examples(200), deadline=None)
@given(instance=_JSON)
def test_compiled_check_matches_jsonschema_on_every_keyword(instance: Any) -> None:
    for fast, plain in _synthetic():
        for name, validator in plain.items():
            assert fast.definition(name)(instance) == validator.is_valid(instance), (name, instance)


def test_synthetic_schema_exercises_both_verdicts_and_the_fallback() -> None:
    fast, plain = _synthetic()[0]
    samples: list[object] = [
        {"a": 1},
        {"a": 1, "zz": 2},
        [{"a": 3}],
        {"k": "b", "v": {"k": "a", "v": 1}},
        {"k": "b", "v": {"k": "a"}},
    ]
    samples += [
        {"zz": "ab"},
        {"x1": 2},
        {"f": 1},
        1.0,
        -1,
        {"n": 65535},
        {"n": 65536},
        {"u": "no uri"},
        {"x1": 1.5},
        {"a": 1},
        3,
        0.5,
        2,
        1,
        [1, {"a": True}],
    ]
    for name, validator in plain.items():
        verdicts = {validator.is_valid(s) for s in samples}
        assert verdicts == {True, False}, name
        for s in samples:
            assert fast.definition(name)(s) == validator.is_valid(s), (name, s)
    assert fast.fallbacks == 1  # "Fallback": patternProperties, dependentRequired, unevaluatedProperties: false
