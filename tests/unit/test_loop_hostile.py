"""The agent loop against hostile model output and a host that breaks: every tool call of an appended
assistant message gets exactly one result before anything else, and every announced call one final status.

The host here is a real implementation of the loop's `TurnHost` seam (a conversation list, an event list,
tools as plain async functions); the provider is a real async generator of the typed events providers yield.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.agent import events as ev
from ama_acp.agent.loop import Refusal, run_turn
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, ToolResultMessage, UserMessage
from ama_acp.providers import base as pb
from ama_acp.tools.base import ToolError, ToolResult
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


class ScriptedProvider:
    def __init__(self, replies: list[list[Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[pb.ModelRequest] = []

    async def stream(self, request: pb.ModelRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else [pb.TextDelta("done"), pb.Finished("end_turn")]
        for event in reply:
            yield event


class Host:
    """Tools by behaviour name: ok, tool_error, crash (a bug in the tool), hang (until cancelled)."""

    max_turn_requests = 10

    def __init__(self, replies: list[list[Any]], *, fail_at: str | None = None) -> None:
        self.p = ScriptedProvider(replies)
        self.messages: list[Message] = []
        self.events: list[Any] = []
        self.fail_at = fail_at  # "describe" | "approve" | "emit_started" | "after_message"
        self.failures: list[str] = []
        self.running = anyio.Event()
        self._n = 0

    def provider(self) -> Any:
        return self.p

    def build_request(self) -> pb.ModelRequest:
        return pb.ModelRequest(model="m", system="", messages=list(self.messages))

    async def append(self, message: Message) -> None:
        self.messages.append(message)

    async def emit(self, event: Any) -> None:
        if self.fail_at == "emit_started" and isinstance(event, ev.ToolCallStarted):
            raise Boom("emit")
        self.events.append(event)

    def wire_id(self, provider_id: str) -> str:
        self._n += 1
        return f"{provider_id}-{self._n}"

    def describe_tool(self, name: str, args: dict[str, Any]) -> ev.ToolCallRequested | None:
        if self.fail_at == "describe":
            raise Boom("describe")
        if name not in ("ok", "tool_error", "crash", "hang", "refuse"):
            return None
        return ev.ToolCallRequested("", name, name, "read", [], args)

    async def approve(self, call: ev.ToolCallRequested, args: dict[str, Any]) -> Refusal | None:
        if self.fail_at == "approve":
            raise Boom("approve")
        if call.name == "refuse":
            return Refusal("model text", "person text")
        return None

    async def run_tool(self, name: str, args: dict[str, Any], wire_id: str) -> ToolResult:
        if name == "tool_error":
            raise ToolError("bad input")
        if name == "crash":
            raise Boom("tool")
        if name == "hang":
            self.running.set()
            await anyio.sleep_forever()
        return ToolResult("fine")

    async def after_assistant_message(self, message: AssistantMessage) -> None:
        if self.fail_at == "after_message" and message.tool_calls:
            raise Boom("after")

    async def request_lost(self) -> None:
        return None

    async def before_request(self) -> None:
        return None

    async def provider_failed(self, failure: pb.Failure) -> None:
        self.failures.append(failure.message)

    async def turn_failed(self, text: str) -> None:
        self.failures.append(text)


def calls_reply(*calls: tuple[Any, Any, str]) -> list[Any]:
    return [*(pb.ToolCallEvent(cid, name, args) for cid, name, args in calls), pb.Finished("tool_use")]


def check_invariant(host: Host) -> None:
    """After each assistant message with calls: exactly its results, in order, and nothing between."""
    msgs = host.messages
    for i, m in enumerate(msgs):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            following = msgs[i + 1 : i + 1 + len(ids)]
            assert [r.tool_call_id for r in following if isinstance(r, ToolResultMessage)] == ids
            assert all(isinstance(r, ToolResultMessage) for r in following)
    announced = [e.wire_id for e in host.events if isinstance(e, ev.ToolCallRequested)]
    finished = [e.wire_id for e in host.events if isinstance(e, ev.ToolCallFinished)]
    assert sorted(announced) == sorted(finished), "every announced call has exactly one final status"


def results(host: Host) -> list[ToolResultMessage]:
    return [m for m in host.messages if isinstance(m, ToolResultMessage)]


async def test_arguments_nested_100000_levels_are_invalid_arguments_not_a_crash():
    deep = "[" * 100_000 + "]" * 100_000
    host = Host([calls_reply(("a", "ok", '{"x": ' + deep + "}"))])
    assert await run_turn(host, UserMessage([TextPart("go")])) == "end_turn"
    check_invariant(host)
    (r,) = results(host)
    assert r.is_error and "nested too deeply" in r.text


async def test_a_non_string_tool_name_and_id_fail_that_call_only():
    host = Host([calls_reply((7, 42, "{}"), ("b", "ok", "{}"))])
    assert await run_turn(host, UserMessage([TextPart("go")])) == "end_turn"
    check_invariant(host)
    bad, good = results(host)
    assert bad.is_error and "no tool named 42" in bad.text
    assert not good.is_error and good.text == "fine"


@pytest.mark.parametrize("fail_at", ["describe", "approve", "emit_started"])
@pytest.mark.allow_traceback  # injects host and tool bugs on purpose
async def test_a_host_failure_around_one_call_gives_that_call_an_error_result(fail_at):
    host = Host([calls_reply(("a", "ok", "{}"), ("b", "ok", "{}"))], fail_at=fail_at)
    assert await run_turn(host, UserMessage([TextPart("go")])) == "end_turn"
    check_invariant(host)
    assert all(r.is_error and "Boom" in r.text for r in results(host))
    assert host.p.requests[-1].messages[-1] == results(host)[-1]  # the next request went out, whole


@pytest.mark.allow_traceback  # injects host and tool bugs on purpose
async def test_a_failure_after_the_message_ends_the_turn_with_a_message_and_closed_calls():
    host = Host([calls_reply(("a", "ok", "{}"))], fail_at="after_message")
    assert await run_turn(host, UserMessage([TextPart("go")])) == "end_turn"
    check_invariant(host)
    assert results(host)[0].is_error
    assert host.failures and "internal error" in host.failures[0]


async def test_a_refusal_with_tool_calls_closes_them():
    host = Host([[pb.ToolCallEvent("a", "ok", "{}"), pb.Finished("refusal")]])
    assert await run_turn(host, UserMessage([TextPart("go")])) == "refusal"
    check_invariant(host)
    assert len(results(host)) == 1


async def test_the_person_and_the_model_get_their_own_refusal_text():
    host = Host([calls_reply(("a", "refuse", "{}"))])
    await run_turn(host, UserMessage([TextPart("go")]))
    (fin,) = [e for e in host.events if isinstance(e, ev.ToolCallFinished)]
    assert fin.shown == "person text" and fin.result.text == "model text"
    assert results(host)[0].text == "model text"


async def test_cancel_while_a_tool_runs_closes_every_call_of_the_message():
    host = Host([calls_reply(("a", "ok", "{}"), ("b", "hang", "{}"), ("c", "ok", "{}"))])
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_turn, host, UserMessage([TextPart("go")]))
            with anyio.fail_after(5):
                await host.running.wait()
            scope.cancel()
    check_invariant(host)
    texts = [r.text for r in results(host)]
    assert texts[0] == "fine" and all("cancelled" in t for t in texts[1:])
    # c was never announced, so it has a result for the model but no status for the person
    assert [e.wire_id for e in host.events if isinstance(e, ev.ToolCallRequested)] == ["a-1", "b-2"]


async def test_message_ids_are_unique_between_loop_runs():
    a, b = Host([[pb.TextDelta("x"), pb.Finished("end_turn")]]), Host([[pb.TextDelta("y"), pb.Finished("end_turn")]])
    await run_turn(a, UserMessage([TextPart("go")]))
    await run_turn(b, UserMessage([TextPart("go")]))
    ids = {e.message_id for h in (a, b) for e in h.events if isinstance(e, ev.TextChunk)}
    assert len(ids) == 2


BEHAVIOURS = st.sampled_from(["ok", "tool_error", "crash", "refuse", "nonexistent", 3])
ARGS = st.one_of(
    st.just("{}"),
    st.just("[1]"),
    st.just("{not json"),
    st.text(max_size=8),
    st.builds(lambda n: "[" * n + "]" * n, st.integers(0, 5000)),
    st.dictionaries(st.text(max_size=3), st.integers()).map(json.dumps),
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    replies=st.lists(st.lists(st.tuples(BEHAVIOURS, ARGS), min_size=1, max_size=4), min_size=1, max_size=3),
    fail_at=st.sampled_from([None, "describe", "approve", "emit_started", "after_message"]),
)
@pytest.mark.allow_traceback  # injects host and tool bugs on purpose
def test_property_every_call_gets_one_result_and_one_final_status(replies, fail_at):
    script = [calls_reply(*((f"id{i}", name, args) for i, (name, args) in enumerate(r))) for r in replies]
    host = Host(script, fail_at=fail_at)
    stop = anyio.run(run_turn, host, UserMessage([TextPart("go")]))
    assert stop == "end_turn"
    check_invariant(host)


# --- a session whose file cannot be written tells the person, once (uses the persist test's seams) ---------


@pytest.mark.parametrize("notices", [True, False])
def test_an_unwritable_session_file_is_told_to_the_person_once(tmp_path, notices):
    from ama_acp.config import Config
    from ama_acp.session.manager import SessionManager
    from ama_acp.wire import types as w
    from tests.unit.test_session_persist import FullDisk, Peer

    (tmp_path / "ws").mkdir()
    peer = Peer()
    manager = SessionManager(Config(data_dir=str(tmp_path / "data")), peer, default_model="scripted/demo")
    if notices:
        manager.client_caps = w.ClientCapabilities(session=w.ClientSessionCapabilities(notices={}))

    async def main() -> None:
        session = manager.new_session(str(tmp_path / "ws"), None, [])
        session.journal.attach(FullDisk())
        await session.prompt([w.TextContent(text="hello")])
        await session.prompt([w.TextContent(text="again")])
        await manager.shutdown()  # the sandbox's launcher started after the demo's commands ends with the session

    anyio.run(main)
    if notices:
        warned = [u for u in peer.updates if u["sessionUpdate"] == "notice"]
        assert len(warned) == 1 and "No space left on device" in warned[0]["description"]
    else:
        chunks = [u["content"]["text"] for u in peer.updates if u["sessionUpdate"] == "agent_message_chunk"]
        warned = [t for t in chunks if "can no longer be saved" in t]
        assert len(warned) == 1 and "No space left on device" in warned[0] and "will not survive a restart" in warned[0]
