"""A whole prompt turn through the real `ama --mode acp` subprocess and ama's own client, every line ama
writes validated against the pinned ACP schema (harness.check_transcript)."""

from __future__ import annotations

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from tests.support.harness import Ama, kinds, permission_asks, run_ama, usage_updates, write_script
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

CALC = "def add(a, b):\n    return a - b\n"
TEST = "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"


def demo_workspace(ama: Ama) -> None:
    (ama.workspace / "calc.py").write_text(CALC)
    (ama.workspace / "test_calc.py").write_text(TEST)


async def test_demo_turn_end_to_end(tmp_path):
    """The bundled demo script: read, plan, edit (diff), run the tests, answer; E4 after session/new."""
    ama = Ama(tmp_path)
    demo_workspace(ama)
    async with run_ama(ama, "--model", "scripted/demo", options=ClientOptions(fs=False, terminal=False)) as conn:
        init = as_object(await conn.initialize())
        assert init["protocolVersion"] == 1
        assert init["agentInfo"]["name"] == "ama"
        assert init["agentCapabilities"]["promptCapabilities"] == {"image": True, "embeddedContext": True}
        new = as_object(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        sid = new["sessionId"]
        assert new["modes"]["currentModeId"] == "manual"
        assert [o["category"] for o in new["configOptions"]] == ["model", "thought_level", "mode"]
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        # E4: commands, options, then the meter — all after the response.
        assert kinds(conn, sid) == ["available_commands_update", "config_option_update", "usage_update"]
        opened = usage_updates(conn, sid)[0]
        assert opened["_meta"]["ama"]["source"] == "prefix"  # U10: never 0 when a session opens
        assert opened["used"] > 0 and opened["size"] == 200_000

        result = as_object(await conn.prompt(sid, "The tests fail. Fix calc.py and run the tests.", timeout=30))
        assert result["stopReason"] == "end_turn"
        assert (ama.workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"

        ups = conn.updates_for(sid)
        thoughts = "".join(u["content"]["text"] for u in ups if u["sessionUpdate"] == "agent_thought_chunk")
        assert thoughts.startswith("The person says the tests fail.")
        calls = [u for u in ups if u["sessionUpdate"] == "tool_call"]
        ids = [c["toolCallId"] for c in calls]
        # The scripted model reuses call_1/call_2 in each reply: wire ids stay unique (docs/tools.md). The todo
        # calls (call_1#2, call_1#4) are shown only as the plan, not as tool calls too.
        assert ids == ["call_1", "call_2", "call_2#2", "call_1#3"]
        assert [c["kind"] for c in calls] == ["read", "read", "edit", "execute"]
        assert not [u for u in ups if u.get("toolCallId") in ("call_1#2", "call_1#4")]
        edit_done = [
            u
            for u in ups
            if u["sessionUpdate"] == "tool_call_update"
            and u["toolCallId"] == "call_2#2"
            and u.get("status") == "completed"
        ]
        diff = edit_done[0]["content"][0]
        assert diff["type"] == "diff" and diff["oldText"] == CALC and diff["newText"].endswith("return a + b\n")
        assert edit_done[0]["locations"][0]["line"] == 2  # the first changed line
        plans = [u for u in ups if u["sessionUpdate"] == "plan"]
        assert [e["status"] for e in plans[-1]["entries"]] == ["completed", "completed"]
        # Permission was asked for the edit and the command (manual mode), not for reads.
        asked = [p["toolCall"]["toolCallId"] for p, _ in permission_asks(conn)]
        assert asked == ["call_2#2", "call_1#3"]
        # E1: one usage_update per assistant message (5), no duplicates (D1), then E2 suppressed.
        after_open = usage_updates(conn, sid)[1:]
        assert len(after_open) == 5
        assert all(u["_meta"]["ama"]["source"] == "usage" for u in after_open)
        used = [u["used"] for u in after_open]
        assert used == sorted(used) and len(set(used)) == 5
        assert kinds(conn, sid)[-1] == "session_info_update"
        assert result["usage"]["totalTokens"] >= used[-1]


async def test_cancel_mid_stream_ends_cancelled_and_reports_usage(tmp_path):
    """session/cancel while the model streams: the turn answers `cancelled` quickly (E2 applies too)."""
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "slow.json", [{"text": "x" * 400, "chunk": 4, "delay": 0.05}])
    async with run_ama(ama, "--model", "scripted/slow", env={"AMA_SCRIPT": str(script)}) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        pending = await conn.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        )
        await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) >= 3)
        await conn.cancel(sid)
        result = as_object(await pending.wait(timeout=2))
        assert result["stopReason"] == "cancelled"
        # A usage_update and the session info came before the response (R105/E2).
        assert kinds(conn, sid)[-1] == "session_info_update"
        # The session still works after a cancel.
        second = await conn.prompt(sid, "again", timeout=10)
        assert second["stopReason"] == "end_turn"


async def test_two_sessions_prompt_at_once_and_titles_are_sent_once(tmp_path):
    """Several live sessions in one process; session_info_update carries the title only when it changes."""
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "s.json", [{"text": "a" * 60, "chunk": 6, "delay": 0.01}] * 4)
    async with run_ama(ama, "--model", "scripted/s", env={"AMA_SCRIPT": str(script)}) as conn:
        await conn.initialize()
        sids = [
            session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            for _ in range(2)
        ]
        async with anyio.create_task_group() as tg:
            for i, sid in enumerate(sids):
                tg.start_soon(conn.prompt, sid, f"task number {i}", 20)
        for sid in sids:
            text = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert text == "a" * 60  # no interleaving across sessions
        await conn.prompt(sids[0], "second turn", timeout=20)
        infos = conn.updates_for(sids[0], "session_info_update")
        assert infos[0]["title"] == "task number 0"
        assert "title" not in infos[1] and "updatedAt" in infos[1]
