"""Everything ama says is a message with an id, and a replay gives it the same id (issue 41 point 4;
docs/sessions.md "Replay"): a slash command's reply went out live with no `messageId` and came back after
`session/load` as a made-up `r<n>`, so a client that pairs messages by id could not.

Through real pipes: a real `ama --mode acp` subprocess driven by ama's own client, and by the official SDK
client; every line ama writes is validated against the pinned schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, kinds, run_ama
from tests.support.json_values import session_id

pytestmark = pytest.mark.anyio


def said(updates: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    return [
        u for u in updates if u["sessionUpdate"] == "agent_message_chunk" and marker in u["content"].get("text", "")
    ]


async def test_a_commands_reply_has_an_id_live_and_the_same_one_after_a_load(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    async with run_ama(ama, process=True) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        await conn.prompt(sid, "/context", timeout=15)
        await conn.prompt(sid, "/context", timeout=15)
        live = [u.get("messageId") for u in said(conn.updates_for(sid), "**Context:**")]
    assert len(live) == 2 and all(isinstance(i, str) and i.startswith("m-") for i in live), live
    assert live[0] != live[1]  # two replies, two messages (R117)
    async with run_ama(ama, process=True) as conn:
        await conn.initialize()
        await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        replayed = [u.get("messageId") for u in said(conn.updates_for(sid), "**Context:**")]
    assert replayed == live


async def test_the_official_sdk_client_pairs_a_commands_reply_by_id_across_a_load(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, text_block
    from acp.schema import ClientCapabilities

    from tests.integration.test_official_sdk import open_session, sdk_ama, step, write_config
    from tests.support.llm_server import LLMServer

    ama = Ama(tmp_path)
    with LLMServer() as llm:
        write_config(ama, llm, "openai")
        async with sdk_ama(ama, "live") as (conn, client, _wire, _process):
            sid = await open_session(conn, client, ama)
            await step(conn.prompt(session_id=sid, prompt=[text_block("/context")]), "/context")
            await client.wait_for(lambda: said(client.of(sid), "**Context:**"), "the reply to /context")
            (live,) = {u.get("messageId") for u in said(client.of(sid), "**Context:**")}
        async with sdk_ama(ama, "load") as (conn, client, _wire, _process):
            await step(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()),
                "initialize",
            )
            await step(
                conn.load_session(cwd=str(ama.workspace.resolve()), session_id=sid, mcp_servers=[]), "session/load"
            )
            await client.wait_for(lambda: said(client.of(sid), "**Context:**"), "the replayed reply")
            (replayed,) = {u.get("messageId") for u in said(client.of(sid), "**Context:**")}
    assert isinstance(live, str) and live.startswith("m-") and replayed == live
