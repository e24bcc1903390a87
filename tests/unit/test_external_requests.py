"""An external agent's requests to ama (session/tasks/external/requests.py) are hostile input: whatever their params,
the answer is a result or an error for that request (an `AcpError`), never another exception; and what the mode
decides without the person is decided without asking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.rpc.errors import AcpError
from ama_acp.session.tasks.external.requests import ExternalRequests
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import LocalWorkspace
from tests.support.hypothesis_profiles import examples

SID = "child-1"


class Parent:
    def __init__(self, root: Path, mode: str = "manual") -> None:
        self.id = "parent-1"
        self.mode = mode
        self.tool_ctx = ToolContext(LocalWorkspace(), str(root), PathPolicy([str(root)]))
        self.approver = self
        self.rt = self
        self.asked: list[tuple[str, object]] = []

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, object]) -> Refusal | None:
        return None

    async def client_request(self, method: str, params: Any, timeout: float | None = None) -> object:
        self.asked.append((method, params))
        return {"outcome": {"outcome": "selected", "optionId": "yes"}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10,
)
params = st.one_of(
    st.dictionaries(
        st.sampled_from(["sessionId", "path", "content", "line", "limit", "toolCall", "options"]), json_values
    ),
    st.fixed_dictionaries(
        {"sessionId": st.just(SID)},
        optional={
            "toolCall": st.fixed_dictionaries(
                {}, optional={"toolCallId": json_values, "kind": json_values, "rawInput": json_values}
            ),
            "options": st.lists(
                st.fixed_dictionaries(
                    {"optionId": st.text(max_size=5), "name": st.text(max_size=5)},
                    optional={"kind": st.sampled_from(["allow_once", "reject_once", "maybe"])},
                ),
                max_size=3,
            ),
            "path": json_values,
            "content": json_values,
        },
    ),
)


@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(["request_permission", "read_text_file", "write_text_file"]), params)
def test_any_request_is_answered_or_refused_with_an_acp_error(tmp_path_factory: Any, method: str, p: Any) -> None:
    root = tmp_path_factory.mktemp("ws")
    handler = ExternalRequests(Parent(root), "call_1", "ext")
    handler.session_id = SID

    async def call() -> None:
        try:
            result = await getattr(handler, method)(p)
        except AcpError:
            return
        assert isinstance(result, dict)

    anyio.run(call)


@pytest.mark.parametrize(
    ("mode", "kind", "asked", "chosen"),
    [
        ("read_only", "edit", False, "no"),
        ("read_only", "other", False, "no"),  # an unknown kind counts as execute
        ("full_access", "execute", False, "yes"),
        ("manual", "read", False, "yes"),  # a read inside the workspace: ama's own reads are not asked either
        ("manual", "execute", True, "yes"),
        ("accept_edits", "edit", False, "yes"),
    ],
)
def test_the_mode_decides_what_it_can_and_the_person_the_rest(
    tmp_path: Path, mode: str, kind: str, asked: bool, chosen: str
) -> None:
    parent = Parent(tmp_path, mode)
    handler = ExternalRequests(parent, "call_1", "ext")
    handler.session_id = SID
    request: JSONObject = {
        "sessionId": SID,
        "toolCall": {
            "toolCallId": "x",
            "title": "Do it",
            "kind": kind,
            "locations": [{"path": str(tmp_path / "f")}],
            "rawInput": {"command": "make"},
        },
        "options": [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ],
    }
    result = anyio.run(handler.request_permission, request)
    assert result == {"outcome": {"outcome": "selected", "optionId": chosen}}
    assert bool(parent.asked) == asked
    if asked:
        [(method, sent)] = parent.asked
        assert method == "session/request_permission"
        shown = msgspec.to_builtins(sent)
        assert shown["sessionId"] == "parent-1" and shown["toolCall"]["title"] == "ext: Do it"
        assert shown["toolCall"]["rawInput"] == {"command": "make"}


def test_another_session_id_is_refused(tmp_path: Path) -> None:
    handler = ExternalRequests(Parent(tmp_path), "call_1", "ext")
    handler.session_id = SID
    with pytest.raises(AcpError, match="sessionId"):
        request: JSONObject = {"sessionId": "other", "path": str(tmp_path / "f")}
        anyio.run(handler.read_text_file, request)
