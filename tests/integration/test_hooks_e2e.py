"""The person's `[[hooks]]` (docs/commands.md "Hooks") over real pipes: a real `ama --mode acp` process, ama's
own client, the scripted model server, and real hook processes whose effects the tests read from disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.tools.proctree import proc_pids, stat_fields
from tests.integration.test_cancel_e2e import KEY, dangling, finish_and_check, prompt, start
from tests.integration.test_permissions_e2e import final_text, finals, tool_message
from tests.integration.test_tasks_e2e import task_call
from tests.support.harness import Ama, agent_text, clean_env, local_config, run_ama, usage_updates
from tests.support.llm_server import LLMServer
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

# A pre_tool hook: a command that mentions "forbidden" is refused, with the reason on stderr.
GUARD = """
import json, sys
call = json.load(sys.stdin)
if "forbidden" in json.dumps(call["tool_input"]):
    sys.stderr.write("forbidden commands are not run here")
    sys.exit(2)
"""
# Appends what it got on stdin, as one line, to the file named by its argument.
RECORD = """
import sys
with open(sys.argv[1], "a", encoding="utf-8") as f:
    f.write(sys.stdin.read().replace("\\n", " ") + "\\n")
"""
# prompt_submit: says what the prompt was, as context.
ECHO_PROMPT = """
import json, sys
print("the hook saw the prompt:", json.load(sys.stdin)["prompt"])
"""


def script(ama: Ama, name: str, body: str, *args: str) -> str:
    """A hook that runs a Python file: the TOML of its `command` (a program and its arguments)."""
    path = ama.tmp / f"{name}.py"
    path.write_text(body, encoding="utf-8")
    return json.dumps([sys.executable, str(path), *args])


def hook(event: str, command: str, *, match: str | None = None, timeout: float | None = None) -> str:
    lines = ["[[hooks]]", f'event = "{event}"', f"command = {command}"]
    if match is not None:
        lines.append(f'match = "{match}"')
    if timeout is not None:
        lines.append(f"timeout = {timeout}")
    return "\n".join(lines) + "\n"


def configure(ama: Ama, url: str, *hooks: str) -> None:
    ama.config.write_text(local_config(url, tail="\n" + "\n".join(hooks)))


def command(cid: str, line: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": "run_command", "arguments": {"command": line}}]}


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def last_user_text(body: dict[str, Any]) -> str:
    message = [m for m in body["messages"] if m.get("role") == "user"][-1]
    content = message["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def group_gone(pgid: int) -> bool:
    """No live process left in the group (a zombie an init never reaps holds nothing)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    for pid in proc_pids() or []:
        fields = stat_fields(pid)
        if fields is not None and len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            return False
    return True


async def test_a_pre_tool_hook_blocks_and_a_post_tool_hook_sees_the_result(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    seen = tmp_path / "post.jsonl"
    with LLMServer() as llm:
        guard = hook("pre_tool", script(ama, "guard", GUARD), match="run_*")
        configure(
            ama, llm.openai_url, guard, hook("post_tool", script(ama, "rec", RECORD, str(seen)), match="run_command")
        )
        llm.enqueue(command("c1", "touch forbidden.txt"), command("c2", "echo hello-hooks"), {"text": "ok"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            done = finals(conn, sid)
            assert done["c1"]["status"] == "failed"
            assert "blocked by the person's pre_tool hook" in final_text(done["c1"])  # the person sees the hook
            assert done["c2"]["status"] == "completed"  # exit 0: the call runs
    assert not (ama.workspace / "forbidden.txt").exists()
    assert tool_message(llm.requests[1].body, "c1").startswith("forbidden commands are not run here")
    [after] = records(seen)  # the blocked call never ran: only c2's result
    assert after["event"] == "post_tool" and after["tool_name"] == "run_command" and after["session_id"] == sid
    assert after["tool_input"] == {"command": "echo hello-hooks"} and "hello-hooks" in after["tool_result"]["text"]


async def test_start_and_prompt_hooks_add_context_and_stop_runs_at_the_turns_end(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    stops = tmp_path / "stop.jsonl"
    with LLMServer() as llm:
        configure(
            ama,
            llm.openai_url,
            hook("session_start", '"echo started-by-a-hook for $AMA_HOOK_EVENT"'),
            hook("prompt_submit", script(ama, "echo", ECHO_PROMPT)),
            hook("prompt_submit", script(ama, "bulk", "print('bulk ' * 3000)")),
            hook("stop", script(ama, "rec", RECORD, str(stops))),
        )
        llm.enqueue({"text": "one", "usage": None}, {"text": "two"})  # no usage: the meter estimates
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "hello there", timeout=30))["stopReason"] == "end_turn"
            assert [r["stop_reason"] for r in records(stops)] == ["end_turn"]  # before the prompt's answer
            used = usage_updates(conn, sid)[-1]["used"]
            assert (await conn.prompt(sid, "again", timeout=30))["stopReason"] == "end_turn"
    first, second = (last_user_text(r.body) for r in llm.requests)
    assert first.startswith("hello there") and "started-by-a-hook for session_start" in first
    assert "the hook saw the prompt: hello there" in first
    assert used > 3000  # the meter counts what the hooks added (3,000 words of it)
    assert "started-by-a-hook" not in second and "the hook saw the prompt: again" in second  # the start: once
    assert [r["session_id"] for r in records(stops)] == [sid, sid]


async def test_a_prompt_submit_hook_that_exits_2_keeps_the_prompt_from_the_model(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, hook("prompt_submit", '"echo no prompts today >&2; exit 2"'))
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "secret plans", timeout=30))["stopReason"] == "end_turn"
            said = agent_text(conn, sid)
    assert llm.requests == []
    assert "Your prompt was not sent" in said and "no prompts today" in said


