"""Skills with the official ACP Python SDK as the editor (issue 40, Done-when), through real pipes: the SDK's
`spawn_agent_process` starts ama behind the tee of test_official_sdk.py, and every line both sides wrote is
checked against the pinned schema when it closes. The skills are listed in the system prompt, counted in the
first `usage_update`, and the `skill` tool's call shows as a read and brings the body into the next request."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_instructions_e2e import system_of
from tests.integration.test_official_sdk import open_session, sdk_ama, step, write_config
from tests.integration.test_skills_e2e import BODY, skill, skill_call
from tests.integration.test_tasks_e2e import tool_messages
from tests.support.harness import Ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


async def test_the_sdk_sees_a_skill_loaded_as_a_read(tmp_path: Path) -> None:
    from acp import text_block

    ama = Ama(tmp_path)
    skill(ama.workspace / ".ama" / "skills", "release", "Cut a release of this project.")
    with LLMServer() as llm:
        write_config(ama, llm, "openai")
        llm.enqueue(skill_call("release"), {"text": "Dry run first."})
        async with sdk_ama(ama, "skills") as (conn, client, _wire, _):
            sid = await open_session(conn, client, ama)
            assert client.of(sid, "usage_update")[0]["used"] > 0
            done = await step(conn.prompt(session_id=sid, prompt=[text_block("release")]), "session/prompt", 15)
            assert done.stop_reason == "end_turn"
            [call] = client.of(sid, "tool_call")
            assert call["kind"] == "read" and call["title"] == "Load skill release"
            first, second = llm.requests[0].body, llm.requests[1].body
            assert "- `release`: Cut a release of this project." in system_of(first)
            assert BODY.strip() in tool_messages(second)[-1][1]
