"""Seed 003's handoff over real pipes (issue 29 point 3; docs/sessions.md "Compaction"): the request the model
server receives asks for nine sections with completeness and no budget where the window forces none; the second
compaction's request carries the previous handoff and asks to carry it over; after a switch to a model with an
8K window the window forces a budget, and the request states it; a reload rebuilds the very context message the
live session sent. Every line ama writes is validated against the pinned schema by the harness."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from tests.support.harness import Ama, kinds, local_config, run_ama
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def configure(ama: Ama, url: str) -> None:
    tail = '[[models]]\nid = "local/small"\ncontext_window = 8192\n[compaction]\nkeep_tokens = 0\n'
    ama.config.write_text(local_config(url, window=100_000, tail=tail))


def handoff_prompt(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def first_user(body: dict[str, Any]) -> str:
    return json.dumps(next(m for m in body["messages"] if m["role"] == "user"), ensure_ascii=False)


async def test_nine_sections_the_previous_handoff_carried_and_a_budget_only_where_the_window_forces_one(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "ok", "usage": {"input": 60_000, "output": 10}},
            {"text": "## 1. Goal\nrefactor HANDOFF-ONE\n## 8. Files\n- `calc.py` — the target", "usage": {"input": 9}},
            {"text": "ok", "usage": {"input": 60_000, "output": 10}},
            {"text": "## 1. Goal\nHANDOFF-TWO", "usage": {"input": 9, "output": 9}},
            {"text": "ok", "usage": {"input": 8_000, "output": 10}},
            {"text": "## 1. Goal\nHANDOFF-THREE", "usage": {"input": 9, "output": 9}},
            {"text": "ok", "usage": {"input": 3_000, "output": 10}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True)) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            await conn.prompt(sid, "Please refactor calc.py", timeout=15)
            await conn.prompt(sid, "/compact", timeout=15)
            await conn.prompt(sid, "next", timeout=15)
            await conn.prompt(sid, "/compact", timeout=15)
            await conn.prompt(sid, "long " * 3_000, timeout=15)
            # A switch to the 8K model: the window now forces a budget on the handoff.
            await conn.request(
                "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/small"}
            )
            await conn.prompt(sid, "/compact", timeout=15)
            await conn.prompt(sid, "after", timeout=15)
            statuses = [u["status"] for u in conn.updates_for(sid, "compaction_update")]
            assert statuses == ["in_progress", "completed"] * 3, statuses
        live_after = llm.requests[6].body

        first, second, third = (handoff_prompt(llm.requests[i].body) for i in (1, 3, 5))
        # The first: nine sections, complete rather than brief, no budget (the 100K window forces none).
        assert "with these nine sections:" in first and "\n9. Anything else" in first
        assert "the path in backticks, then the reason to re-read it" in first
        assert "Be complete rather than brief: the whole handoff goes back into the context" in first
        assert "characters of the handoff" not in first
        assert "No MCP servers are connected to this session." in first
        assert "compacted before" not in first
        # The second carries the first over: named in the prompt, and it opens the request's conversation.
        path = ama.data / "sessions" / sid / "compaction-1" / "handoff.md"
        assert f"the previous handoff opens it (its full text: {path})" in second, second[:2000]
        assert "HANDOFF-ONE" in first_user(llm.requests[3].body)
        # The third, on the 8K window: a budget, said to come from the window.
        assert "this model's context window leaves room for about " in third
        assert "compaction-2" in third and "HANDOFF-TWO" in first_user(llm.requests[5].body)

        # A reload rebuilds the context message the live session sent after the third compaction.
        llm.enqueue({"text": "resumed", "usage": {"input": 3_100, "output": 5}})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            await conn.prompt(sid, "again", timeout=15)
        reloaded = llm.requests[7].body
        assert "HANDOFF-THREE" in first_user(live_after)
        assert reloaded["messages"][:3] == live_after["messages"][:3]  # system, the context message, "after"


async def test_with_an_mcp_server_the_handoff_request_names_it_and_the_boot_cost_counts_it(tmp_path):
    """MCP servers present: the request names them for the environment section, and the first tier notice's
    boot cost has their declarations as a part of their own."""
    from tests.integration.test_mcp_failures_e2e import stdio, wait_ready

    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"text": "ok", "usage": {"input": 60_000, "output": 10}},
            {"text": "## 1. Goal\nHANDOFF-MCP", "usage": {"input": 9, "output": 9}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(compaction=True, notices=True)) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(ama.workspace, [stdio("notes", notes)], timeout=10))
            await wait_ready(conn, sid, "notes")
            await conn.prompt(sid, "Use the notes server", timeout=15)
            (high,) = conn.updates_for(sid, "notice")
            assert high["title"] == "Context high" and " · MCP notes " in high["description"], high
            await conn.prompt(sid, "/compact", timeout=15)
            assert [u["status"] for u in conn.updates_for(sid, "compaction_update")] == ["in_progress", "completed"]
        prompt = handoff_prompt(llm.requests[1].body)
        assert "MCP servers connected to this session: `notes`." in prompt
        assert "No MCP servers" not in prompt
