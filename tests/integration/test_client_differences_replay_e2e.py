"""Issue 25, what real clients tripped over in a replay: message ids (point 9) and a cancelled command (point 6).

Through real pipes: the official ACP Python SDK as the client for the ids (a client that keys its view by
`messageId` must see the ids of the live turn again after session/load), ama's own client (the harness) for
the cancelled command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_official_sdk import (
    FILE_BODY,
    open_session,
    reply_a,
    reply_b,
    run_read_turn,
    sdk_ama,
    step,
    write_config,
)
from tests.support.harness import Ama, local_config, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

_CHUNKS = ("agent_message_chunk", "agent_thought_chunk")


def _ids(updates: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[str]:
    """The distinct message ids of these chunks, in the order they first appear."""
    out: list[str] = []
    for u in updates:
        if u["sessionUpdate"] in kinds and u.get("messageId") not in out:
            out.append(u["messageId"])
    return out


async def test_replayed_messages_keep_their_live_ids(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION
    from acp.schema import ClientCapabilities

    ama = Ama(tmp_path)
    notes = ama.workspace / "notes.txt"
    notes.write_text(FILE_BODY, encoding="utf-8")
    with LLMServer() as server:
        write_config(ama, server, "openai")
        server.enqueue(reply_a(str(notes)), reply_b())
        async with sdk_ama(ama, "live") as (conn, client, _wire, _process):
            sid = await open_session(conn, client, ama)
            assert (await run_read_turn(conn, client, sid, server)).stop_reason == "end_turn"
            live = _ids(client.of(sid), _CHUNKS)

        async with sdk_ama(ama, "load") as (conn, client, wire, _process):
            await step(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()),
                "initialize",
            )
            await step(
                conn.load_session(cwd=str(ama.workspace.resolve()), session_id=sid, mcp_servers=[]), "session/load"
            )
            load_id = next(m["id"] for m in wire.sent if m.get("method") == "session/load")
            replay: list[dict[str, Any]] = []
            for msg in wire.received():  # the replay is what ama wrote before its answer to session/load
                if msg.get("id") == load_id and "method" not in msg:
                    break
                if msg.get("method") == "session/update" and msg["params"]["sessionId"] == sid:
                    replay.append(msg["params"]["update"])

    assert len(live) == 2 and all(i.startswith("m-") for i in live), live  # two replies, each with its own id
    assert _ids(replay, _CHUNKS) == live, "the replay must give each reply the id it had live"
    # The prompt had no id live (the client sent it); the one replay gives it cannot be a live reply's.
    user = _ids(replay, ("user_message_chunk",))
    assert len(user) == 1 and user[0] not in live, user


# --- a cancelled command (point 6) -------------------------------------------------------------------------

KEY = {"LOCAL_TEST_KEY": "k" * 12}
PARTIAL = "partial-output-41"


def _from_ama(conn: AgentProcess) -> list[dict[str, Any]]:
    return [json.loads(e.raw) for e in conn.transcript if e.direction == "in"]


def _texts(update: dict[str, Any]) -> list[str]:
    return [c["content"]["text"] for c in update.get("content") or [] if c.get("type") == "content"]


@pytest.mark.parametrize("editor", [True, False], ids=["editor-terminal", "local"])
async def test_a_cancelled_command_keeps_its_terminal_or_output(tmp_path: Path, editor: bool) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, top='mode = "full_access"'))
        call = {"id": "c1", "name": "run_command", "arguments": {"command": f"echo {PARTIAL}; sleep 30"}}
        llm.enqueue({"tool_calls": [call]})
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=editor, terminal=editor)) as conn:
            await conn.initialize()
            sid = as_object(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))[
                "sessionId"
            ]
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            if editor:

                def terminals() -> list[str]:
                    shows = conn.updates_for(sid, "tool_call_update")
                    return [c["terminalId"] for u in shows for c in u.get("content") or [] if c["type"] == "terminal"]

                await conn.wait_for(lambda: bool(terminals()))
                tid = terminals()[0]
                await conn.wait_for(lambda: PARTIAL in (conn.terminal_output(tid) or ""))
            else:
                await conn.wait_for(
                    lambda: any(u.get("status") == "in_progress" for u in conn.updates_for(sid, "tool_call_update"))
                )
                await anyio.sleep(0.5)  # the echo has run; the sleep is what the cancel cuts short
            await conn.cancel(sid)
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            final = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
            assert len(final) == 1, final
            live = final[0]
            if editor:
                assert {"type": "terminal", "terminalId": tid} in live["content"], live
                assert _texts(live) == ["Cancelled."], live
                # Released, and only after the final update that shows it (ACP: after release the id is invalid).
                assert conn.terminals.unreleased() == []
                wire = _from_ama(conn)
                shown_at = next(
                    i
                    for i, m in enumerate(wire)
                    if m.get("method") == "session/update" and m["params"]["update"].get("status") == "failed"
                )
                released_at = next(
                    i
                    for i, m in enumerate(wire)
                    if m.get("method") == "terminal/release" and m["params"]["terminalId"] == tid
                )
                assert shown_at < released_at
            else:
                [text] = _texts(live)
                assert text.startswith("Cancelled.") and PARTIAL in text, text

        # The file keeps the output and the line; a load replays them (the terminal itself is long gone).
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            replayed = [u for u in conn.updates_for(sid, "tool_call_update") if u.get("status") == "failed"]
            assert len(replayed) == 1, replayed
            [text] = _texts(replayed[0])
            assert text.startswith("Cancelled.") and PARTIAL in text, text
            if not editor:
                assert _texts(replayed[0]) == _texts(live)  # the replay shows what the person saw
