"""session/fork driven by the official ACP Python SDK's client (its unstable `fork_session`), against the real
`ama --mode acp` behind the tee of test_official_sdk.py: the SDK parses ama's ForkSessionResponse, the fork's
first usage_update is the original's, and a prompt in the fork carries the original's thread to the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_official_sdk import sdk_ama, step, write_config
from tests.support.harness import Ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


async def test_fork_through_official_sdk(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION, text_block
    from acp.schema import ClientCapabilities, Implementation

    ama = Ama(tmp_path)
    cwd = str(ama.workspace.resolve())
    with LLMServer() as server:
        write_config(ama, server, "openai")
        server.enqueue(
            {"text": "SDK-ANSWER", "usage": {"input": 1200, "output": 30}},
            {"text": "SDK-FORK-ANSWER", "usage": {"input": 1300, "output": 5}},
        )
        async with sdk_ama(ama, "fork") as (conn, client, _wire, _process):
            init = await step(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="acp-python-sdk-test", version="0"),
                ),
                "initialize",
            )
            caps = init.agent_capabilities.session_capabilities
            assert caps is not None and caps.fork is not None
            sid = (await step(conn.new_session(cwd=cwd, mcp_servers=[]), "session/new")).session_id
            await client.wait_for(lambda: client.of(sid, "usage_update"), "the usage_update after session/new")
            await step(conn.prompt(session_id=sid, prompt=[text_block("SDK-QUESTION")]), "session/prompt")
            before = client.of(sid, "usage_update")[-1]

            forked = await step(conn.fork_session(session_id=sid, cwd=cwd, mcp_servers=[]), "session/fork")
            fid = forked.session_id
            assert fid and fid != sid
            assert forked.modes is not None and forked.config_options
            first = await client.wait_for(lambda: client.of(fid, "usage_update"), "the fork's usage_update")
            assert (first[0]["used"], first[0]["size"]) == (before["used"], before["size"])

            result = await step(conn.prompt(session_id=fid, prompt=[text_block("SDK-FORK-QUESTION")]), "fork prompt")
            assert result.stop_reason == "end_turn"
        body = json.dumps(server.requests[1].body["messages"])
        assert "SDK-QUESTION" in body and "SDK-ANSWER" in body and "SDK-FORK-QUESTION" in body
