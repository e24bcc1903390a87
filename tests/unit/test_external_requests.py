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
from ama_acp.rpc.errors import SESSION_BUSY, AcpError
from ama_acp.session.tasks.external.requests import (
    MAX_OPTIONS,
    MAX_WAITING,
    OPTION_LABELS,
    ExternalRequests,
    option_names,
)
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import LocalWorkspace
from ama_acp.wire import types as w
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


# --- issue 39: .git, the questions' queue, the options' names ----------------------------------------------------

MODES = ["read_only", "manual", "accept_edits", "full_access", "plan"]
git_spellings = st.builds(
    lambda prefix, git, rest: [*prefix, git, *rest],
    st.lists(st.sampled_from(["src", ".", "a..b", "sub"]), max_size=2),
    st.sampled_from([".git", ".GIT", ".Git"]),
    st.lists(st.sampled_from(["config", "hooks", "pre-commit", "info", "..git", "x"]), max_size=3),
)


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(MODES), git_spellings, st.booleans())
def test_a_write_into_git_is_refused_in_every_mode_before_anyone_is_asked(
    tmp_path_factory: Any, mode: str, parts: list[str], linked: bool
) -> None:
    root = tmp_path_factory.mktemp("ws")
    (root / ".git").mkdir()
    if linked:  # reached through a link to .git: refused by its real path
        (root / "g").symlink_to(root / ".git")
        parts = ["g", *parts[parts.index(next(p for p in parts if p.lower() == ".git")) + 1 :]]
    parent = Parent(root, mode)
    handler = ExternalRequests(parent, "call_1", "ext")
    handler.session_id = SID
    request: JSONObject = {"sessionId": SID, "path": str(root.joinpath(*parts)), "content": "[core]\n"}
    with pytest.raises(AcpError, match="inside a .git directory"):
        anyio.run(handler.write_text_file, request)
    assert parent.asked == [] and [p for p in (root / ".git").rglob("*")] == []


class Person(Parent):
    """An editor whose person answers only when told to, counting the questions open at once."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, "manual")
        self.open = 0
        self.most = 0
        self.answer = anyio.Event()

    async def client_request(self, method: str, params: Any, timeout: float | None = None) -> object:
        self.asked.append((method, params))
        self.open += 1
        self.most = max(self.most, self.open)
        try:
            await self.answer.wait()
        finally:
            self.open -= 1
        return {"outcome": {"outcome": "selected", "optionId": "yes"}}


def permission(n: int) -> JSONObject:
    return {
        "sessionId": SID,
        "toolCall": {"toolCallId": f"q{n}", "title": "Do it", "kind": "execute"},
        "options": [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ],
    }


@settings(max_examples=examples(20), deadline=None)
@given(st.integers(1, MAX_WAITING + 10))
def test_one_question_is_open_at_a_time_and_past_the_queue_the_rest_are_refused(
    tmp_path_factory: Any, count: int
) -> None:
    person = Person(tmp_path_factory.mktemp("ws"))
    handler = ExternalRequests(person, "call_1", "ext")
    handler.session_id = SID
    answers: list[object] = []
    refused: list[AcpError] = []

    async def ask(n: int) -> None:
        try:
            answers.append(await handler.request_permission(permission(n)))
        except AcpError as exc:
            refused.append(exc)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for n in range(count):
                tg.start_soon(ask, n)
            await anyio.wait_all_tasks_blocked()  # every request asked, waiting its turn, or refused
            assert len(person.asked) == 1 and len(refused) == max(0, count - 1 - MAX_WAITING)
            person.answer.set()

    anyio.run(main)
    assert person.most == 1
    assert len(answers) == min(count, 1 + MAX_WAITING) and len(refused) == max(0, count - 1 - MAX_WAITING)
    assert all(exc.code == SESSION_BUSY and f"{MAX_WAITING} requests" in exc.message for exc in refused)


option_lists = st.lists(
    st.builds(
        w.PermissionOption,
        option_id=st.text(max_size=8),
        name=st.text(max_size=40),
        kind=st.sampled_from(sorted(OPTION_LABELS)),
    ),
    min_size=1,
    max_size=MAX_OPTIONS,
)


@settings(max_examples=examples(200))
@given(option_lists)
def test_an_option_is_shown_by_what_its_kind_does_whatever_the_agent_named_it(options: list[Any]) -> None:
    shown = option_names(options)
    assert [(o.option_id, o.kind) for o in shown] == [(o.option_id, o.kind) for o in options]
    for option in shown:
        label = OPTION_LABELS[option.kind]
        assert option.name == label or option.name.startswith(label + ": ")
        assert option.name.isprintable() and len(option.name) <= len(label) + 2 + 80
    kinds = [o.kind for o in options]
    for original, option in zip(options, shown, strict=True):
        if kinds.count(original.kind) == 1:
            assert option.name == OPTION_LABELS[original.kind]  # its own words only tell apart options of one kind


def test_options_with_one_id_for_two_kinds_are_refused(tmp_path: Path) -> None:
    handler = ExternalRequests(Parent(tmp_path), "call_1", "ext")
    handler.session_id = SID
    request = permission(1)
    request["options"] = [
        {"optionId": "x", "name": "Reject", "kind": "reject_once"},
        {"optionId": "x", "name": "Allow", "kind": "allow_once"},
    ]
    with pytest.raises(AcpError, match="distinct"):
        anyio.run(handler.request_permission, request)
