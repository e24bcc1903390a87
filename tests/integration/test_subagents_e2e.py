"""Tasks as sessions of their own (issue 28 point 3): ama as the parent on the real local model
server, ama's client as the editor advertising `clientCapabilities.subagents`. Every line ama writes is checked
against the pinned unstable schema by the harness (`subagent_update`, and updates under a task's session id)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_cancel_e2e import open_calls, start
from tests.integration.test_tasks_e2e import KEY, configure, finals, stats, task_call, task_id, text_of, tool_messages
from tests.support.harness import Ama, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

SUBAGENTS = ClientOptions(extra_capabilities={"subagents": {}})
NO_WINDOW = '\n[[models]]\nid = "local/blind"\n\n[agents.blind]\nmodel = "local/blind"\n'


def written(conn: AgentProcess) -> list[dict[str, Any]]:
    """Everything ama wrote, in order."""
    return [json.loads(e.raw) for e in conn.transcript if e.direction == "in"]


def subagent_updates(conn: AgentProcess, sid: str) -> list[dict[str, Any]]:
    return conn.updates_for(sid, "subagent_update")


def announced_first(conn: AgentProcess, parent: str, task_sid: str) -> None:
    """The schema's order: the task is announced on the parent before any message carrying its id."""
    seen = False
    for msg in written(conn):
        params = msg.get("params") or {}
        update = params.get("update") or {}
        if params.get("sessionId") == parent and update.get("sessionUpdate") == "subagent_update":
            seen = seen or update["sessionId"] == task_sid
        elif params.get("sessionId") == task_sid:
            assert seen, f"{msg.get('method')} under {task_sid} before its announcement"


async def test_the_task_is_announced_then_its_updates_flow_under_its_own_id_and_it_ends_idle(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("the secret word is heron\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {
                "text": "Let me ask. ",
                "tool_calls": [task_call("t1", "What does notes.txt say?\nBe brief.", "Read notes", "explore")],
            },
            {
                "text": "Reading.",
                "tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
                "usage": {"input": 40000, "output": 30},
            },
            {"text": "It says heron.", "usage": {"input": 41000, "output": 40}},
            {"text": "The word is heron.", "usage": {"input": 1200, "output": 20}},
        )
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "ask a helper", timeout=20))["stopReason"] == "end_turn"
            tid = task_id(conn, sid)
            first, *_, last = subagent_updates(conn, sid)
            task_sid = first["sessionId"]
            assert task_sid == f"{sid}.task-1"
            assert first["title"] == "Read notes" and first["description"] == "What does notes.txt say?"
            assert first["state"] == {"state": "running"} and first["cwd"] == str(ama.workspace)
            announced_first(conn, sid, task_sid)

            # The task's own conversation under its id: its prompt, its text, its tool call, its meter.
            kinds = [u["sessionUpdate"] for u in conn.updates_for(task_sid)]
            assert kinds[0] == "user_message_chunk" and "notes.txt" in conn.updates_for(task_sid)[0]["content"]["text"]
            [call] = conn.updates_for(task_sid, "tool_call")
            assert call["toolCallId"] == f"{tid}.1" and call["title"].startswith("Read")
            assert open_calls(conn, task_sid) == []
            said = "".join(u["content"]["text"] for u in conn.updates_for(task_sid, "agent_message_chunk"))
            assert said == "Reading.It says heron."
            meters = conn.updates_for(task_sid, "usage_update")
            assert [m["size"] for m in meters] == [100000] * len(meters) and meters[-1]["used"] >= 41000
            assert all(a != b for a, b in zip(meters, meters[1:], strict=False))  # deduplicated (D1)
            assert meters[-1]["cost"]["amount"] == pytest.approx((81000 * 1.0 + 70 * 2.0) / 1e6)

            # It ends idle with its stop reason and its billed tokens; the parent's call ends with the answer.
            assert last["sessionId"] == task_sid and set(last) == {"sessionUpdate", "sessionId", "state"}
            state = last["state"]
            assert state["state"] == "idle" and state["stopReason"] == "end_turn"
            usage = state["usage"]  # the task's billed tokens, as the model server reported them
            assert (usage["totalTokens"], usage["inputTokens"], usage["outputTokens"]) == (81070, 81000, 70)
            final = finals(conn, sid)[tid]
            assert final["status"] == "completed" and text_of(final) == "It says heron."
            ends = [i for i, m in enumerate(written(conn)) if m.get("params", {}).get("update") == last]
            answer = next(
                i
                for i, m in enumerate(written(conn))
                if m.get("params", {}).get("update", {}).get("status") == "completed"
                and m["params"]["update"].get("toolCallId") == tid
            )
            assert ends[0] < answer  # the task's last state before the task call's result
            # The task call carries the task's figures and session id, not its lines.
            task_updates = [u for u in conn.updates_for(sid, "tool_call_update") if u["toolCallId"] == tid]
            assert all(not text_of(u) for u in task_updates if u.get("status") is None)
            assert task_updates[-2]["_meta"]["ama"]["task"]["sessionId"] == task_sid
            # The parent's meter and conversation never held the task's.
            assert max(u["used"] for u in conn.updates_for(sid, "usage_update")) < 5000
            assert tool_messages(llm.requests[3].body) == [("t1", "It says heron.")]
            [record] = (await stats(conn, sid))["tasks"]
            assert record["sessionId"] == task_sid and record["status"] == "completed"

        # A load replays the parent's task call and result; the tasks' sessions are not stored, so not replayed.
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            assert any("heron" in text_of(u) for u in finals(conn, sid).values())
            assert subagent_updates(conn, sid) == [] and conn.updates_for(task_sid) == []


