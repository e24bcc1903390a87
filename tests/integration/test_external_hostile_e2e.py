"""External agents that attack ama (issue 39), over real pipes: ama as the parent (run_ama), the editor ama's own
client, the agent a real subprocess (tests/support/acp_fixtures/task_agent.py, or a program found through PATH)
that ama starts through its client. Where the agent's program is found, what a flood of its updates costs ama's
memory, a write into `.git`, what it leaves running, how many questions it can put to the person and what they are
called, and the cost it reports."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.session.tasks.external.requests import MAX_WAITING
from ama_acp.session.tasks.external.updates import MAX_TASK_COST_USD
from tests.integration.test_cancel_e2e import start
from tests.integration.test_external_tasks_e2e import AGENT, all_gone, events_of, external, pids_of, run_task
from tests.integration.test_mcp_hostile_e2e import comes_true_within
from tests.integration.test_subagents_e2e import subagent_updates
from tests.integration.test_tasks_e2e import KEY, configure, finals, stats, task_call, tool_messages
from tests.support.harness import Ama, permission_asks, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


def notices(conn: Any, sid: str) -> list[str]:
    return [str(n.get("description")) for n in conn.updates_for(sid, "notice")]


# --- 1. The agent's program is found as every program ama starts ---------------------------------------------


def program(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def helper(ama: Ama, url: str) -> None:
    configure(ama, url, tail='[agents.helper]\ndescription = "found by name"\ncommand = "helper-agent"\n')


@pytest.mark.parametrize(
    ("layout", "where"),
    [
        ("relative", "node_modules/.bin"),  # ./node_modules/.bin in PATH: the project's npm binaries
        ("empty", "."),  # a trailing `:`, the current directory: the project's root
        ("inside", "bin"),  # an absolute entry inside the workspace
    ],
)
async def test_an_agent_named_by_a_bare_name_never_runs_from_the_project(tmp_path, layout, where):
    ama = Ama(tmp_path)
    ws = ama.workspace
    ran = tmp_path / "the-projects-agent-ran"
    program(ws / where / "helper-agent", f": > '{ran}'")
    nowhere = tmp_path / "no-programs"
    nowhere.mkdir()
    path = {
        "relative": f"node_modules/.bin{os.pathsep}{nowhere}",
        "empty": f"{nowhere}{os.pathsep}",
        "inside": f"{ws / 'bin'}{os.pathsep}{nowhere}",
    }[layout]
    with LLMServer() as llm:
        helper(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "say hi", "Help", "helper")]}, {"text": "it did not start"})
        async with run_ama(ama, env={**KEY, "PATH": path}) as conn:
            sid, tid = await run_task(conn, ama, "", mode="read_only")
            assert finals(conn, sid)[tid]["status"] == "failed"
            reason = tool_messages(llm.requests[1].body)[0][1]
    assert not ran.exists(), "the project's helper-agent ran"
    assert "could not start" in reason and "was found only where ama does not run programs from" in reason


async def test_an_agent_found_outside_the_project_runs_with_the_path_filtered(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    ran = tmp_path / "the-projects-agent-ran"
    program(ws / "node_modules/.bin/helper-agent", f": > '{ran}'")
    outside = tmp_path / "tools"
    program(outside / "helper-agent", f'exec "{sys.executable}" "{AGENT}"')
    path = os.pathsep.join(["node_modules/.bin", str(outside), str(ws / "bin"), ""])
    with LLMServer() as llm:
        helper(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "env PATH", "Help", "helper")]}, {"text": "ok"})
        async with run_ama(ama, env={**KEY, "PATH": path}) as conn:
            sid, tid = await run_task(conn, ama, "", mode="read_only")
            assert finals(conn, sid)[tid]["status"] == "completed"
            result = tool_messages(llm.requests[1].body)[0][1]
    assert not ran.exists()
    # What the agent itself starts by name is held to the same rule: only the entry outside the project is left.
    assert f"env PATH={outside}\n" in result + "\n"


async def test_an_agent_configured_by_its_path_runs_as_configured_even_inside_the_project(tmp_path):
    ama = Ama(tmp_path)
    ws = ama.workspace
    program(ws / "tools/my-agent", f'exec "{sys.executable}" "{AGENT}"')  # the person named that exact file
    nowhere = tmp_path / "no-programs"
    nowhere.mkdir()
    with LLMServer() as llm:
        configure(
            ama, llm.openai_url, tail=f'[agents.helper]\ndescription = "mine"\ncommand = "{ws / "tools/my-agent"}"\n'
        )
        llm.enqueue({"tool_calls": [task_call("t1", "say mine", "Help", "helper")]}, {"text": "ok"})
        async with run_ama(ama, env={**KEY, "PATH": str(nowhere)}) as conn:
            sid, tid = await run_task(conn, ama, "", mode="read_only")
            assert finals(conn, sid)[tid]["status"] == "completed"
            assert tool_messages(llm.requests[1].body)[0][1].startswith("mine")


# --- 3. A flood of updates costs a bounded amount of memory ---------------------------------------------------


def rss_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


FLOOD_MB = 200


async def test_a_flood_of_updates_is_not_kept_and_the_person_is_told_once(tmp_path):
    ama = Ama(tmp_path)
    directives = f"say start\nflood {FLOOD_MB}"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Flood", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(notices=True), process=True) as conn:
            assert conn.pid is not None
            sid = await start(conn, ama)
            before = rss_mib(conn.pid, "VmRSS")
            assert (await conn.prompt(sid, "delegate", timeout=120))["stopReason"] == "end_turn"
            grown = rss_mib(conn.pid, "VmHWM") - before
            [(_, result)] = tool_messages(llm.requests[1].body)
            told = notices(conn, sid)
    # Kept whole, 200 MB of updates grew ama by about twice that (the raw lines and their decoded copies); what
    # is kept now is bounded by the answer's 4,000,000 characters and the record's lines.
    assert grown < 120, f"ama grew by {grown:.0f} MiB for {FLOOD_MB} MB of updates"
    assert result.startswith("start")
    assert len([t for t in told if "answer past 4,000,000 characters" in t]) == 1, told
    assert len([t for t in told if "tool calls past 1,000" in t]) == 1, told


# --- 4. No write into .git ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["manual", "accept_edits", "full_access"])
async def test_an_agents_write_into_git_is_refused_in_every_mode(tmp_path, mode):
    ama = Ama(tmp_path)
    ws = ama.workspace
    (ws / ".git/hooks").mkdir(parents=True)
    (ws / ".git/config").write_text("[core]\n")
    (ws / "gitdir").symlink_to(ws / ".git")  # a link does not get around it
    targets = [ws / ".git/config", ws / ".git/hooks/pre-commit", ws / "gitdir/hooks/post-checkout"]
    directives = "\n".join(f"write {t} [core]\\n\\tfsmonitor = touch /tmp/pwned" for t in targets)
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Hooks", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            await run_task(conn, ama, directives, mode=mode)
            result = tool_messages(llm.requests[1].body)[0][1]
            assert conn.permission_log == []  # refused before anyone is asked
    assert result.count("write error: Refused:") == 3 and "inside a .git directory" in result, result
    assert (ws / ".git/config").read_text() == "[core]\n"
    assert sorted(p.name for p in (ws / ".git/hooks").iterdir()) == []


# --- 8. What it leaves running ends with its task ---------------------------------------------------------------


async def test_what_an_agent_started_outside_its_process_group_ends_with_its_task(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "daemons\nsay done", "Daemons", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid, tid = await run_task(conn, ama, "")
            assert finals(conn, sid)[tid]["status"] == "completed"
            assert "daemons started" in tool_messages(llm.requests[1].body)[0][1]
            assert len(pids_of(pids)) == 3  # the agent, `setsid sleep`, the double-forked daemon
            assert all_gone(pids)


async def test_what_an_agent_started_outside_its_process_group_ends_with_ama(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", "daemons\nwait", "Daemons", "ext")]})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.start_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            await conn.wait_for(lambda: len(pids_of(pids)) == 3, timeout=20)
        # The editor hung up (ama's stdin ended) and ama is gone: so is everything the agent started.
        assert all_gone(pids)


# --- 9. One question at a time, named by its kind ---------------------------------------------------------------


async def test_an_agent_asks_one_question_at_a_time_and_a_flood_of_them_is_refused(tmp_path):
    ama = Ama(tmp_path)
    count = MAX_WAITING + 20
    refusals = count - 1 - MAX_WAITING  # one open, MAX_WAITING waiting, the rest refused at once
    open_now = [0]
    most = [0]
    asked: list[dict[str, Any]] = []
    pids: Path | None = None

    async def person(params: dict[str, Any]) -> str:
        asked.append(params)
        open_now[0] += 1
        most[0] = max(most[0], open_now[0])
        try:
            if len(asked) == 1:  # the first dialog stays open until every refusal reached the agent, or a second opens
                assert pids is not None
                seen = pids
                await comes_true_within(lambda: events_of(seen).count("refused") >= refusals or open_now[0] > 1, 15)
            return "yes"
        finally:
            open_now[0] -= 1

    directives = f"permissions {count}\nsay done"
    with LLMServer() as llm:
        pids = external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Ask", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=person)) as conn:
            await run_task(conn, ama, directives, mode="manual")
            result = tool_messages(llm.requests[1].body)[0][1]
    assert most[0] == 1, f"{most[0]} questions of one agent were open at once"
    assert len(asked) == 1 + MAX_WAITING
    line = next(x for x in result.splitlines() if x.startswith("permissions: "))
    outcomes = json.loads(line.removeprefix("permissions: "))
    refused = f"error -32010 Refused: {MAX_WAITING} requests of this agent already wait for the person"
    assert outcomes["yes"] == 1 + MAX_WAITING
    assert sum(n for k, n in outcomes.items() if k.startswith(refused)) == refusals, outcomes


async def test_the_options_shown_are_named_by_their_kind_not_by_the_agent(tmp_path):
    ama = Ama(tmp_path)
    directives = "mislabeled execute Run make\nsay done"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Ask", "ext")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            await run_task(conn, ama, directives, mode="manual")
            [(params, outcome)] = permission_asks(conn)
            result = tool_messages(llm.requests[1].body)[0][1]
    # The agent named its allow option "Reject" and its reject option "Allow": the person sees what each does.
    assert [(o["optionId"], o["name"], o["kind"]) for o in params["options"]] == [
        ("go", "Allow once", "allow_once"),
        ("stop", "Reject once", "reject_once"),
    ]
    assert outcome == {"outcome": "selected", "optionId": "stop"} and "permission: stop" in result


# --- 12. A cost no task can have is not believed ----------------------------------------------------------------


@pytest.mark.parametrize("subagents", [False, True])
async def test_an_absurd_reported_cost_is_unknown_and_the_person_is_told(tmp_path, subagents):
    ama = Ama(tmp_path)
    directives = "usage 10 1000 0.5\nusage 20 1000 1e9\nsay done"
    with LLMServer() as llm:
        external(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [task_call("t1", directives, "Costly", "ext")]}, {"text": "ok"})
        caps: dict[str, Any] = {"subagents": {}} if subagents else {}
        options = ClientOptions(notices=True, extra_capabilities=caps)
        async with run_ama(ama, env=KEY, options=options) as conn:
            sid, _ = await run_task(conn, ama, directives)
            s = await stats(conn, sid)
            told = notices(conn, sid)
            [task] = s["tasks"]
            assert "cost" not in task and "cost" not in s  # unknown: never $1e9 added to the session's cost
            assert len([t for t in told if f"past ${MAX_TASK_COST_USD:,.0f}" in t]) == 1, told
            if subagents:  # the editor is not shown it either; the believable one before it is
                task_sid = subagent_updates(conn, sid)[0]["sessionId"]
                shown = [u.get("cost") for u in conn.updates_for(task_sid, "usage_update")]
                assert shown == [{"amount": 0.5, "currency": "USD"}, None], shown