async def test_a_hanging_hook_is_ended_at_its_timeout_with_its_group_and_things_go_on(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    pgid_file = tmp_path / "pgid"
    with LLMServer() as llm:
        hang = f'"echo $$ > {pgid_file}; sleep 600 & sleep 600"'
        configure(ama, llm.openai_url, hook("pre_tool", hang, match="run_command", timeout=1))
        llm.enqueue(command("c1", "echo still-runs"), {"text": "ok"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            assert finals(conn, sid)["c1"]["status"] == "completed"
            said = agent_text(conn, sid)
    assert "was ended at its timeout (1 s)" in said
    pgid = int(pgid_file.read_text())
    assert poll_until(lambda: group_gone(pgid), 5, "the hook's process group gone")


async def test_a_hooks_huge_output_is_bounded(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    loud = "import sys\nsys.stdout.write('o' * 5_000_000)\nsys.stderr.write('e' * 5_000_000)\n"
    with LLMServer() as llm:
        configure(ama, llm.openai_url, hook("prompt_submit", script(ama, "loud", loud)))
        llm.enqueue({"text": "ok"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
    text = last_user_text(llm.requests[0].body)
    assert '<hook_context event="prompt_submit">' in text and "chars]" in text
    assert 32_000 < len(text) < 33_000


async def test_a_malformed_hook_is_reported_with_its_line_and_the_others_work(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        bad = hook("pre_tol", '"true"')
        configure(ama, llm.openai_url, bad, hook("prompt_submit", '"echo the good hook ran"'))
        llm.enqueue({"text": "ok"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
            said = agent_text(conn, sid)
    line = ama.config.read_text().split("\n").index('event = "pre_tol"')  # the header is the line before
    reported = f"{ama.config} (line {line}): the hook is ignored: event must be one of"
    assert reported in ama.stderr.read_text() and reported in said
    assert "the good hook ran" in last_user_text(llm.requests[0].body)


async def test_a_hook_acts_on_a_tool_call_of_a_task(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, hook("pre_tool", script(ama, "guard", GUARD), match="run_command"))
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Make the file", "make it")]},
            command("k1", "touch forbidden.txt"),  # the task's own call
            {"text": "could not"},
            {"text": "done"},
        )
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
    assert not (ama.workspace / "forbidden.txt").exists()
    child = llm.requests[2].body
    assert tool_message(child, "k1").startswith("forbidden commands are not run here")


async def test_a_cancel_ends_a_running_hook_and_its_group(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    pgid_file = tmp_path / "pgid"
    with LLMServer() as llm:
        hang = f'"echo $$ > {pgid_file}.tmp; mv {pgid_file}.tmp {pgid_file}; sleep 600"'
        configure(ama, llm.openai_url, hook("pre_tool", hang, timeout=300))
        llm.enqueue(command("c1", "touch made.txt"))
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama, "full_access")
            pending = await prompt(conn, sid)
            await anyio.to_thread.run_sync(poll_until, pgid_file.exists, 20, "the hook running")
            pgid = int(pgid_file.read_text())
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)
            assert group_gone(pgid) or poll_until(lambda: group_gone(pgid), 5, "the hook's group gone")
    assert not (ama.workspace / "made.txt").exists()
    assert dangling(llm.requests[-1].body) == []


async def test_session_start_runs_for_a_new_session_and_again_for_one_loaded(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    starts = tmp_path / "start.jsonl"
    with LLMServer() as llm:
        configure(ama, llm.openai_url, hook("session_start", script(ama, "rec", RECORD, str(starts))))
        llm.enqueue({"text": "one"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
        async with run_ama(ama, env=KEY, process=True) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await anyio.to_thread.run_sync(poll_until, lambda: len(records(starts)) == 2, 20, "the second start")
    assert [(r["source"], r["session_id"]) for r in records(starts)] == [("new", sid), ("load", sid)]


def test_ama_p_runs_the_hooks_too(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    stops = tmp_path / "stop.jsonl"
    with LLMServer() as llm:
        configure(
            ama,
            llm.openai_url,
            hook("prompt_submit", '"echo context from a hook"'),
            hook("stop", script(ama, "rec", RECORD, str(stops))),
        )
        llm.enqueue({"text": "answered"})
        out = subprocess.run(
            [sys.executable, "-m", "ama_acp", "-p", "hi", "--config", str(ama.config), "--data-dir", str(ama.data)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ama.workspace,
            env=clean_env(ama.tmp, KEY),
        )
    assert out.returncode == 0, out.stderr
    assert "answered" in out.stdout and "context from a hook" in last_user_text(llm.requests[0].body)
    assert [r["stop_reason"] for r in records(stops)] == ["end_turn"]
