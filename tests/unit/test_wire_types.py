"""The hand-written wire types (ama_acp/wire/types.py) against the pinned schema: every field ama writes has
the schema's name, and every field the schema requires is present (a drift check for the hand-written code).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from ama_acp.wire import types as w
from ama_conformance.schema.validate import schema_path

# Our Struct → the schema definition it mirrors (same name unless noted).
OUTGOING = {
    w.InitializeResponse: "InitializeResponse",
    w.AgentCapabilities: "AgentCapabilities",
    w.PromptCapabilities: "PromptCapabilities",
    w.SessionCapabilities: "SessionCapabilities",
    w.Implementation: "Implementation",
    w.NewSessionResponse: "NewSessionResponse",
    w.LoadSessionResponse: "LoadSessionResponse",
    w.ListSessionsResponse: "ListSessionsResponse",
    w.SessionInfo: "SessionInfo",
    w.SessionModeState: "SessionModeState",
    w.SessionMode: "SessionMode",
    w.SessionConfigSelectOption: "SessionConfigSelectOption",
    w.PromptResponse: "PromptResponse",
    w.TurnUsage: "Usage",
    w.AgentMessageChunk: "ContentChunk",
    w.AgentThoughtChunk: "ContentChunk",
    w.ToolCall: "ToolCall",
    w.ToolCallUpdate: "ToolCallUpdate",
    w.ToolCallFields: "ToolCallUpdate",
    w.ToolCallLocation: "ToolCallLocation",
    w.Diff: "Diff",
    w.Plan: "Plan",
    w.PlanEntry: "PlanEntry",
    w.AvailableCommand: "AvailableCommand",
    w.AvailableCommandsUpdate: "AvailableCommandsUpdate",
    w.CurrentModeUpdate: "CurrentModeUpdate",
    w.ConfigOptionUpdate: "ConfigOptionUpdate",
    w.SessionInfoUpdate: "SessionInfoUpdate",
    w.UsageUpdate: "UsageUpdate",
    w.Cost: "Cost",
    w.Notice: "Notice",
    w.CompactionUpdate: "CompactionUpdate",
    w.PermissionOption: "PermissionOption",
    w.RequestPermissionRequest: "RequestPermissionRequest",
    w.ReadTextFileRequest: "ReadTextFileRequest",
    w.WriteTextFileRequest: "WriteTextFileRequest",
    w.CreateTerminalRequest: "CreateTerminalRequest",
    w.EnvVariable: "EnvVariable",
    w.SessionNotification: "SessionNotification",
}
INCOMING = {
    w.InitializeRequest: "InitializeRequest",
    w.NewSessionRequest: "NewSessionRequest",
    w.LoadSessionRequest: "LoadSessionRequest",
    w.ResumeSessionRequest: "ResumeSessionRequest",
    w.ListSessionsRequest: "ListSessionsRequest",
    w.PromptRequest: "PromptRequest",
    w.SetSessionModeRequest: "SetSessionModeRequest",
    w.SetSessionConfigOptionRequest: "SetSessionConfigOptionRequest",
    w.ClientCapabilities: "ClientCapabilities",
    w.FileSystemCapabilities: "FileSystemCapabilities",
}


@pytest.fixture(scope="module")
def defs() -> dict[str, Any]:
    found = json.loads(schema_path().read_text())["$defs"]
    assert isinstance(found, dict)
    return found


def struct_info(cls: type) -> msgspec.inspect.StructType:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType), cls
    return info


def wire_fields(cls: type) -> set[str]:
    info = struct_info(cls)
    names = {f.encode_name for f in info.fields}
    if info.tag_field:
        names.add(info.tag_field)
    return names


def properties(defs: dict[str, Any], name: str) -> tuple[set[str], set[str]]:
    d = defs[name]
    props = set(d.get("properties", {}))
    required = set(d.get("required", []))
    for branch in d.get("allOf", []) + d.get("oneOf", []) + d.get("anyOf", []):
        ref = branch.get("$ref")
        if ref:
            p, _ = properties(defs, ref.rsplit("/", 1)[1])
            props |= p
        props |= set(branch.get("properties", {}))
    return props, required


@pytest.mark.parametrize("cls", list(OUTGOING), ids=lambda c: c.__name__)
def test_outgoing_fields_are_the_schemas(defs, cls):
    props, required = properties(defs, OUTGOING[cls])
    ours = wire_fields(cls) - {"sessionUpdate", "type"}  # tags: checked by the per-method validator
    assert ours <= props | {"_meta"}, f"{cls.__name__} writes fields the schema does not know: {ours - props}"
    missing = required - wire_fields(cls)
    assert not missing, f"{cls.__name__} lacks required fields {missing}"


@pytest.mark.parametrize("cls", list(INCOMING), ids=lambda c: c.__name__)
def test_incoming_fields_are_the_schemas(defs, cls):
    props, required = properties(defs, INCOMING[cls])
    ours = wire_fields(cls)
    assert ours <= props | {"_meta"}, f"{cls.__name__} reads fields the schema does not know: {ours - props}"
    # Every field the schema requires is required by our decoder too (so -32602 names it).
    info = struct_info(cls)
    ours_required = {f.encode_name for f in info.fields if f.required}
    assert required <= ours_required, f"{cls.__name__} does not require {required - ours_required}"
