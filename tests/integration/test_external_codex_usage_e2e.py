"""A child that reports usage the way codex-acp does (zed-industries/codex-acp, `thread.rs`: codex's `TokenCount`
event becomes a plain `usage_update` — `used` = the last request's tokens in the context window, `size` = the model's
context window — with no cost, and its prompt response carries no `usage`), read as that child's context figures
and nothing more (issue 42: the seed's codex `tokenUsage` source). Over real pipes: ama as the parent, the child a
real subprocess (tests/support/acp_fixtures/task_agent.py) speaking exactly that shape."""

from __future__ import annotations

import pytest

from tests.integration.test_external_tasks_e2e import external, run_task
from tests.integration.test_tasks_e2e import KEY, stats, task_call
from tests.support.harness import Ama, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

# codex-acp sends one usage_update per TokenCount event: several in a turn, the context going up as it works.
CODEX_SHAPED = "usage 30000 272000\ntool Reading the code\nusage 52000 272000\nsay Done: the parser is fixed."


async def test_a_codex_shaped_childs_usage_is_its_context_and_its_unknowns_stay_unknown(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", CODEX_SHAPED, "Fix the parser", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid, _ = await run_task(conn, ama, CODEX_SHAPED)
            s = await stats(conn, sid)
            [task] = s["tasks"]
            # The latest figure, as a meter reads a usage_update: a state, not a sum of the two.
            assert (task["contextTokens"], task["contextWindow"], task["contextPercent"]) == (52000, 272000, 19.1)
            assert not {"tokens", "cost"} & set(task)  # never reported: unknown, never 0
            assert "cost" not in s  # an unpriced child makes the session's cost unknown
            assert s["external"]["byAgent"] == {
                "ext": {
                    "tasks": 1,
                    "requests": 1,
                    "contextTokens": 52000,
                    "contextWindow": 272000,
                    "contextPercent": 19.1,
                }
            }
            await conn.prompt(sid, "/tasks", timeout=10)
            shown = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert "Fix the parser: completed; tokens not reported; ctx 19% (52,000 / 272,000); cost unknown" in shown


async def test_a_child_reporting_more_than_its_window_reads_as_a_full_window_never_past_it(tmp_path):
    """`used` past `size` (a codex `tokens_in_context_window` over the window, or a hostile child): the figures are
    kept as reported, the percent is capped at 100 as the meter caps its own (U12), and the task is kept for a load."""
    ama = Ama(tmp_path)
    over = "usage 300000 272000\nsay Still here."
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", over, "Overfull", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid, _ = await run_task(conn, ama, over)
            [task] = (await stats(conn, sid))["tasks"]
            assert (task["contextTokens"], task["contextWindow"], task["contextPercent"]) == (300000, 272000, 100.0)
        # Kept beside the session as it was (the journal takes a percent of 0-100: 110.3 was refused, and lost).
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            assert (await stats(conn, sid))["tasks"] == [task]