async def test_a_task_without_a_known_window_sends_no_usage_update_of_its_own(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail=NO_WINDOW)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Say hi.", "Greet", "blind")]},
            {"text": "hi", "usage": {"input": 10, "output": 1}},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            task_sid = subagent_updates(conn, sid)[0]["sessionId"]
            assert conn.updates_for(task_sid, "agent_message_chunk")
            assert conn.updates_for(task_sid, "usage_update") == []  # D3: unknown window, no figure
            assert subagent_updates(conn, sid)[-1]["state"]["stopReason"] == "end_turn"


async def test_cancelling_the_parent_ends_the_announced_task_cancelled(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "wait forever", "Hang")]}, {"hang": 10})
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(llm.requests) >= 2, timeout=10)
            await conn.notify("session/cancel", {"sessionId": sid})
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            states = [u.get("state") for u in subagent_updates(conn, sid)]
            assert states == [{"state": "running"}, {"state": "idle", "stopReason": "cancelled"}]
            assert open_calls(conn, sid) == []
            assert (await stats(conn, sid))["tasks"][0]["status"] == "cancelled"


async def test_a_task_past_the_timeout_ends_with_an_error_state_saying_why(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail="[tasks]\ntimeout = 1\n")
        llm.enqueue({"tool_calls": [task_call("t1", "wait")]}, {"hang": 10}, {"text": "it timed out"})
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            last = subagent_updates(conn, sid)[-1]["state"]
            assert last["state"] == "idle" and last["stopReason"] == "error"
            assert last["error"]["code"] == -32603 and "did not finish within 1 s" in last["error"]["message"]
            assert finals(conn, sid)[task_id(conn, sid)]["status"] == "failed"


async def test_a_tasks_permission_request_names_the_task_session_and_its_announced_call(tmp_path):
    ama = Ama(tmp_path)
    asked: list[dict[str, Any]] = []

    async def allow(params: dict[str, Any]) -> Any:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        write = {"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Write out.txt twice", "Write a file")]},
            {"tool_calls": [{"id": "w1", **write}]},
            {"tool_calls": [{"id": "w2", **write}]},
            {"text": "wrote out.txt"},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            conn.set_handler("session/request_permission", allow)
            sid = await start(conn, ama)  # manual: every edit asks
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            task_sid = subagent_updates(conn, sid)[0]["sessionId"]
            [request] = asked  # the "always" answer given in the task's name holds for its second edit
            assert request["sessionId"] == task_sid
            first_call = conn.updates_for(task_sid, "tool_call")[0]["toolCallId"]
            assert request["toolCall"]["toolCallId"] == first_call
            order = written(conn)
            announced = next(
                i for i, m in enumerate(order) if m.get("params", {}).get("update", {}).get("toolCallId") == first_call
            )
            assert announced < next(i for i, m in enumerate(order) if m.get("method") == "session/request_permission")
            assert (ama.workspace / "out.txt").read_text() == "x\n"


