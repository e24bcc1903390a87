"""A session whose file cannot be written (disk full) goes on in memory and says so in the log."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from ama_acp.agent.instructions import SessionInstructions
from ama_acp.config import Config, InstructionsConfig
from ama_acp.rpc.dispatch import JSONValue
from ama_acp.rpc.peer import Params
from ama_acp.session.manager import SessionManager
from ama_acp.shaping.skills import Found
from ama_acp.wire import types as w


class Peer:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    async def notify(self, method: str, params: Params) -> None:
        self.updates.append(msgspec.to_builtins(params)["update"])

    async def request(self, method: str, params: Params, timeout: float | None = None) -> JSONValue:
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class FullDisk:
    def __init__(self) -> None:
        self.calls = 0

    def append(self, entry: object) -> None:
        self.calls += 1
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        pass


def test_write_error_ends_persistence_not_the_turn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "ws").mkdir()
    peer = Peer()
    manager = SessionManager(Config(data_dir=str(tmp_path / "data")), peer, default_model="scripted/demo")

    async def main() -> str:
        session = manager.new_session(str(tmp_path / "ws"), None, [])
        disk = FullDisk()
        session.journal.attach(disk)
        result = await session.prompt([w.TextContent(text="hello")])
        assert disk.calls == 1  # the first failure stops further writes
        assert session.journal.writer is None
        await manager.shutdown()  # the sandbox's launcher started after the demo's command ends with the session
        return result.stop_reason

    with caplog.at_level(logging.ERROR):
        assert anyio.run(main) == "end_turn"
    assert "No space left on device" in caplog.text and "will not survive a restart" in caplog.text
    assert any(u["sessionUpdate"] == "agent_message_chunk" for u in peer.updates)


# --- a load's stored figure while its MCP servers start (docs/context.md "Session load") ---------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ama_acp.config import Price  # noqa: E402
from ama_acp.conversation.messages import AssistantMessage, Message, TextPart, Usage, UserMessage  # noqa: E402
from ama_acp.conversation.tools import ToolSpec  # noqa: E402
from ama_acp.session.accounting.held_figure import stored_digests  # noqa: E402
from ama_acp.session.accounting.session_context import SessionContext  # noqa: E402
from tests.support.hypothesis_profiles import examples  # noqa: E402

OWN = [ToolSpec("read_file", "Read a file.", {"type": "object"})]


def mcp_tools(server: str, *names: str) -> list[ToolSpec]:
    return [ToolSpec(f"mcp__{server}__{n}", f"{n} of {server}", {"type": "object"}) for n in names]


class Servers:
    """A session's MCP servers as the accounting sees them: which are configured, which still start, the
    tools of the ready ones."""

    def __init__(self, **configured: list[ToolSpec]) -> None:
        self.configured = configured  # name → the tools it will have once ready
        self.ready: dict[str, list[ToolSpec]] = {}
        self.failed: set[str] = set()
        self.version = 0

    def server_names(self) -> list[str]:
        return list(self.configured)

    def starting(self) -> list[str]:
        return [n for n in self.configured if n not in self.ready and n not in self.failed]

    def come_up(self, name: str, tools: list[ToolSpec] | None = None) -> None:
        self.ready[name] = self.configured[name] if tools is None else tools
        self.version += 1

    def fail(self, name: str) -> None:
        self.failed.add(name)


class Accounted:
    def __init__(self, servers: Servers | None) -> None:
        self.servers = servers
        self.id = "ses_test"
        self.model_id = "local/m"
        # No project instructions: the accounting under test is the tools'.
        self.instructions = SessionInstructions(InstructionsConfig(enabled=False), "/nonexistent", None)
        self.skills = Found()

    def system_prompt(self) -> str:
        return "You are ama." * 50

    def tool_specs(self) -> list[ToolSpec]:
        return [*OWN, *(t for tools in self.mcp_declarations().values() for t in tools)]

    def tools_version(self) -> int:
        return self.servers.version if self.servers else 0

    def mcp_declarations(self) -> dict[str, list[ToolSpec]]:
        if self.servers is None:
            return {}
        return {n: self.servers.ready.get(n, []) for n in self.servers.configured}

    @property
    def tools(self) -> Accounted:  # the declared tools (session/turn/toolset.py's part, in a session)
        return self


class Runtime:
    config = Config()

    def context_window(self, model_id: str) -> int | None:
        return 100_000

    def price(self, model_id: str, usage: Usage | None) -> Price | None:
        return None


MESSAGES: list[Message] = [
    UserMessage(content=[TextPart("go")]),
    AssistantMessage(content=[TextPart("measured")], usage=Usage(input=3000, output=20)),
]


def measured(servers: Servers | None) -> tuple[dict[str, Any], SessionContext]:
    """The stored meter state of a live session whose response was measured with these servers ready."""
    ctx = SessionContext(Runtime(), Accounted(servers))
    if servers is not None:
        for name in servers.configured:
            servers.come_up(name)
    ctx.figures()
    ctx.append(MESSAGES[0])
    ctx.append(MESSAGES[1])
    return msgspec.json.decode(msgspec.json.encode(ctx.meter_state())), ctx


def load(state: dict[str, Any], servers: Servers | None) -> SessionContext:
    ctx = SessionContext(Runtime(), Accounted(servers))
    ctx.restore(list(MESSAGES), state, None)
    assert ctx.reopen is not None
    ctx.reopen.servers_known(servers)
    return ctx


def test_the_stored_figure_holds_while_the_same_servers_start_and_after() -> None:
    state, live = measured(Servers(a=mcp_tools("a", "x", "y"), b=mcp_tools("b", "z")))
    assert set(state["mcp"]) == {"a", "b"} and state["source"] == "usage"
    servers = Servers(a=mcp_tools("a", "x", "y"), b=mcp_tools("b", "z"))
    ctx = load(state, servers)
    assert ctx.figures() == live.figures()  # neither is ready: not a change
    servers.come_up("b")
    assert ctx.figures() == live.figures()
    servers.come_up("a")
    assert ctx.figures() == live.figures() and ctx.reopen is None  # final and the same: verified


def test_a_server_left_out_of_the_load_is_an_estimate_at_once() -> None:
    state, _ = measured(Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z")))
    ctx = load(state, Servers(a=mcp_tools("a", "x")))  # b is gone; a still starting
    assert ctx.figures().source == "estimate"


def test_no_servers_at_all_compares_at_once() -> None:
    with_mcp, _ = measured(Servers(a=mcp_tools("a", "x")))
    assert load(with_mcp, None).figures().source == "estimate"
    without, live = measured(None)
    assert without["mcp"] == {}
    assert load(without, None).figures() == live.figures()


def test_a_settled_server_with_other_tools_is_an_estimate_before_the_others_are_up() -> None:
    state, _ = measured(Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z")))
    servers = Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z"))
    ctx = load(state, servers)
    servers.come_up("a", mcp_tools("a", "x", "new"))
    assert ctx.figures().source == "estimate"


def test_a_server_that_fails_on_reload_is_an_estimate() -> None:
    state, _ = measured(Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z")))
    servers = Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z"))
    ctx = load(state, servers)
    servers.fail("a")
    assert ctx.figures().source == "estimate"  # b still starting: a's failure decides already


def test_an_added_server_moves_the_figure_only_if_it_brings_tools() -> None:
    state, live = measured(Servers(a=mcp_tools("a", "x")))
    servers = Servers(a=mcp_tools("a", "x"), new=mcp_tools("new", "t"))
    ctx = load(state, servers)
    servers.come_up("a")
    assert ctx.figures() == live.figures()  # `new` still starting
    servers.fail("new")
    assert ctx.figures() == live.figures() and ctx.reopen is None
    servers2 = Servers(a=mcp_tools("a", "x"), new=mcp_tools("new", "t"))
    ctx = load(state, servers2)
    servers2.come_up("new")
    assert ctx.figures().source == "estimate"


def test_a_state_stored_without_digests_waits_for_every_server() -> None:
    state, live = measured(Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z")))
    del state["mcp"]  # an older ama
    servers = Servers(a=mcp_tools("a", "x"), b=mcp_tools("b", "z"))
    ctx = load(state, servers)
    servers.come_up("a")
    assert ctx.figures() == live.figures()
    servers.come_up("b")
    assert ctx.figures() == live.figures() and ctx.reopen is None


def test_before_the_servers_are_known_nothing_is_final() -> None:
    state, live = measured(Servers(a=mcp_tools("a", "x")))
    ctx = SessionContext(Runtime(), Accounted(None))
    ctx.restore(list(MESSAGES), state, None)
    assert ctx.figures() == live.figures()  # the load has not connected its servers yet
    assert ctx.reopen is not None
    ctx.reopen.servers_known(None)
    assert ctx.figures().source == "estimate"


def test_a_new_response_during_the_hold_is_measured_and_stored_with_the_servers_of_now() -> None:
    state, _ = measured(Servers(a=mcp_tools("a", "x"), late=mcp_tools("late", "q")))
    servers = Servers(a=mcp_tools("a", "x"), late=mcp_tools("late", "q"))
    ctx = load(state, servers)
    servers.come_up("a")
    ctx.append(UserMessage(content=[TextPart("more")]))
    ctx.figures()  # the request is built (the session reads the figures before it): a's tools, not late's
    ctx.append(AssistantMessage(content=[TextPart("again")], usage=Usage(input=3500, output=5)))
    stored = ctx.meter_state()
    assert stored["mcp"] == {"a": state["mcp"]["a"]}  # measured without the late server's tools
    servers.come_up("late")  # it joins: the next request carries more than the new anchor measured
    assert ctx.figures().source == "estimate"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(200), deadline=None)
@given(json_values)
def test_stored_digests_of_any_value_are_digests_or_unknown(value: object) -> None:
    digests = stored_digests(value)
    assert digests is None or all(isinstance(k, str) and isinstance(v, str) for k, v in digests.items())
    state, _ = measured(Servers(a=mcp_tools("a", "x")))
    state["mcp"] = value
    servers = Servers(a=mcp_tools("a", "x"))
    ctx = load(state, servers)  # a hostile value never fails the load
    servers.come_up("a")
    assert ctx.figures().source == "usage"  # the same tools: whatever the digests said, the key decides
