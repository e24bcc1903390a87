"""Changes of a session's setting keep the provider's prompt cache (docs/protocol.md "Setting changes and the prompt cache"): after the
first request the system prompt is frozen and a mode change reaches the model as a reminder message, so every
request starts with exactly the bytes of the one before — asserted on the request bodies the model server
recorded, for both dialects, across mode changes and a reload. Also: the figure is resent when a mode change
moved it, and a thinking-level change is announced with `config_option_update`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, kinds, local_config, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def _strip_cache_marks(value: Any) -> Any:
    """Anthropic's `cache_control` breakpoints move forward with the conversation by design; they are not part
    of the cached bytes' identity."""
    if isinstance(value, dict):
        return {k: _strip_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_marks(v) for v in value]
    return value


def prefix_items(body: dict[str, Any], dialect: str) -> tuple[Any, Any, list[str]]:
    """(system, tools, the conversation as a flat list of encoded items) of one request body.

    Anthropic merges consecutive turns of one role, so a prefix is compared block by block (what its cache
    compares); OpenAI's messages are compared whole.
    """
    body = _strip_cache_marks(copy.deepcopy(body))
    if dialect == "anthropic":
        items = []
        for msg in body["messages"]:
            content = msg["content"]
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            items += [json.dumps([msg["role"], b], sort_keys=True) for b in blocks]
        return body.get("system"), body.get("tools"), items
    messages = body["messages"]
    system = [m for m in messages if m.get("role") == "system"]
    rest = [json.dumps(m, sort_keys=True) for m in messages if m.get("role") != "system"]
    assert messages[: len(system)] == system, "the system message leads the request"
    return system, body.get("tools"), rest


def assert_prefix_kept(bodies: list[dict[str, Any]], dialect: str) -> None:
    for i in range(1, len(bodies)):
        s0, t0, m0 = prefix_items(bodies[i - 1], dialect)
        s1, t1, m1 = prefix_items(bodies[i], dialect)
        assert s1 == s0, f"request {i} rewrote the system prompt"
        assert t1 == t0, f"request {i} changed the tool declarations"
        # The last item of the previous request may be a user turn Anthropic merged with what follows; every
        # item before it must be byte-identical and in place.
        assert m1[: len(m0)] == m0, f"request {i} does not start with request {i - 1}'s conversation"


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
async def test_mode_changes_and_a_reload_keep_every_request_prefix(tmp_path: Path, dialect: str) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("alpha\n")
    with LLMServer() as llm:
        url = llm.openai_url if dialect == "openai" else llm.anthropic_url
        ama.config.write_text(local_config(url, dialect, top='mode = "manual"'))
        llm.enqueue(
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
            {"text": "read it", "usage": {"input": 1200, "output": 10}},
            {"text": "two", "usage": {"input": 1300, "output": 10}},
            {"text": "three", "usage": {"input": 1400, "output": 10}},
        )
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.prompt(sid, "one", timeout=10)
            before = usage_updates(conn, sid)[-1]["used"]
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
            # The reminder entered the context: the meter moved, and says so at once.
            await conn.wait_for(lambda: usage_updates(conn, sid)[-1]["used"] > before)
            await conn.prompt(sid, "two", timeout=10)
            await conn.request(
                "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "accept_edits"}
            )
            await conn.prompt(sid, "three", timeout=10)
        bodies = [r.body for r in llm.requests]
        assert len(bodies) == 4
        system_text = json.dumps(prefix_items(bodies[0], dialect)[0])
        assert "read-only" not in system_text  # frozen as the first request had it (manual)
        assert "`read_only`" in json.dumps(bodies[2]) and "`accept_edits`" in json.dumps(bodies[3])

        llm.enqueue({"text": "four", "usage": {"input": 1500, "output": 10}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.prompt(sid, "four", timeout=10)
            # The reminders are ama's notes to the model, not the person's words: replay does not show them.
            replayed = "".join(u["content"].get("text", "") for u in conn.updates_for(sid, "user_message_chunk"))
            assert "one" in replayed and "A note from ama" not in replayed
        bodies = [r.body for r in llm.requests]
        assert len(bodies) == 5
        assert_prefix_kept(bodies, dialect)


async def test_a_mode_change_before_the_first_request_updates_the_prompt_and_the_meter(tmp_path: Path) -> None:
    # No request yet, so no cache to keep: the prompt itself says read-only, and the figure follows it.
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url))
        llm.enqueue({"text": "ok"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: len(usage_updates(conn, sid)) == 1)
            opened = usage_updates(conn, sid)[0]["used"]
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
            await conn.wait_for(lambda: len(usage_updates(conn, sid)) == 2)
            assert usage_updates(conn, sid)[1]["used"] > opened
            assert usage_updates(conn, sid)[1]["_meta"]["ama"]["source"] == "prefix"
            await conn.prompt(sid, "hi", timeout=10)
        system = llm.requests[0].body["messages"][0]["content"]
        assert "read-only" in system
        assert "A note from ama" not in json.dumps(llm.requests[0].body)


async def test_a_thinking_level_change_is_announced(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url))
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            n = kinds(conn, sid).count("config_option_update")
            result = as_object(
                await conn.request(
                    "session/set_config_option", {"sessionId": sid, "configId": "thought_level", "value": "high"}
                )
            )
            await conn.wait_for(lambda: kinds(conn, sid).count("config_option_update") == n + 1)
            update = conn.updates_for(sid, "config_option_update")[-1]
            level = next(o for o in update["configOptions"] if o["id"] == "thought_level")
            assert level["currentValue"] == "high"
            assert update["configOptions"] == result["configOptions"]
            # The same value again changes nothing and announces nothing.
            await conn.request(
                "session/set_config_option", {"sessionId": sid, "configId": "thought_level", "value": "high"}
            )
            await conn.request("session/list", {})
            assert kinds(conn, sid).count("config_option_update") == n + 1


async def test_a_mode_change_during_a_turn_reaches_the_next_request_after_the_tool_results(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("alpha\n")
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, top='mode = "manual"'))
        llm.enqueue(
            {
                "text": "reading " * 10,
                "chunk_size": 8,
                "delay": 0.1,  # ~1 s of streaming: the mode change lands while the reply is still running
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}}],
            },
            {"text": "done"},
        )
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: "agent_message_chunk" in kinds(conn, sid))
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "end_turn"
        first, second = (r.body for r in llm.requests)
        roles = [m["role"] for m in second["messages"]]
        # system, user, assistant (with the call), tool result, then the note: the call kept its result first.
        assert roles == ["system", "user", "assistant", "tool", "user"]
        assert "`read_only`" in json.dumps(second["messages"][-1])
        assert_prefix_kept([first, second], "openai")