async def test_a_task_whose_permission_is_open_at_the_parents_cancel_ends_cancelled(tmp_path):
    ama = Ama(tmp_path)
    asked: list[dict[str, Any]] = []

    async def never(params: dict[str, Any]) -> Any:
        asked.append(params)
        await anyio.sleep_forever()

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Write out.txt", "Write a file")]},
            {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        )
        options = ClientOptions(permission=never, extra_capabilities={"subagents": {}})
        async with run_ama(ama, env=KEY, options=options) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: bool(asked), timeout=10)
            await conn.cancel(sid)  # the open dialog answered `cancelled`, as an editor must
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            task_sid = asked[0]["sessionId"]
            assert task_sid == f"{sid}.task-1"
            assert open_calls(conn, task_sid) == [] and open_calls(conn, sid) == []
            assert subagent_updates(conn, sid)[-1]["state"] == {"state": "idle", "stopReason": "cancelled"}
            assert not (ama.workspace / "out.txt").exists()


@pytest.mark.parametrize("advertised", [None, True, "yes"])
async def test_without_the_capability_the_task_stays_inside_the_task_call(tmp_path, advertised):
    """Omitted, or malformed (the schema reads it as not advertised, and initialize still succeeds)."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "List the folder.", "List")]},
            {"tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {"path": "."}}]},
            {"text": "listed"},
            {"text": "done"},
        )
        extra = {} if advertised is None else {"subagents": advertised}
        async with run_ama(ama, env=KEY, options=ClientOptions(extra_capabilities=extra)) as conn:
            sid = await start(conn, ama, mode="full_access")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert subagent_updates(conn, sid) == []
            assert {m["params"]["sessionId"] for m in written(conn) if m.get("method") == "session/update"} == {sid}
            tid = task_id(conn, sid)
            lines = [text_of(u) for u in conn.updates_for(sid, "tool_call_update") if u["toolCallId"] == tid]
            assert any("List" in t for t in lines)
            # The task still has its id (shown by /tasks and the stats), and a load opens its history later.
            task_sid = f"{sid}.task-1"
            assert (await stats(conn, sid))["tasks"][0]["sessionId"] == task_sid
            await conn.request("session/load", {"sessionId": task_sid, "cwd": str(ama.workspace), "mcpServers": []})
            told = [u["content"]["text"] for u in conn.updates_for(task_sid, "user_message_chunk")]
            assert told == ["List the folder."]


async def test_closing_the_session_mid_task_ends_the_announced_task_and_the_session_still_loads(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "wait forever", "Hang")]}, {"hang": 10})
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(llm.requests) >= 2, timeout=10)
            with anyio.fail_after(10):
                await conn.request("session/close", {"sessionId": sid})
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            assert subagent_updates(conn, sid)[-1]["state"] == {"state": "idle", "stopReason": "cancelled"}
            assert open_calls(conn, sid) == []
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            llm.enqueue({"text": "still usable"})
            assert (await conn.prompt(sid, "again", timeout=15))["stopReason"] == "end_turn"
            assert subagent_updates(conn, sid) == []


async def test_side_by_side_tasks_are_two_sessions_each_announced_before_its_traffic(tmp_path):
    ama = Ama(tmp_path)
    slow = {"chunk_size": 2, "delay": 0.02}
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail="[tasks]\nmax_parallel = 2\n")
        llm.enqueue(
            {"tool_calls": [task_call("t1", "first", "One"), task_call("t2", "second", "Two")]},
            {"text": "a" * 20, **slow},
            {"text": "b" * 20, **slow},
            {"text": "both done"},
        )
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama, mode="full_access")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            task_sids = {u["sessionId"]: u["title"] for u in subagent_updates(conn, sid) if "title" in u}
            assert task_sids == {f"{sid}.task-1": "One", f"{sid}.task-2": "Two"}
            for task_sid in task_sids:
                announced_first(conn, sid, task_sid)
                said = "".join(u["content"]["text"] for u in conn.updates_for(task_sid, "agent_message_chunk"))
                assert said in ("a" * 20, "b" * 20)
            ends = [u for u in subagent_updates(conn, sid) if u.get("state", {}).get("state") == "idle"]
            assert sorted(u["sessionId"] for u in ends) == sorted(task_sids)
