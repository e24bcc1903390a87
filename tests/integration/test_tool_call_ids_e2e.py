"""`toolCallId` is unique across a session's whole history (docs/tools.md "Tool call ids"): a provider id
used before, an id already shaped like one of ama's renames (`dup#2`), and ids after a reload never repeat a
card the editor already has — live, in the replay, and in the next turn after the load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, local_config, run_ama
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def read(call_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "read_file", "arguments": {"path": "a.txt"}}]}


def card_ids(updates: list[dict[str, Any]]) -> list[str]:
    return [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]


async def test_ids_never_repeat_live_in_replay_and_after_load(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "a.txt").write_text("alpha\n")
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url))
        # The provider repeats `dup`, then sends an id that looks like ama's rename of the second `dup`.
        llm.enqueue(read("dup"), read("dup"), {"text": "one"}, read("dup#2"), {"text": "two"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.prompt(sid, "first", timeout=10)
            await conn.prompt(sid, "second", timeout=10)
            live = card_ids(conn.updates_for(sid))
        assert len(live) == 3 and len(set(live)) == 3, live
        # The model still sees its own ids: every result answers the call it was made for.
        last = llm.requests[-1].body["messages"]
        answered = [m["tool_call_id"] for m in last if m.get("role") == "tool"]
        assert answered == ["dup", "dup", "dup#2"]

        llm.enqueue(read("dup"), {"text": "three"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            replayed = card_ids(conn.updates_for(sid))
            assert replayed == live  # the editor rebuilds the same cards, each once
            await conn.prompt(sid, "third", timeout=10)
            after = card_ids(conn.updates_for(sid))[len(replayed) :]
        assert len(after) == 1 and after[0] not in live, (live, after)
