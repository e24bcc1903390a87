"""A session's budget over real pipes (`[budget] session_usd`, `/budget N`; docs/configuration.md "Budget"): ama
as the agent, ama's own client as the editor, the local model server with prices. Prices are USD per million
tokens, so 1,000 input tokens at 1.0 cost $0.001."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_cancel_e2e import start
from tests.integration.test_external_tasks_e2e import external, run_task
from tests.integration.test_tasks_e2e import finals, stats, task_call, text_of
from tests.support.harness import Ama, agent_text, clean_env, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "k" * 12}


def configure(ama: Ama, url: str, budget: str | None = "0.01", price: bool = True) -> None:
    table = f"[budget]\nsession_usd = {budget}\n" if budget is not None else ""
    price_line = "price = { input = 1.0, output = 2.0 }\n" if price else ""
    ama.config.write_text(
        f'model = "local/m"\n\n[providers.local]\nkind = "openai"\nbase_url = "{url}"\n'
        f'api_key_env = "LOCAL_TEST_KEY"\nmax_retries = 0\n\n[[models]]\nid = "local/m"\ncontext_window = 100000\n'
        f"{price_line}\n{table}"
    )


def reply(input_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"text": "ok", "usage": {"input": input_tokens, "output": 0}, **extra}


def said_since(conn: AgentProcess, sid: str, start: int) -> str:
    return "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")[start:])


def chunks(conn: AgentProcess, sid: str) -> int:
    return len(conn.updates_for(sid, "agent_message_chunk"))


def budget_notices(conn: AgentProcess, sid: str) -> list[dict[str, Any]]:
    return [n for n in conn.updates_for(sid, "notice") if n["title"].startswith("Budget")]


async def test_told_at_80_percent_stopped_at_the_budget_raised_by_command_and_kept_by_a_load(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)  # $0.01
        list_dir = {"tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]}
        llm.enqueue(reply(5000), reply(4000), {**list_dir, "usage": {"input": 2000, "output": 0}}, reply(1000))
        async with run_ama(ama, env=KEY, options=ClientOptions(notices=True)) as conn:
            sid = await start(conn, ama, mode="full_access")
            await conn.prompt(sid, "one", timeout=15)  # $0.005: 50 %, nothing said
            assert budget_notices(conn, sid) == []
            await conn.prompt(sid, "two", timeout=15)  # $0.009: 90 %, told once
            (notice,) = budget_notices(conn, sid)
            assert notice["severity"] == "warning" and notice["title"] == "Budget nearly spent"
            assert "$0.0090" in notice["description"] and "$0.0100" in notice["description"]
            assert "/budget N" in notice["description"] and "session_usd" in notice["description"]

            # $0.011 after the reply that called a tool: the tool runs, the next request is never sent.
            before = chunks(conn, sid)
            result = await conn.prompt(sid, "three", timeout=15)
            assert result["stopReason"] == "end_turn"
            assert len(llm.requests) == 3
            stop = said_since(conn, sid, before)
            assert "reached its budget of $0.0100" in stop and "$0.0110" in stop
            assert "`/budget N`" in stop and "`[budget] session_usd`" in stop
            assert len(budget_notices(conn, sid)) == 1  # 80 % is told once
            # The meter's cost is the same figure, untouched by the budget.
            assert conn.updates_for(sid, "usage_update")[-1]["cost"]["amount"] == pytest.approx(0.011)

            # A new prompt: no request either.
            before = chunks(conn, sid)
            assert (await conn.prompt(sid, "four", timeout=15))["stopReason"] == "end_turn"
            assert len(llm.requests) == 3 and "reached its budget" in said_since(conn, sid, before)

            # /compact asks the model too: not now.
            before = chunks(conn, sid)
            await conn.prompt(sid, "/compact", timeout=15)
            assert said_since(conn, sid, before).startswith("Not compacted: this session has cost $0.0110")
            assert len(llm.requests) == 3

            # /budget shows it; /budget with a bad figure says so and changes nothing.
            before = chunks(conn, sid)
            await conn.prompt(sid, "/budget", timeout=10)
            shown = said_since(conn, sid, before)
            assert "**Budget:** $0.0100 (from the config)" in shown and "$0.0110" in shown and "reached" in shown
            for bad in ("abc", "-1", "0", "nan"):
                before = chunks(conn, sid)
                await conn.prompt(sid, f"/budget {bad}", timeout=10)
                assert said_since(conn, sid, before).startswith(f"Not a budget: {bad!r}")

            # /budget 0.05 raises it: the session goes on.
            before = chunks(conn, sid)
            await conn.prompt(sid, "/budget 0.05", timeout=10)
            assert "**Budget:** $0.0500 (set with /budget)" in said_since(conn, sid, before)
            assert (await conn.prompt(sid, "five", timeout=15))["stopReason"] == "end_turn"
            assert len(llm.requests) == 4

        # A load keeps the budget the command set.
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: bool(conn.updates_for(sid, "available_commands_update")))
            commands = conn.updates_for(sid, "available_commands_update")[-1]["availableCommands"]
            assert "budget" in {c["name"] for c in commands}
            before = chunks(conn, sid)
            await conn.prompt(sid, "/budget", timeout=10)
            assert "**Budget:** $0.0500 (set with /budget). **Cost so far:** $0.0120 (24 %)." in said_since(
                conn, sid, before
            )


async def test_a_tasks_requests_count_and_are_stopped_by_the_budget(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)  # $0.01
        list_dir = {"tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]}
        llm.enqueue(
            {"tool_calls": [task_call("t1", "List the files.", "List")], "usage": {"input": 1000, "output": 0}},
            {**list_dir, "usage": {"input": 9500, "output": 0}},  # the task's: $0.0105 in all
            reply(100),  # never asked for
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, mode="full_access")
            result = await conn.prompt(sid, "delegate", timeout=20)
            assert result["stopReason"] == "end_turn"
            # The parent's request and the task's first; neither the task's next nor the parent's next.
            assert len(llm.requests) == 2 and llm.pending == 1
            (final,) = [u for u in finals(conn, sid).values() if u["status"] == "failed"]
            assert "The helper agent stopped: this session has cost $0.0105" in text_of(final)
            assert "reached its budget of $0.0100" in agent_text(conn, sid)
            assert (await stats(conn, sid))["cost"]["amount"] == pytest.approx(0.0105)  # the task's billed to it

            # Another task call, once the budget is reached, does not start at all.
            await conn.prompt(sid, "/budget 0.0106", timeout=10)
            llm.clear()
            llm.enqueue(
                {"tool_calls": [task_call("t2", "Again.", "Again")], "usage": {"input": 100, "output": 0}},
                reply(100),
            )
            await conn.prompt(sid, "again", timeout=20)
            assert len(llm.requests) == 3  # the parent's reply; the task did not start, the parent stopped
            failed = [u for u in finals(conn, sid).values() if u["status"] == "failed"]
            assert any("The task did not start: this session has cost $0.0106" in text_of(u) for u in failed)


async def test_an_unpriced_model_says_once_that_the_budget_cannot_be_enforced_and_does_not_block(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, price=False)
        llm.enqueue(reply(50000), reply(50000), reply(50000))
        async with run_ama(ama, env=KEY) as conn:  # no notices capability: agent messages
            sid = await start(conn, ama)
            for n in range(3):
                assert (await conn.prompt(sid, f"turn {n}", timeout=15))["stopReason"] == "end_turn"
            assert len(llm.requests) == 3
            text = agent_text(conn, sid)
            assert text.count("Budget not enforced") == 1
            assert "its $0.0100 budget cannot be enforced" in text
            assert conn.updates_for(sid, "usage_update")[-1]["cost"] is None  # unknown (U17): said as null (P1)


@pytest.mark.parametrize("value", ["-1", "0", '"five"', "nan", "true"])
async def test_a_malformed_budget_is_reported_with_its_file_and_line_and_ignored(tmp_path, value):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, budget=value)
        llm.enqueue(reply(50000))  # $0.05: past any budget of this file, were it applied
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=15))["stopReason"] == "end_turn"
            await conn.prompt(sid, "/budget", timeout=10)
            assert "**Budget:** none." in agent_text(conn, sid)
        lines = ama.config.read_text().split("\n")
        line = next(n for n, text in enumerate(lines, 1) if text.startswith("session_usd"))
        err = ama.stderr.read_text()
        assert f"ama: warning: {ama.config} (at line {line}): [budget] session_usd must be a positive number" in err
        assert "it is ignored" in err


async def test_an_external_agents_reported_cost_counts_toward_the_budget(tmp_path):
    ama = Ama(tmp_path)
    directives = "say Done.\nusage 100 1000 0.05"  # the agent reports $0.05 spent
    with LLMServer() as llm:
        external(ama, llm.openai_url, tail="\n[budget]\nsession_usd = 0.04\n")
        llm.enqueue(
            {"tool_calls": [task_call("t1", directives, "Ask ext", "ext")], "usage": {"input": 1000, "output": 0}},
            reply(100),  # never asked for
        )
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, directives)
            assert finals(conn, sid)[tid]["status"] == "completed"
            assert len(llm.requests) == 1 and llm.pending == 1  # $0.051 of $0.04: the parent's next is not sent
            assert "this session has cost $0.0510, which reached its budget of $0.0400" in agent_text(conn, sid)


def test_print_mode_stopped_by_the_budget_exits_1_with_error_kind_budget(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, budget="0.001")
        list_dir = {"tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]}
        llm.enqueue({**list_dir, "usage": {"input": 2000, "output": 0}}, reply(100))
        out = subprocess.run(
            [sys.executable, "-m", "ama_acp", "-p", "look", "--output-format", "json"]
            + ["--data-dir", str(ama.data), "--config", str(ama.config)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ama.workspace,
            env=clean_env(ama.tmp, KEY),
        )
        assert out.returncode == 1, out.stderr
        result = json.loads(out.stdout)
        assert result["stopReason"] == "end_turn" and result["error"]["kind"] == "budget"
        assert "reached its budget of $0.0010" in result["error"]["message"]
        assert len(llm.requests) == 1
