"""The ACP wire validator (conformance/schema/validate.py) is strict and validates each message per method."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ama_conformance.schema import validate as acp_schema
from ama_conformance.schema.method_tables import REQUIRED_AGENT_NOTIFICATIONS, REQUIRED_AGENT_REQUESTS, REQUIRED_RESULTS
from ama_conformance.schema.validate import (
    SCHEMA_DIR,
    SchemaUnavailable,
    WireRecorder,
    WireValidator,
)

SENT = {
    0: "initialize",
    1: "session/new",
    2: "session/prompt",
    "s-3": "session/load",
    4: "_ama/debug",
    5: "session/set_mode",
    6: "session/list",
}


def _update(update: dict[str, Any], session_id: str = "sess-1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def _result(rid: object, result: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _ok(v: WireValidator, msg: dict[str, Any], sent: dict[Any, str] | None = None) -> None:
    v.validate_outgoing(msg, SENT if sent is None else sent)


def _bad(v: WireValidator, msg: dict[str, Any], *needles: str, sent: dict[Any, str] | None = None) -> str:
    with pytest.raises(AssertionError) as info:
        v.validate_outgoing(msg, SENT if sent is None else sent)
    text = str(info.value)
    for needle in needles:
        assert needle in text, f"{needle!r} not in:\n{text}"
    return text


# -- method tables ----------------------------------------------------------------------------------------------


def test_method_tables_derived_from_schema(acp_validator: WireValidator) -> None:
    t = acp_validator.tables
    assert REQUIRED_AGENT_REQUESTS <= set(t.agent_requests)
    assert REQUIRED_AGENT_NOTIFICATIONS <= set(t.agent_notifications)
    assert REQUIRED_RESULTS <= set(t.agent_results)
    assert t.agent_notifications["session/update"].definition == "SessionNotification"
    assert t.agent_requests["session/request_permission"].definition == "RequestPermissionRequest"
    assert t.agent_requests["fs/read_text_file"].definition == "ReadTextFileRequest"
    assert t.agent_requests["terminal/wait_for_exit"].definition == "WaitForTerminalExitRequest"
    assert t.agent_results["initialize"].definition == "InitializeResponse"
    assert t.agent_results["session/new"].definition == "NewSessionResponse"
    assert t.agent_results["session/prompt"].definition == "PromptResponse"
    assert t.agent_results["session/set_config_option"].definition == "SetSessionConfigOptionResponse"
    assert t.error_definition == "Error"
    # Client -> agent requests and agent -> client requests never overlap.
    assert not set(t.agent_requests) & set(t.client_requests)
    for md in (*t.agent_requests.values(), *t.agent_notifications.values(), *t.agent_results.values()):
        assert md.definition in acp_validator.schema["$defs"]


def test_validator_is_cached_per_definition(acp_validator: WireValidator) -> None:
    assert acp_validator.definition_validator("PromptResponse") is acp_validator.definition_validator("PromptResponse")
    assert acp_validator.optimized_unions > 0


# -- session/update ---------------------------------------------------------------------------------------------


def test_usage_update_valid(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _update({"sessionUpdate": "usage_update", "used": 1234, "size": 200000}))
    _ok(
        acp_validator,
        _update({"sessionUpdate": "usage_update", "used": 0, "size": 8192, "cost": {"amount": 0.5, "currency": "USD"}}),
    )


def test_usage_update_missing_size_fails(acp_validator: WireValidator) -> None:
    _bad(
        acp_validator,
        _update({"sessionUpdate": "usage_update", "used": 1234}),
        "session/update",
        "SessionNotification",
        "$.params.update",
        "'size' is a required property",
    )


def test_usage_update_negative_used_fails(acp_validator: WireValidator) -> None:
    _bad(acp_validator, _update({"sessionUpdate": "usage_update", "used": -1, "size": 100}), "$.params.update.used")


def test_usage_update_non_integer_fails(acp_validator: WireValidator) -> None:
    _bad(acp_validator, _update({"sessionUpdate": "usage_update", "used": "12", "size": 100}), "$.params.update.used")
    _bad(acp_validator, _update({"sessionUpdate": "usage_update", "used": 2**64, "size": 100}), "uint64")


def test_unknown_session_update_kind_fails(acp_validator: WireValidator) -> None:
    _bad(acp_validator, _update({"sessionUpdate": "bogus"}), "$.params.update.sessionUpdate", "'bogus'")


def test_missing_session_id_fails(acp_validator: WireValidator) -> None:
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"sessionUpdate": "plan", "entries": []}}}
    _bad(acp_validator, msg, "'sessionId' is a required property")


def test_tool_call_update_with_diff_passes(acp_validator: WireValidator) -> None:
    _ok(
        acp_validator,
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_1",
                "status": "completed",
                "content": [
                    {"type": "diff", "path": "/repo/a.py", "oldText": "x = 1\n", "newText": "x = 2\n"},
                    {"type": "diff", "path": "/repo/new.py", "oldText": None, "newText": "print()\n"},
                    {"type": "content", "content": {"type": "text", "text": "done"}},
                ],
                "locations": [{"path": "/repo/a.py", "line": 1}],
            }
        ),
    )


def test_tool_call_update_with_bad_diff_fails(acp_validator: WireValidator) -> None:
    bad = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "diff", "path": "/a"}]}
    _bad(acp_validator, _update(bad), "$.params.update.content[0]", "'newText' is a required property")
    bad_status = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "finished"}
    _bad(acp_validator, _update(bad_status), "$.params.update.status")


def test_tool_call_and_chunks_pass(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}))
    _ok(acp_validator, _update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}))
    _ok(
        acp_validator,
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_1",
                "title": "Read a.py",
                "kind": "read",
                "status": "pending",
                "rawInput": {"path": "a.py"},
            }
        ),
    )
    _bad(acp_validator, _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}), "'text'")


def test_notice_and_compaction_update_pass(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _update({"sessionUpdate": "notice", "severity": "warning", "title": "Context nearly full"}))
    _ok(
        acp_validator,
        _update({"sessionUpdate": "notice", "severity": "info", "title": "Compacted", "description": "saved 10k"}),
    )
    _ok(
        acp_validator, _update({"sessionUpdate": "compaction_update", "compactionId": "cmp-1", "status": "in_progress"})
    )
    _ok(
        acp_validator,
        _update(
            {
                "sessionUpdate": "compaction_update",
                "compactionId": "cmp-1",
                "status": "completed",
                "summary": [{"type": "text", "text": "summary of earlier turns"}],
            }
        ),
    )


def test_malformed_notice_and_compaction_fail(acp_validator: WireValidator) -> None:
    _bad(acp_validator, _update({"sessionUpdate": "notice", "severity": "info", "title": ""}), "$.params.update.title")
    _bad(acp_validator, _update({"sessionUpdate": "notice", "title": "x"}), "'severity' is a required property")
    _bad(acp_validator, _update({"sessionUpdate": "compaction_update", "status": "completed"}), "'compactionId'")


# -- responses --------------------------------------------------------------------------------------------------


def test_session_new_result_missing_session_id_fails(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _result(1, {"sessionId": "sess-1"}))
    _bad(
        acp_validator, _result(1, {}), "session/new result", "NewSessionResponse", "'sessionId' is a required property"
    )


def test_prompt_result_bogus_stop_reason_fails(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _result(2, {"stopReason": "end_turn"}))
    _ok(acp_validator, _result(2, {"stopReason": "cancelled"}))
    _bad(acp_validator, _result(2, {"stopReason": "bogus"}), "session/prompt result", "$.result.stopReason", "'bogus'")


def test_initialize_result_validated_as_initialize(acp_validator: WireValidator) -> None:
    good = {
        "protocolVersion": 1,
        "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": False, "embeddedContext": True}},
        "authMethods": [],
        "agentInfo": {"name": "ama", "version": "0.1.0"},
    }
    _ok(acp_validator, _result(0, good))
    _bad(acp_validator, _result(0, {**good, "protocolVersion": "1"}), "initialize result", "$.result.protocolVersion")
    _bad(acp_validator, _result(0, {**good, "agentCapabilities": {"loadSession": "yes"}}), "loadSession")
    # The same payload is not an acceptable answer to session/new: the method decides the definition.
    _bad(acp_validator, _result(1, good), "session/new result", "'sessionId' is a required property")


def test_response_to_unknown_id_fails(acp_validator: WireValidator) -> None:
    _bad(acp_validator, _result(99, {"sessionId": "s"}), "99", "never sent")
    # ids are compared by value and type: "1" is not 1.
    _bad(acp_validator, _result("1", {"sessionId": "s"}), "never sent")


def test_result_and_error_together_fail(acp_validator: WireValidator) -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}, "error": {"code": -32603, "message": "x"}}
    _bad(acp_validator, msg, "both result and error")


def test_error_responses(acp_validator: WireValidator) -> None:
    _ok(acp_validator, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Invalid params"}})
    _ok(acp_validator, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "auth", "data": {"k": 1}}})
    _ok(acp_validator, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 2, "error": {"code": "oops", "message": "x"}}, "$.error.code")
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603}}, "'message' is a required property")
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 77, "error": {"code": -32603, "message": "x"}}, "never sent")


def test_extension_responses_are_envelope_only(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _result(4, {"anything": ["goes", 1]}))
    _ok(acp_validator, _result(4, None))


def test_other_results(acp_validator: WireValidator) -> None:
    _ok(acp_validator, _result("s-3", {}))
    _ok(acp_validator, _result(5, {}))
    _ok(acp_validator, _result(6, {"sessions": [{"sessionId": "a", "cwd": "/repo", "title": "t"}]}))
    _bad(acp_validator, _result(6, {"sessions": [{"cwd": "/repo"}]}), "session/list result", "$.result.sessions[0]")


# -- requests and notifications from ama ------------------------------------------------------------------------


def test_agent_requests(acp_validator: WireValidator) -> None:
    perm = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {
            "sessionId": "s",
            "toolCall": {"toolCallId": "c1", "title": "Edit a.py", "kind": "edit"},
            "options": [
                {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "deny", "name": "Reject", "kind": "reject_once"},
            ],
        },
    }
    _ok(acp_validator, perm)
    broken = json.loads(json.dumps(perm))
    broken["params"]["options"][0]["kind"] = "maybe"
    _bad(acp_validator, broken, "session/request_permission params", "$.params.options[0].kind")
    _ok(
        acp_validator,
        {"jsonrpc": "2.0", "id": 1, "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/a"}},
    )
    _bad(
        acp_validator,
        {"jsonrpc": "2.0", "id": 1, "method": "fs/read_text_file", "params": {"sessionId": "s"}},
        "'path' is a required property",
    )
    _ok(
        acp_validator,
        {"jsonrpc": "2.0", "id": 2, "method": "terminal/create", "params": {"sessionId": "s", "command": "ls"}},
    )
    _bad(
        acp_validator,
        {"jsonrpc": "2.0", "id": 3, "method": "terminal/wait_for_exit", "params": {"sessionId": "s"}},
        "'terminalId' is a required property",
    )
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 4, "method": "fs/read_text_file"}, "has no params")


def test_unknown_and_misused_methods(acp_validator: WireValidator) -> None:
    _bad(acp_validator, {"jsonrpc": "2.0", "method": "session/progress", "params": {}}, "'session/progress'", "schema")
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 9, "method": "session/update", "params": {}}, "is a notification")
    # ama must not send client->agent methods.
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": {}}, "'session/prompt'")
    # Extension methods: envelope only.
    _ok(acp_validator, {"jsonrpc": "2.0", "method": "_ama/context", "params": {"anything": True}})
    _ok(acp_validator, {"jsonrpc": "2.0", "id": "x1", "method": "_ama/ask", "params": {"q": 1}})
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 1.5, "method": "_ama/ask", "params": {}}, "$.id")


def test_envelope(acp_validator: WireValidator) -> None:
    _bad(acp_validator, {"method": "session/update", "params": {}}, '"jsonrpc": "2.0"')
    _bad(acp_validator, {"jsonrpc": "1.0", "id": 1, "result": {"sessionId": "s"}}, '"jsonrpc": "2.0"')
    _bad(acp_validator, {"jsonrpc": "2.0"}, "neither")
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 1}, "neither result nor error")
    _bad(acp_validator, {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}, "extra": 1}, "unexpected members")


# -- raw lines ----------------------------------------------------------------------------------------------------


def test_raw_newline_inside_line_fails(acp_validator: WireValidator) -> None:
    msg = _update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a\nb"}})
    line = json.dumps(msg) + "\n"
    assert acp_validator.validate_line(line, SENT) == msg  # an escaped newline is fine
    pretty = json.dumps(msg, indent=2) + "\n"
    with pytest.raises(AssertionError, match="raw newline"):
        acp_validator.validate_line(pretty, SENT)
    with pytest.raises(AssertionError, match="raw newline"):
        acp_validator.validate_line(line.replace("\\n", "\n"), SENT)


def test_line_must_be_strict_json_object(acp_validator: WireValidator) -> None:
    lines: list[tuple[str | bytes, str]] = [
        ("", "empty line"),
        ("not json\n", "not valid JSON"),
        ('[{"jsonrpc": "2.0"}]\n', "not a JSON object"),
        ('{"jsonrpc": "2.0", "id": 2, "result": {"stopReason": NaN}}\n', "not valid JSON"),
        ('{"jsonrpc": "2.0", "id": 2, "id": 2, "result": {"stopReason": "end_turn"}}\n', "duplicate key"),
        (b'{"jsonrpc": "2.0", "method": "_x", "params": {"t": "\xff"}}\n', "UTF-8"),
    ]
    for bad, needle in lines:
        with pytest.raises(AssertionError, match=needle):
            acp_validator.validate_line(bad, SENT)
    assert acp_validator.validate_line(b'{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}\n', SENT)


# -- recorder -----------------------------------------------------------------------------------------------------


def test_recorder_collects_violations(acp_validator: WireValidator) -> None:
    rec = WireRecorder(acp_validator)
    rec.sent({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
    rec.received(json.dumps(_result(0, {"protocolVersion": 1})) + "\n")
    rec.sent({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/r", "mcpServers": []}})
    rec.received(json.dumps(_result(1, {"sessionId": "s"})) + "\n")
    rec.received(json.dumps(_update({"sessionUpdate": "usage_update", "used": 1, "size": 10}, "s")) + "\n")
    rec.sent({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})  # notification: ignored
    rec.assert_clean()
    assert len(rec.messages) == 3

    rec.received(json.dumps(_update({"sessionUpdate": "usage_update", "used": 1}, "s")) + "\n")
    rec.received(json.dumps(_result(1, {"sessionId": "s"})) + "\n")  # second answer to id 1
    rec.received('{"jsonrpc": "2.0",\n"id": 5}\n')
    with pytest.raises(AssertionError) as info:
        rec.assert_clean()
    text = str(info.value)
    assert "3 ACP wire violation(s)" in text
    assert "'size' is a required property" in text
    assert "second response to id 1" in text
    assert "raw newline" in text


def test_recorder_parks_responses_until_request_recorded(acp_validator: WireValidator) -> None:
    rec = WireRecorder(acp_validator)
    rec.received(json.dumps(_result(7, {"stopReason": "end_turn"})) + "\n")  # raced ahead of sent()
    rec.sent({"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}})
    rec.assert_clean()
    rec.received(json.dumps(_result(8, {"stopReason": "end_turn"})) + "\n")
    with pytest.raises(AssertionError, match="id 8, which the client never sent"):
        rec.assert_clean()


def test_recorder_raise_immediately(acp_validator: WireValidator) -> None:
    rec = WireRecorder(acp_validator, raise_immediately=True)
    with pytest.raises(AssertionError, match="'bogus'"):
        rec.received(json.dumps(_update({"sessionUpdate": "bogus"})) + "\n")


# -- the optimised schema accepts exactly what the published one does ---------------------------------------------


_CORPUS: list[tuple[str, object]] = [
    ("SessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "usage_update", "used": 1, "size": 2}}),
    ("SessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "usage_update", "used": 1}}),
    ("SessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "bogus"}}),
    ("SessionNotification", {"sessionId": "s", "update": {}}),
    ("SessionNotification", {"sessionId": "s", "update": []}),
    ("SessionNotification", {"sessionId": "s", "update": {"sessionUpdate": 3}}),
    ("SessionNotification", {"sessionId": "s", "update": {"sessionUpdate": "plan", "entries": []}}),
    (
        "SessionNotification",
        {
            "sessionId": "s",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}},
        },
    ),
    (
        "SessionNotification",
        {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}},
    ),
    (
        "SessionNotification",
        {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "x"}}},
    ),
    (
        "SessionNotification",
        {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c",
                "content": [{"type": "diff", "path": "/a", "newText": "b"}, {"type": "terminal", "terminalId": "t"}],
            },
        },
    ),
    (
        "SessionNotification",
        {"sessionId": "s", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]}},
    ),
    (
        "SessionNotification",
        {"sessionId": "s", "update": {"sessionUpdate": "compaction_update", "compactionId": "c", "status": "x"}},
    ),
    (
        "RequestPermissionResponse",
        {"outcome": {"outcome": "selected", "optionId": "allow"}},
    ),
    ("RequestPermissionResponse", {"outcome": {"outcome": "cancelled"}}),
    ("RequestPermissionResponse", {"outcome": {"outcome": "selected"}}),
    ("RequestPermissionResponse", {"outcome": {"outcome": "other"}}),
    ("NewSessionResponse", {"sessionId": "s", "configOptions": []}),
    ("PromptResponse", {"stopReason": "refusal"}),
    ("PromptResponse", {"stopReason": "nope"}),
]


def test_optimised_schema_is_equivalent(acp_validator: WireValidator) -> None:
    plain = WireValidator(acp_validator.schema, optimize=False)
    assert plain.optimized_unions == 0
    verdicts = []
    for name, instance in _CORPUS:
        fast = not acp_validator.definition_errors(name, instance)
        slow = plain.definition_validator(name).is_valid(instance)
        assert fast == slow, (name, instance)
        verdicts.append(fast)
    assert any(verdicts) and not all(verdicts)


# -- reading the vendored schema ----------------------------------------------------------------------------


def _pinned_sha256(root: Path, path: str) -> str:
    """Read straight from pin.json, independently of the loader under test."""
    digest = {f["path"]: f["sha256"] for f in json.loads((root / "pin.json").read_text())["files"]}[path]
    assert isinstance(digest, str)
    return digest


def _copy_of_schema_dir(tmp_path: Path) -> Path:
    root = tmp_path / "schema"
    for name in ("pin.json", "LICENSE", "v1/schema.json", "v1/schema.unstable.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCHEMA_DIR / name, root / name)
    return root


def test_schema_files_are_the_vendored_ones_and_match_the_pin() -> None:
    unstable, stable = acp_schema.schema_path(), acp_schema.stable_schema_path()
    assert unstable == SCHEMA_DIR / "v1" / "schema.unstable.json"
    assert stable == SCHEMA_DIR / "v1" / "schema.json"
    assert hashlib.sha256(unstable.read_bytes()).hexdigest() == _pinned_sha256(SCHEMA_DIR, "v1/schema.unstable.json")
    assert hashlib.sha256(stable.read_bytes()).hexdigest() == _pinned_sha256(SCHEMA_DIR, "v1/schema.json")


def test_an_untouched_copy_is_accepted(tmp_path: Path) -> None:
    root = _copy_of_schema_dir(tmp_path)
    assert acp_schema.schema_path(root) == root.resolve() / "v1" / "schema.unstable.json"


def test_wrong_hash_fails_loudly(tmp_path: Path) -> None:
    root = _copy_of_schema_dir(tmp_path)
    target = root / "v1" / "schema.unstable.json"
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01  # one flipped bit in the last bytes: still about the same file, not the pinned one
    target.write_bytes(bytes(data))
    with pytest.raises(SchemaUnavailable) as info:
        acp_schema.schema_path(root)
    text = str(info.value)
    assert "v1/schema.unstable.json" in text
    assert hashlib.sha256(bytes(data)).hexdigest() in text
    assert _pinned_sha256(root, "v1/schema.unstable.json") in text
    assert "schema/refresh.py" in text


def test_missing_file_fails_loudly(tmp_path: Path) -> None:
    root = _copy_of_schema_dir(tmp_path)
    (root / "v1" / "schema.json").unlink()
    # The unstable file is intact, but the pin covers the whole directory: a partial copy is refused.
    with pytest.raises(SchemaUnavailable, match=r"v1/schema\.json: missing"):
        acp_schema.schema_path(root)


def test_missing_or_broken_pin_fails_loudly(tmp_path: Path) -> None:
    root = _copy_of_schema_dir(tmp_path)
    (root / "pin.json").unlink()
    with pytest.raises(SchemaUnavailable, match="cannot read .*pin.json"):
        acp_schema.schema_path(root)
    (root / "pin.json").write_text('{"package": "@agentclientprotocol/sdk"}')
    with pytest.raises(SchemaUnavailable, match="not a valid pin"):
        acp_schema.schema_path(root)
