"""Plan mode (docs/tools.md "Plan mode") over real pipes: offered as a mode, reads run and writes and commands are
refused without asking, the plan goes out, a switch keeps it in the conversation, and `exit_plan_mode` asks the
person and switches (or not). Every line ama writes is checked against the pinned schema (run_ama)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.handlers import RpcError
from tests.integration.test_cancel_e2e import KEY, configure, dangling, open_calls, prompt, start
from tests.integration.test_permissions_e2e import final_text, finals, tool_message
from tests.support.harness import Ama, clean_env, local_config, permission_asks, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

PLAN_TEXT = "1. Add `greet()` to app.py\n2. Test it"


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "arguments": arguments}]}


def declared(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def modes_sent(conn: AgentProcess, sid: str) -> list[str]:
    return [u["currentModeId"] for u in conn.updates_for(sid, "current_mode_update")]


def notes(body: dict[str, Any]) -> list[str]:
    """The texts of the user messages of a request (ama's setting notes among them)."""
    out = []
    for m in body["messages"]:
        if m.get("role") == "user":
            content = m["content"]
            out.append(content if isinstance(content, str) else " ".join(p.get("text", "") for p in content))
    return out


async def test_plan_is_offered_as_a_session_mode_and_as_the_mode_option(tmp_path):
    ama = Ama(tmp_path)
    async with run_ama(ama) as conn:
        await conn.initialize()
        new = as_object(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        modes = {m["id"]: m for m in new["modes"]["availableModes"]}
        assert modes["plan"]["name"] == "Plan" and modes["plan"]["description"]
        assert new["modes"]["currentModeId"] == "manual"  # the default is unchanged
        option = next(o for o in new["configOptions"] if o["category"] == "mode")
        assert "plan" in [o["value"] for o in option["options"]]
        await conn.request("session/set_mode", {"sessionId": new["sessionId"], "modeId": "plan"})
        assert modes_sent(conn, new["sessionId"]) == ["plan"]


async def test_in_plan_mode_reads_run_while_writes_and_commands_are_refused_without_asking(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "app.py").write_text("print('hi')\n")
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            call("r1", "read_file", path="app.py"),
            call("w1", "write_file", path="out.txt", content="new\n"),
            call("c1", "run_command", command="touch ran.txt"),
            {"text": "Here is the plan."},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="allow_once")) as conn:
            sid = await start(conn, ama, "plan")
            assert (await conn.prompt(sid, "add a greeting", timeout=15))["stopReason"] == "end_turn"
            assert permission_asks(conn) == []  # refused by the mode, not by the person
            f = finals(conn, sid)
            assert f["r1"]["status"] == "completed"
            for cid in ("w1", "c1"):
                assert f[cid]["status"] == "failed" and "Plan mode" in final_text(f[cid])
                assert "Put this step in the plan" in tool_message(llm.requests[-1].body, cid)
            assert not (ama.workspace / "out.txt").exists() and not (ama.workspace / "ran.txt").exists()
            first = llm.requests[0].body
            assert "exit_plan_mode" in declared(first)
            assert "plan mode" in first["messages"][0]["content"]  # the system prompt says what plan mode is
            assert open_calls(conn, sid) == []


async def test_the_plan_goes_out_and_a_switch_to_an_editing_mode_keeps_it_in_the_conversation(tmp_path):
    ama = Ama(tmp_path)
    todos = [{"content": "Add greet()", "status": "pending"}, {"content": "Test it", "status": "pending"}]
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(call("t1", "todo_write", todos=todos), {"text": "PLAN-READY: two steps."})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, "plan")
            await conn.prompt(sid, "plan a greeting", timeout=15)
            (plan,) = conn.updates_for(sid, "plan")
            assert [e["content"] for e in plan["entries"]] == ["Add greet()", "Test it"]
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
            assert modes_sent(conn, sid) == ["plan", "accept_edits"]
            llm.enqueue({"text": "doing it"})
            await conn.prompt(sid, "go ahead", timeout=15)
            body = llm.requests[-1].body
            text = json.dumps(body["messages"])
            assert "PLAN-READY" in text and "Add greet()" in text  # the plan and the reply are still there
            assert any("now `accept_edits`" in n for n in notes(body))  # told of the switch
            assert "exit_plan_mode" not in declared(body)


async def test_exit_plan_mode_accepted_switches_the_mode_and_the_turn_goes_on_in_it(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            call("x1", "exit_plan_mode", plan=PLAN_TEXT),
            call("w1", "write_file", path="app.py", content="def greet(): ...\n"),
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="allow_once")) as conn:
            sid = await start(conn, ama, "plan")
            assert (await conn.prompt(sid, "plan it", timeout=15))["stopReason"] == "end_turn"
            ((asked, answer),) = permission_asks(conn)  # the offer only: Accept edits lets the write go ahead
            options = {o["optionId"]: o["name"] for o in asked["options"]}
            assert options == {
                "switch_accept_edits": "Switch to Accept edits",
                "switch_manual": "Switch to Manual",
                "keep_planning": "Keep planning",
            }
            assert asked["toolCall"]["toolCallId"] == "x1" and asked["toolCall"]["kind"] == "switch_mode"
            assert PLAN_TEXT in asked["toolCall"]["content"][0]["content"]["text"]
            assert answer["optionId"] == "switch_accept_edits"
            assert modes_sent(conn, sid) == ["plan", "accept_edits"]
            last_options = conn.updates_for(sid, "config_option_update")[-1]["configOptions"]
            assert next(o for o in last_options if o["id"] == "mode")["currentValue"] == "accept_edits"
            f = finals(conn, sid)
            assert f["x1"]["status"] == "completed" and f["w1"]["status"] == "completed"
            assert (ama.workspace / "app.py").read_text() == "def greet(): ...\n"
            body = llm.requests[-1].body
            assert "approved the plan" in tool_message(body, "x1")
            assert any("now `accept_edits`" in n for n in notes(body))


