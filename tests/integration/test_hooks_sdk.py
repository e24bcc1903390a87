"""A `pre_tool` hook with the official ACP Python SDK as the editor (issue 40, Done-when): the SDK's
`spawn_agent_process` starts ama behind the tee of test_official_sdk.py, and every line both sides wrote is
checked against the pinned schema when it closes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_hooks_e2e import GUARD, RECORD, command, hook, records, script
from tests.integration.test_official_sdk import open_session, sdk_ama, step, tool_text, write_config
from tests.integration.test_permissions_e2e import tool_message
from tests.support.harness import Ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


async def test_a_pre_tool_hook_blocks_a_command_the_sdk_sees_why(tmp_path: Path) -> None:
    from acp import text_block

    ama = Ama(tmp_path)
    seen = tmp_path / "post.jsonl"
    with LLMServer() as llm:
        write_config(ama, llm, "openai")
        with ama.config.open("a", encoding="utf-8") as f:
            f.write("\n" + hook("pre_tool", script(ama, "guard", GUARD), match="run_command"))
            f.write("\n" + hook("post_tool", script(ama, "rec", RECORD, str(seen))))
        llm.enqueue(command("c1", "touch forbidden.txt"), command("c2", "echo fine"), {"text": "ok"})
        async with sdk_ama(ama, "hooks") as (conn, client, _, _):
            sid = await open_session(conn, client, ama)
            done = await step(conn.prompt(session_id=sid, prompt=[text_block("go")]), "session/prompt", 30)
            assert done.stop_reason == "end_turn"
            final = {u["toolCallId"]: u for u in client.of(sid, "tool_call_update") if u.get("status")}
            assert final["c1"]["status"] == "failed" and final["c2"]["status"] == "completed"
            assert "blocked by the person's pre_tool hook" in tool_text(final["c1"])
            # The hook runs once a call is approved, right before it would run: both were asked.
            assert [r["toolCall"]["toolCallId"] for r in client.permission_requests] == ["c1", "c2"]
    assert not (ama.workspace / "forbidden.txt").exists()
    assert tool_message(llm.requests[1].body, "c1").startswith("forbidden commands are not run here")
    assert [r["tool_input"]["command"] for r in records(seen)] == ["echo fine"]
