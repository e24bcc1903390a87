"""The `task` tool over real pipes: ama as the parent, its own tasks on the real local model server, the
editor without `clientCapabilities.subagents` (the task's progress in the task call's content and `_meta`)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_cancel_e2e import dangling, open_calls, start
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object, as_str
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "k" * 12}
PRICE = {"input": 1.0, "output": 2.0}  # USD per million tokens


def configure(ama: Ama, url: str, *, top: str = "", tail: str = "") -> None:
    price = ", ".join(f"{k} = {v}" for k, v in PRICE.items())
    ama.config.write_text(f"""
model = "local/big"
{top}
[providers.local]
kind = "openai"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 0

[[models]]
id = "local/big"
context_window = 100000
price = {{ {price} }}

[[models]]
id = "local/small"
context_window = 4000
price = {{ {price} }}

[[models]]
id = "local/unpriced"
context_window = 100000

[agents.cheap]
model = "local/unpriced"
description = "a model without a price"

[agents.tiny]
model = "local/small"
tools = ["read_file"]
{tail}
""")


def task_call(cid: str, prompt: str, description: str = "", agent: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"prompt": prompt, "description": description}
    if agent is not None:
        args["agent"] = agent
    return {"id": cid, "name": "task", "arguments": args}


def finals(conn: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    return {
        u["toolCallId"]: u
        for u in conn.updates_for(sid, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    }


def text_of(update: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in update.get("content") or [] if c.get("type") == "content")


def tool_messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m.get("role") == "tool"]


def task_id(conn: AgentProcess, sid: str) -> str:
    return as_str(next(u["toolCallId"] for u in conn.updates_for(sid, "tool_call") if u["title"].startswith("Task")))


async def stats(conn: AgentProcess, sid: str) -> dict[str, Any]:
    result = await conn.request("_ama/session_stats", {"sessionId": sid})
    assert isinstance(result, dict)
    return result


async def test_a_task_reads_a_file_answers_and_is_billed_to_the_parent_but_not_its_context(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("the secret word is heron\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {
                "tool_calls": [task_call("t1", "What does notes.txt say?", "Read notes", "explore")],
                "usage": {"input": 1000, "output": 50},
            },
            {
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
                "usage": {"input": 40000, "output": 30},
            },
            {"text": "It says the secret word is heron.", "usage": {"input": 41000, "output": 40}},
            {"text": "The word is heron.", "usage": {"input": 1200, "output": 20}},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "ask a helper", timeout=20)
            assert result["stopReason"] == "end_turn"
            tid = task_id(conn, sid)
            final = finals(conn, sid)[tid]
            assert final["status"] == "completed" and "heron" in text_of(final)

            # The task: a fresh context (its prompt only), a helper's system prompt, the explore agent's tools.
            task_first, task_second, parent_last = (r.body for r in llm.requests[1:4])
            assert [m["role"] for m in task_first["messages"]] == ["system", "user"]
            assert "helper agent" in task_first["messages"][0]["content"]
            names = {t["function"]["name"] for t in task_first["tools"]}
            assert names == {"read_file", "list_dir", "find_files", "search"}
            assert "heron" in tool_messages(task_second)[0][1]
            # The parent's conversation holds the task call and its result, nothing of the task's own.
            assert tool_messages(parent_last) == [("t1", "It says the secret word is heron.")]
            assert "read_file" not in str(parent_last["messages"])

            # Progress in the task call: the task's tool call as a line, its figures in `_meta.ama.task`.
            progress = [u for u in conn.updates_for(sid, "tool_call_update") if u["toolCallId"] == tid and "_meta" in u]
            assert any("Read notes.txt" in text_of(u) for u in progress)
            figures = progress[-1]["_meta"]["ama"]["task"]
            assert figures["agent"] == "explore" and figures["contextWindow"] == 100000

            # The parent's meter never moved with the task's 41,000-token context.
            used = [u["used"] for u in conn.updates_for(sid, "usage_update")]
            assert used and max(used) < 5000

            s = await stats(conn, sid)
            [task] = s["tasks"]
            assert task["agent"] == "explore" and task["description"] == "Read notes"
            assert task["status"] == "completed" and task["requests"] == 2
            assert task["tokens"] == 40000 + 30 + 41000 + 40
            assert task["contextTokens"] >= 41000 and s["contextTokens"] < 5000
            task_cost = ((40000 + 41000) * 1.0 + (30 + 40) * 2.0) / 1e6
            parent_cost = ((1000 + 1200) * 1.0 + (50 + 20) * 2.0) / 1e6
            assert task["cost"]["amount"] == pytest.approx(task_cost)
            assert s["cost"]["amount"] == pytest.approx(task_cost + parent_cost)
            assert s["billed"]["requests"] == 4

            await conn.prompt(sid, "/tasks", timeout=10)
            shown = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert "`explore` — Read notes: completed" in shown

        # A load replays the task call and its result, and keeps the cost with the tasks' part.
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            assert any(
                u["toolCallId"] == "t1" or u["title"].startswith("Task (explore)")
                for u in conn.updates_for(sid, "tool_call")
            )
            replayed = finals(conn, sid)
            assert any("heron" in text_of(u) for u in replayed.values())
            s = await stats(conn, sid)
            assert s["cost"]["amount"] == pytest.approx(task_cost + parent_cost)


async def test_a_task_on_a_model_without_a_price_makes_the_session_cost_unknown(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Say hi.", "Greet", "cheap")]},
            {"text": "hi"},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert llm.requests[1].body["model"] == "unpriced"
            s = await stats(conn, sid)
            assert "cost" not in s and "cost" not in s["tasks"][0]
            assert s["tasks"][0]["status"] == "completed"


@pytest.mark.parametrize("parallel", [1, 2])
async def test_task_calls_of_one_response_run_side_by_side_up_to_max_parallel(tmp_path, parallel):
    ama = Ama(tmp_path)
    slow = {"chunk_size": 2, "delay": 0.06}  # ~0.9 s a reply: 30 characters in 15 events
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail=f"[tasks]\nmax_parallel = {parallel}\n")
        llm.enqueue(
            {"tool_calls": [task_call("t1", "first"), task_call("t2", "second")]},
            {"text": "a" * 30, **slow},
            {"text": "b" * 30, **slow},
            {"text": "both done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, mode="full_access")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            first, second = llm.requests[1].time, llm.requests[2].time
            if parallel == 2:
                assert second - first < 0.5  # the second task did not wait for the first
            else:
                assert second - first >= 0.8  # it waited for the first task's whole reply
            # The results enter the parent's conversation in call order, whichever task finished first.
            results = tool_messages(llm.requests[3].body)
            assert [cid for cid, _ in results] == ["t1", "t2"]
            assert sorted(text for _, text in results) == ["a" * 30, "b" * 30]


async def test_cancelling_the_parent_cancels_the_task_and_every_call_is_closed(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "wait forever", "Hang")]}, {"hang": 10})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(llm.requests) >= 2, timeout=10)
            await conn.notify("session/cancel", {"sessionId": sid})
            result = as_object(await pending.wait(timeout=10))
            assert result["stopReason"] == "cancelled"
            assert open_calls(conn, sid) == []
            assert (await stats(conn, sid))["tasks"][0]["status"] == "cancelled"
            llm.enqueue({"text": "next turn works"})
            assert (await conn.prompt(sid, "again", timeout=15))["stopReason"] == "end_turn"
            assert dangling(llm.requests[-1].body) == []


async def test_a_task_that_hangs_past_the_timeout_fails_its_call_with_the_reason(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail="[tasks]\ntimeout = 1\n")
        llm.enqueue({"tool_calls": [task_call("t1", "wait")]}, {"hang": 10}, {"text": "it timed out"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            final = finals(conn, sid)[task_id(conn, sid)]
            assert final["status"] == "failed" and "did not finish within 1 s" in text_of(final)
            assert "did not finish within 1 s" in tool_messages(llm.requests[-1].body)[0][1]
            assert (await stats(conn, sid))["tasks"][0]["status"] == "failed"


async def test_a_tasks_edit_asks_the_editor_under_the_parents_mode(tmp_path):
    ama = Ama(tmp_path)
    asked: list[dict[str, Any]] = []

    async def allow(params: dict[str, Any]) -> Any:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Write out.txt", "Write a file")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
            {"text": "wrote out.txt"},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            conn.set_handler("session/request_permission", allow)
            sid = await start(conn, ama)  # manual: every edit asks
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            tid = task_id(conn, sid)
            [request] = asked
            assert request["sessionId"] == sid
            assert request["toolCall"]["toolCallId"].startswith(tid + ".")
            assert "out.txt" in request["toolCall"]["title"]
            assert (ama.workspace / "out.txt").read_text() == "x\n"
            assert finals(conn, sid)[tid]["status"] == "completed"


async def test_a_task_on_a_small_window_gets_a_big_result_cut_to_its_own_window(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "big.txt").write_text("".join(f"line {i} of a long file\n" for i in range(5000)))
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Read big.txt", "Big read", "tiny")]},
            {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "big.txt"}}]},
            {"text": "it is long"},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            task_tools = {t["function"]["name"] for t in llm.requests[1].body["tools"]}
            assert task_tools == {"read_file"}
            [(_, seen)] = tool_messages(llm.requests[2].body)
            assert len(seen) < 4000 * 4  # the 4,000-token window of the task's model, not the parent's 100,000
            assert "line 0 of a long file" in seen


async def test_a_model_switch_of_the_parent_does_not_move_a_running_task(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "two steps")]},
            {"tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "."}}], "delay": 0.05},
            {"text": "listed"},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, mode="full_access")
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(llm.requests) >= 2, timeout=10)
            await conn.request(
                "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/small"}
            )
            assert as_object(await pending.wait(timeout=20))["stopReason"] == "end_turn"
            models = [r.body["model"] for r in llm.requests]
            assert models == ["big", "big", "big", "small"]  # the task kept its model; the parent's next is new


async def test_a_tasks_permission_request_open_at_the_parents_cancel_is_answered_cancelled(tmp_path):
    ama = Ama(tmp_path)
    asked: list[dict[str, Any]] = []

    async def never(params: dict[str, Any]) -> Any:
        asked.append(params)
        await anyio.sleep_forever()  # the person never answers; the cancel closes the dialog

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Write out.txt", "Write a file")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=never)) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: bool(asked), timeout=10)
            await conn.cancel(sid)  # session/cancel, and the open dialog answered `cancelled`, as an editor must
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            assert [outcome for _, outcome in conn.permission_log] == [{"outcome": "cancelled"}]
            assert not (ama.workspace / "out.txt").exists()
            assert open_calls(conn, sid) == []
            assert (await stats(conn, sid))["tasks"][0]["status"] == "cancelled"


async def test_closing_the_session_mid_task_ends_the_task(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "wait forever", "Hang")]}, {"hang": 10})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(llm.requests) >= 2, timeout=10)
            with anyio.fail_after(10):  # the close does not wait for the hung task's model
                await conn.request("session/close", {"sessionId": sid})
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            assert open_calls(conn, sid) == []
        # The stored conversation pairs the task call with a result: a load's next request is valid.
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            llm.enqueue({"text": "still usable"})
            assert (await conn.prompt(sid, "again", timeout=15))["stopReason"] == "end_turn"
            assert dangling(llm.requests[-1].body) == []