async def test_exit_plan_mode_refused_keeps_planning(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            call("x1", "exit_plan_mode", plan=PLAN_TEXT),
            call("w1", "write_file", path="app.py", content="x\n"),
            {"text": "still planning"},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama, "plan")
            await conn.prompt(sid, "plan it", timeout=15)
            assert [a["optionId"] for _, a in permission_asks(conn)] == ["keep_planning"]
            assert modes_sent(conn, sid) == ["plan"]
            body = llm.requests[-1].body
            assert "keep planning" in tool_message(body, "x1")
            assert finals(conn, sid)["w1"]["status"] == "failed" and not (ama.workspace / "app.py").exists()


async def test_exit_plan_mode_outside_plan_mode_asks_nothing_and_says_so(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(call("x1", "exit_plan_mode", plan=PLAN_TEXT), {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "go", timeout=15)
            assert permission_asks(conn) == [] and modes_sent(conn, sid) == []
            assert "exit_plan_mode" not in declared(llm.requests[0].body)
            assert "not in plan mode" in tool_message(llm.requests[-1].body, "x1")


def test_print_mode_answers_the_offer_without_hanging(tmp_path):
    """`ama -p` has nobody to ask: the offer is refused at once, the mode stays, the answer comes."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, top='mode = "plan"'))
        llm.enqueue(call("x1", "exit_plan_mode", plan=PLAN_TEXT), {"text": "THE-PLAN as my answer"})
        out = subprocess.run(
            [sys.executable, "-m", "ama_acp", "-p", "plan it", "--data-dir", str(ama.data)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ama.workspace,
            env=clean_env(ama.tmp, {"AMA_CONFIG": str(ama.config), **KEY}),
        )
        assert out.returncode == 0, out.stderr
        assert "THE-PLAN" in out.stdout and "refused (no one to ask in -p mode)" in out.stderr
        assert "keep planning" in tool_message(llm.requests[-1].body, "x1")


async def test_a_client_that_cannot_ask_gets_a_clear_result_and_the_mode_stays(tmp_path):
    ama = Ama(tmp_path)

    async def unable(params: dict[str, Any]) -> Any:
        raise RpcError(-32601, "Method not found")

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(call("x1", "exit_plan_mode", plan=PLAN_TEXT), {"text": "here is the plan"})
        async with run_ama(ama, env=KEY) as conn:
            conn.set_handler("session/request_permission", unable)
            sid = await start(conn, ama, "plan")
            assert (await conn.prompt(sid, "plan it", timeout=15))["stopReason"] == "end_turn"
            assert modes_sent(conn, sid) == ["plan"]
            assert finals(conn, sid)["x1"]["status"] == "failed"
            assert "could not be asked (" in tool_message(llm.requests[-1].body, "x1")


async def test_a_cancelled_offer_cancels_the_turn_and_leaves_no_call_open(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(call("x1", "exit_plan_mode", plan=PLAN_TEXT), {"text": "never asked for"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="cancel")) as conn:
            sid = await start(conn, ama, "plan")
            assert (await conn.prompt(sid, "plan it", timeout=15))["stopReason"] == "cancelled"
            assert modes_sent(conn, sid) == ["plan"] and open_calls(conn, sid) == []
            llm.clear()
            llm.enqueue({"text": "next"})
            assert (await conn.prompt(sid, "again", timeout=15))["stopReason"] == "end_turn"
            assert dangling(llm.requests[-1].body) == []


async def test_a_mode_the_person_picks_while_asked_stands(tmp_path):
    ama = Ama(tmp_path)
    asked = anyio.Event()
    click = anyio.Event()

    async def slow_person(params: dict[str, Any]) -> str:
        asked.set()
        await click.wait()
        return "switch_accept_edits"

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(call("x1", "exit_plan_mode", plan=PLAN_TEXT), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=slow_person)) as conn:
            sid = await start(conn, ama, "plan")
            pending = await prompt(conn, sid, "plan it")
            with anyio.fail_after(10):
                await asked.wait()
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
            click.set()
            assert as_object(await pending.wait(timeout=15))["stopReason"] == "end_turn"
            assert modes_sent(conn, sid) == ["plan", "read_only"]
            assert "changed to `read_only` while the user was asked" in tool_message(llm.requests[-1].body, "x1")


async def test_a_session_loaded_in_plan_mode_plans_and_offers_again(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "a plan"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, "plan")
            await conn.prompt(sid, "plan it", timeout=15)
        llm.enqueue({"text": "more plan"})
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            loaded = as_object(
                await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            )
            assert loaded["modes"]["currentModeId"] == "plan"
            await conn.prompt(sid, "go on", timeout=15)
            assert "exit_plan_mode" in declared(llm.requests[-1].body)


async def test_a_helper_of_a_task_plans_too_it_cannot_write_nor_offer(tmp_path):
    ama = Ama(tmp_path)
    task = {"prompt": "Write out.txt", "description": "Write a file", "agent": "general"}
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            call("t1", "task", **task),
            call("w1", "write_file", path="out.txt", content="x\n"),  # the helper's
            {"text": "could not write"},  # the helper's answer
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, "plan")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert permission_asks(conn) == [] and not (ama.workspace / "out.txt").exists()
            helper = llm.requests[1].body
            assert "exit_plan_mode" not in declared(helper) and "write_file" in declared(helper)
            assert "Plan mode" in tool_message(llm.requests[2].body, "w1")
