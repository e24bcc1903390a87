"""External ACP agents carrying out tasks, over real pipes: ama as the parent (run_ama), the editor ama's own
client, the agent a real subprocess (tests/support/acp_fixtures/task_agent.py) that ama starts through its
client. Each test's prompt to the task is a list of the fixture's directives."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.session.tasks.external import agent as external_task
from tests.integration.test_cancel_e2e import open_calls, start
from tests.integration.test_subagents_e2e import SUBAGENTS, announced_first, subagent_updates, written
from tests.integration.test_tasks_e2e import KEY, configure, finals, stats, task_call, task_id, text_of, tool_messages
from tests.support import leaks
from tests.support.harness import Ama, permission_asks, run_ama
from tests.support.json_values import as_object
from tests.support.llm_server import LLMServer
from tests.support.waiting import holds_within

pytestmark = pytest.mark.anyio

SECRET = "sk-other-vendor-0123456789abcdef"
AGENT = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "task_agent.py"


def external(ama: Ama, url: str, *, tail: str = "") -> Path:
    """The `ext` agent (the fixture), its pids noted in a file; returns that file."""
    pids = ama.workspace.parent / "pids.txt"
    configure(
        ama,
        url,
        tail=f"""
[agents.ext]
description = "another vendor's agent"
command = "{sys.executable}"
args = ["{AGENT}"]
env = {{ TASK_AGENT_PIDS = "{pids}", TASK_AGENT_EVENTS = "{pids}.events", EXT_SETTING = "seven", OTHER_API_KEY = "{SECRET}" }}
{tail}""",
    )
    return pids


def pids_of(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def events_of(pids: Path) -> list[str]:
    events = Path(f"{pids}.events")
    return events.read_text().split() if events.exists() else []


def alive(pid: int) -> bool:
    fields = leaks.stat_fields(pid)
    return bool(fields) and fields[0] != b"Z"


def all_gone(path: Path) -> bool:
    return holds_within(lambda: not any(alive(p) for p in pids_of(path)), 5.0)


async def run_task(conn: AgentProcess, ama: Ama, directives: str, mode: str | None = None) -> tuple[str, str]:
    sid = await start(conn, ama, mode=mode)
    assert (await conn.prompt(sid, "delegate", timeout=20))["stopReason"] == "end_turn"
    return sid, task_id(conn, sid)


async def test_an_external_agent_answers_and_its_reported_figures_are_its_own(tmp_path):
    ama = Ama(tmp_path)
    directives = (
        "tool Looking around\nsay The answer is 42.\nusage 1200 200000 0.05\ntokens 1500\n"
        "env EXT_SETTING\nenv LOCAL_TEST_KEY\nenv OTHER_API_KEY"
    )
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", directives, "Ask ext", "ext")], "usage": {"input": 1000, "output": 50}},
            {"text": "It said 42.", "usage": {"input": 1200, "output": 20}},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, directives)
            final = finals(conn, sid)[tid]
            assert final["status"] == "completed"
            [(_, result)] = tool_messages(llm.requests[1].body)
            assert result.startswith("The answer is 42.")
            assert "env EXT_SETTING=seven" in result  # its configured env reaches it
            assert "env LOCAL_TEST_KEY unset" in result  # ama's own credentials do not
            # Its progress in the task call: its tool call as a line, its figures in `_meta`.
            progress = [u for u in conn.updates_for(sid, "tool_call_update") if u["toolCallId"] == tid and "_meta" in u]
            assert any("✓ Looking around" in text_of(u) for u in progress)
            assert progress[-1]["_meta"]["ama"]["task"]["contextWindow"] == 200000

            s = await stats(conn, sid)
            [task] = s["tasks"]
            assert task["external"] is True and task["agent"] == "ext" and task["status"] == "completed"
            assert task["requests"] == 1 and task["tokens"] == 1500
            assert (task["contextTokens"], task["contextWindow"], task["contextPercent"]) == (1200, 200000, 0.6)
            assert task["cost"] == {"amount": 0.05, "currency": "USD"}
            parent_cost = ((1000 + 1200) * 1.0 + (50 + 20) * 2.0) / 1e6
            assert s["cost"]["amount"] == pytest.approx(parent_cost + 0.05)
            assert s["billed"]["requests"] == 2  # the parent's own; the agent's are its business
            assert s["contextTokens"] < 5000  # the task's 1,200 never entered the parent's context
            # byAgent carries the child's context figures too (issue 42: the seed's): its fullest context reported.
            assert s["external"]["byAgent"] == {
                "ext": {
                    "tasks": 1,
                    "requests": 1,
                    "tokens": 1500,
                    "cost": {"amount": 0.05, "currency": "USD"},
                    "contextTokens": 1200,
                    "contextWindow": 200000,
                    "contextPercent": 0.6,
                }
            }
            await conn.prompt(sid, "/tasks", timeout=10)
            shown = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert "`ext` (external) — Ask ext: completed; 1,500 tokens; ctx 0.6% (1,200 / 200,000); $0.0500" in shown
            assert all_gone(pids)  # the task ended: so did the agent
        # Its key reached it, and no file ama wrote holds it (logs, the session file): it is redacted there.
        assert f"env OTHER_API_KEY={SECRET}" in result
        written = [p for p in ama.data.rglob("*") if p.is_file()]
        assert written and not [p for p in written if SECRET.encode() in p.read_bytes()]


async def test_an_agent_that_reports_no_cost_makes_the_parents_cost_unknown(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "say hello", "Greet", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid, _ = await run_task(conn, ama, "say hello")
            s = await stats(conn, sid)
            [task] = s["tasks"]
            assert task["status"] == "completed" and task["requests"] == 1
            assert not {"cost", "tokens", "contextTokens", "contextWindow"} & set(task)  # unknown, never 0
            assert "cost" not in s
            assert s["external"]["byAgent"] == {"ext": {"tasks": 1, "requests": 1}}


@pytest.mark.parametrize(
    ("mode", "policy", "asked", "answer"),
    [
        ("manual", "allow_once", True, "yes"),
        ("manual", "reject_once", True, "no"),
        ("read_only", "allow_once", False, "no"),  # the mode refuses it before anyone is asked
        ("full_access", "reject_once", False, "yes"),  # the mode allows it without asking
    ],
)
async def test_an_agents_permission_request_is_the_persons_under_the_parents_mode(
    tmp_path, mode, policy, asked, answer
):
    ama = Ama(tmp_path)
    directives = "permission execute Run make\nsay done"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Build", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=policy)) as conn:
            sid, tid = await run_task(conn, ama, directives, mode=mode)
            assert f"permission: {answer}" in tool_messages(llm.requests[1].body)[0][1]
            if asked:
                [(params, outcome)] = permission_asks(conn)
                assert params["sessionId"] == sid  # the parent's session: the editor knows no other
                assert params["toolCall"]["toolCallId"].startswith(tid + ".")
                assert params["toolCall"]["title"] == "ext: Run make"
                assert [o["optionId"] for o in params["options"]] == ["yes", "no"]  # the agent's own options
                assert outcome == {"outcome": "selected", "optionId": answer}
            else:
                assert conn.permission_log == []


async def test_the_agents_file_requests_keep_to_the_workspace_and_the_mode(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "in.txt").write_text("inside text")
    outside = tmp_path / "outside.txt"
    outside.write_text("outside text")
    ws = ama.workspace
    directives = (
        f"read {ws / 'in.txt'}\nread {outside}\nwrite {ws / 'new.txt'} fresh\nwrite {tmp_path / 'evil.txt'} bad"
    )
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Files", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            await run_task(conn, ama, directives, mode="accept_edits")
            result = tool_messages(llm.requests[1].body)[0][1]
            assert "read: inside text" in result
            assert f"read error: Refused: {outside} is outside this session's workspace" in result
            assert "write: ok" in result and (ws / "new.txt").read_text() == "fresh"
            assert "write error: Refused:" in result and not (tmp_path / "evil.txt").exists()
            assert conn.permission_log == []  # Accept edits: a write inside needs no question


@pytest.mark.parametrize(("mode", "written"), [("read_only", False), ("manual", True)])
async def test_an_agents_write_inside_follows_the_mode(tmp_path, mode, written):
    ama = Ama(tmp_path)
    directives = f"write {ama.workspace / 'out.txt'} hello"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Write", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, directives, mode=mode)
            result = tool_messages(llm.requests[1].body)[0][1]
            assert (ama.workspace / "out.txt").exists() == written
            if written:  # Manual: the person was asked, with the diff, in the parent's session
                [(params, _)] = permission_asks(conn)
                assert params["sessionId"] == sid and params["toolCall"]["toolCallId"].startswith(tid + ".")
                assert any(c.get("type") == "diff" for c in params["toolCall"]["content"])
                assert "write: ok" in result
            else:
                assert "write error: Refused: The session is in Read only mode" in result


async def test_cancelling_the_parent_ends_the_agent_and_everything_it_started(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "spawn\nwait", "Hang", "ext")]})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(pids_of(pids)) == 2, timeout=10)  # the agent and its grandchild
            assert all(alive(p) for p in pids_of(pids))
            await conn.cancel(sid)
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            assert all_gone(pids)
            # It was told first: session/cancel reached it (and its answer was read) before it was stopped.
            assert events_of(pids) == ["session/cancel"]
            assert open_calls(conn, sid) == []
            assert (await stats(conn, sid))["tasks"][0]["status"] == "cancelled"


async def test_an_agent_that_dies_fails_the_call_with_the_reason(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "say partial\ndie 3", "Die", "ext")]}, {"text": "it died"})
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, "")
            final = finals(conn, sid)[tid]
            assert final["status"] == "failed"
            reason = tool_messages(llm.requests[1].body)[0][1]
            assert "exited before it answered (exit code 3)" in reason and "dying on purpose" in reason
            [task] = (await stats(conn, sid))["tasks"]
            assert task["status"] == "failed" and "exit code 3" in task["error"]


async def test_an_agent_that_hangs_past_the_timeout_fails_the_call_and_is_ended(tmp_path, monkeypatch):
    # The agent ignores session/cancel and its stdin's end: a test-sized grace for each (the product's 1 s, read
    # by ama in-process at each use) instead of waiting both out. That it is ended at all is what is checked.
    monkeypatch.setattr(external_task, "STOP_GRACE", 0.2)
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url, tail="[tasks]\ntimeout = 1\n")
        llm.enqueue({"tool_calls": [task_call("t1", "spawn\nhang", "Hang", "ext")]}, {"text": "timed out"})
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, "")
            assert finals(conn, sid)[tid]["status"] == "failed"
            assert "did not finish within 1 s" in tool_messages(llm.requests[1].body)[0][1]
            assert len(pids_of(pids)) == 2 and all_gone(pids)


async def test_a_missing_program_fails_the_call_and_the_session_goes_on(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, tail='[agents.ghost]\ncommand = "/nonexistent/agent-program"\n')
        llm.enqueue({"tool_calls": [task_call("t1", "hi", "Ghost", "ghost")]}, {"text": "no such agent"})
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, "")
            assert finals(conn, sid)[tid]["status"] == "failed"
            assert "could not start" in tool_messages(llm.requests[1].body)[0][1]
            # It never got the task: no prompt, nothing reported.
            assert (await stats(conn, sid))["external"]["byAgent"] == {"ghost": {"tasks": 1, "requests": 0}}


async def test_closing_the_session_mid_task_ends_the_agent(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "spawn\nwait", "Hang", "ext")]})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(pids_of(pids)) == 2, timeout=10)
            await conn.request("session/close", {"sessionId": sid}, timeout=10)
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            assert all_gone(pids)
            assert open_calls(conn, sid) == []


async def test_ama_exiting_mid_task_ends_the_agent(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "spawn\nwait", "Hang", "ext")]})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await conn.wait_for(lambda: len(pids_of(pids)) == 2, timeout=10)
        # The editor hung up (ama's stdin ended) and ama is gone: so are the agent and what it started.
        assert all_gone(pids)


@pytest.mark.parametrize("subagents", [False, True])
async def test_a_forwarded_permission_open_at_the_parents_cancel_is_answered_cancelled(tmp_path, subagents):
    ama = Ama(tmp_path)
    asked: list[dict[str, Any]] = []

    async def never(params: dict[str, Any]) -> Any:
        asked.append(params)
        await anyio.sleep_forever()  # the person never answers; the cancel closes the dialog

    directives = "permission execute Run make\nsay done"
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Build", "ext")]})
        options = ClientOptions(permission=never, extra_capabilities={"subagents": {}} if subagents else {})
        async with run_ama(ama, env=KEY, options=options) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: bool(asked), timeout=10)
            await conn.cancel(sid)  # the editor answers the open dialog `cancelled`, as it must
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            assert all_gone(pids)
            assert open_calls(conn, sid) == []
            if subagents:  # asked in the task's session; the call ama announced for it is settled, the task ended
                task_sid = subagent_updates(conn, sid)[0]["sessionId"]
                assert asked[0]["sessionId"] == task_sid
                assert open_calls(conn, task_sid) == []
                assert subagent_updates(conn, sid)[-1]["state"] == {"state": "idle", "stopReason": "cancelled"}
            else:
                assert [outcome for _, outcome in conn.permission_log] == [{"outcome": "cancelled"}]


HOSTILE = [
    {"sessionUpdate": "tool_call_update", "toolCallId": "never-announced", "status": "completed"},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": 5}},
    {"sessionUpdate": "tool_call", "toolCallId": "x1", "title": "Bad", "status": "bogus"},
    {"sessionUpdate": "usage_update", "used": -1, "size": 1000},
    {"sessionUpdate": "available_commands_update", "availableCommands": []},
    {"sessionUpdate": "plan", "entries": [{"content": "Step one", "priority": "high", "status": "pending", "x": 1}]},
    {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "Run\u0007 it",
        "kind": "nonsense",
        "rawInput": {"cmd": "x"},
        "content": [
            {"type": "content", "content": {"type": "text", "text": "out", "_meta": {"x": 1}}},
            {"type": "terminal", "terminalId": "term-of-another-session"},
        ],
    },
]


async def test_with_subagents_an_external_task_is_a_session_of_its_own_fed_only_what_decodes(tmp_path):
    ama = Ama(tmp_path)
    raw = "".join(f"raw {json.dumps(u)}\n" for u in HOSTILE)
    directives = f"tool Looking around\nsay Found it.\nusage 10 1000\nusage 10 1000\n{raw}usage 20 1000"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Look", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid, tid = await run_task(conn, ama, directives)
            assert finals(conn, sid)[tid]["status"] == "completed"
            first, *_, last = subagent_updates(conn, sid)
            task_sid = first["sessionId"]
            assert task_sid == f"{sid}.task-1" and first["title"] == "Look" and first["state"] == {"state": "running"}
            assert last == {
                "sessionUpdate": "subagent_update",
                "sessionId": task_sid,
                "state": {"state": "idle", "stopReason": "end_turn"},
            }
            announced_first(conn, sid, task_sid)
            updates = conn.updates_for(task_sid)
            assert [u["sessionUpdate"] for u in updates] == [
                "user_message_chunk",  # the task ama sent it
                "tool_call",
                "tool_call_update",
                "agent_message_chunk",
                "usage_update",  # the repeat of the same figures is not sent again
                "plan",
                "tool_call",
                "usage_update",
            ]
            assert updates[1]["toolCallId"] == "t0" and updates[2]["status"] == "completed"
            assert updates[3]["content"] == {"type": "text", "text": "Found it."}
            assert [(u["used"], u["size"]) for u in updates if u["sessionUpdate"] == "usage_update"] == [
                (10, 1000),
                (20, 1000),
            ]
            assert updates[5]["entries"] == [{"content": "Step one", "priority": "high", "status": "pending"}]
            # Re-built from typed values: one printable line of title, a known kind, text blocks only, no rawInput.
            assert updates[6] == {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "Run\N{REPLACEMENT CHARACTER} it",  # kind `other`, status `pending`: the defaults, left out
                "content": [{"type": "content", "content": {"type": "text", "text": "out"}}],
            }
            # Its figures and its session id on the task call, as for ama's own tasks.
            meta = [u["_meta"]["ama"]["task"] for u in conn.updates_for(sid, "tool_call_update") if "_meta" in u]
            assert meta[-1]["sessionId"] == task_sid and meta[-1]["contextTokens"] == 20
            assert (await stats(conn, sid))["tasks"][0]["sessionId"] == task_sid


@pytest.mark.parametrize("directive", ["permission execute Run make", "ask execute Run make"])
async def test_with_subagents_an_agents_permission_names_its_session_and_an_announced_call(tmp_path, directive):
    ama = Ama(tmp_path)
    directives = f"{directive}\nsay done"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Build", "ext")]}, {"text": "ok"})
        options = ClientOptions(permission="allow_once", extra_capabilities={"subagents": {}})
        async with run_ama(ama, env=KEY, options=options) as conn:
            sid, tid = await run_task(conn, ama, directives, mode="manual")
            assert "permission: yes" in tool_messages(llm.requests[1].body)[0][1]
            task_sid = subagent_updates(conn, sid)[0]["sessionId"]
            [(params, _)] = permission_asks(conn)
            assert params["sessionId"] == task_sid
            call_id = params["toolCall"]["toolCallId"]
            # The editor saw that call in the task's session before it was asked about it.
            order = written(conn)
            asked = next(i for i, m in enumerate(order) if m.get("method") == "session/request_permission")
            shown = [
                i
                for i, m in enumerate(order)
                if (m.get("params") or {}).get("sessionId") == task_sid
                and (m["params"].get("update") or {}).get("toolCallId") == call_id
            ]
            assert shown and shown[0] < asked
            if directive.startswith("ask"):
                assert call_id == "a0"  # the agent's own call, as it announced it
            else:  # the agent named a call it never announced: ama announced one and settled it with the answer
                assert call_id.startswith(tid + ".")
                assert conn.updates_for(task_sid, "tool_call_update")[-1] == {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "completed",
                }
            assert open_calls(conn, task_sid) == [] or directive.startswith("ask")


async def test_with_subagents_an_agents_write_is_asked_and_settled_in_its_session(tmp_path):
    ama = Ama(tmp_path)
    directives = f"write {ama.workspace / 'out.txt'} hello"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Write", "ext")]}, {"text": "ok"})
        options = ClientOptions(permission="allow_once", extra_capabilities={"subagents": {}})
        async with run_ama(ama, env=KEY, options=options) as conn:
            sid, _ = await run_task(conn, ama, directives, mode="manual")
            task_sid = subagent_updates(conn, sid)[0]["sessionId"]
            [(params, _)] = permission_asks(conn)
            assert params["sessionId"] == task_sid
            assert any(c.get("type") == "diff" for c in params["toolCall"]["content"])
            [call] = conn.updates_for(task_sid, "tool_call")
            assert call["toolCallId"] == params["toolCall"]["toolCallId"] and call["kind"] == "edit"
            assert open_calls(conn, task_sid) == []  # settled: completed once written
            assert (ama.workspace / "out.txt").read_text() == "hello"


async def test_with_subagents_a_cancelled_or_dead_external_task_ends_with_its_final_state(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "tool Looking\nspawn\nwait", "Hang", "ext")]},
        )
        async with run_ama(ama, env=KEY, options=SUBAGENTS) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            await conn.wait_for(lambda: len(pids_of(pids)) == 2, timeout=10)
            await conn.cancel(sid)
            assert as_object(await pending.wait(timeout=10))["stopReason"] == "cancelled"
            task_sid = subagent_updates(conn, sid)[0]["sessionId"]
            assert subagent_updates(conn, sid)[-1]["state"] == {"state": "idle", "stopReason": "cancelled"}
            assert all_gone(pids)

            llm.enqueue({"tool_calls": [task_call("t2", "say partial\ndie 3", "Die", "ext")]}, {"text": "it died"})
            assert (await conn.prompt(sid, "again", timeout=20))["stopReason"] == "end_turn"
            last = subagent_updates(conn, sid)[-1]
            assert last["sessionId"] != task_sid and last["sessionId"] == f"{sid}.task-2"
            state = last["state"]
            assert state["stopReason"] == "error" and "exit code 3" in state["error"]["message"]
            assert "partial" in "".join(
                u["content"]["text"] for u in conn.updates_for(last["sessionId"], "agent_message_chunk")
            )


async def test_a_load_lists_external_tasks_with_their_figures_and_unknowns_stay_unknown(tmp_path):
    ama = Ama(tmp_path)
    reported = "say The answer is 42.\nusage 1200 200000 0.05\ntokens 1500"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", reported, "Ask ext", "ext"), task_call("t2", "say hi", "Greet", "ext")]},
            {"text": "ok"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid, _ = await run_task(conn, ama, "")
            first = await stats(conn, sid)
            before = first["tasks"]
        lines = [json.loads(line) for line in (ama.data / "tasks" / f"{sid}.jsonl").read_bytes().splitlines()]
        # What ama saw of each conversation: the task it sent and the answer's text (the rest is the agent's).
        by_id = {line["id"]: line for line in lines}
        assert [m["type"] for m in by_id["t1"]["messages"]] == ["user", "assistant"]
        assert by_id["t1"]["messages"][0]["content"][0]["text"] == reported
        assert by_id["t1"]["messages"][1]["content"][0]["text"] == "The answer is 42."

        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            loaded = await stats(conn, sid)
            after = {t["id"]: t for t in loaded["tasks"]}
            assert after == {t["id"]: t for t in before}
            # external.byAgent counts the tasks of earlier connections too: the same as before the load (t2 reported
            # no tokens or cost, so the agent's sums are unknown, never a partial sum; its context figures are the
            # fullest any of its tasks reported, t1's, whatever order the kept tasks come back in).
            context = {"contextTokens": 1200, "contextWindow": 200000, "contextPercent": 0.6}
            assert loaded["external"]["byAgent"] == first["external"]["byAgent"]
            assert first["external"]["byAgent"] == {"ext": {"tasks": 2, "requests": 2, **context}}
            assert after["t1"]["external"] is True and after["t1"]["tokens"] == 1500
            assert after["t1"]["cost"] == {"amount": 0.05, "currency": "USD"}
            # The figures it never reported are still absent after the load (unknown, never 0).
            assert after["t2"]["external"] is True
            assert not {"cost", "tokens", "contextTokens", "contextWindow"} & set(after["t2"])
            await conn.prompt(sid, "/tasks", timeout=10)
            shown = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
            assert "`ext` (external) — Ask ext: completed; 1,500 tokens; ctx 0.6% (1,200 / 200,000); $0.0500" in shown
            assert (
                "`ext` (external) — Greet: completed; tokens not reported; context not reported; cost unknown" in shown
            )
