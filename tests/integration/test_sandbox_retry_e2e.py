"""One run outside the sandbox (issue 38: "the person can allow one retry outside it"), over real pipes: ama's
client, the model server on 127.0.0.1 scripting `run_command` with `outside_sandbox`, and the person's answers
(docs/tools.md "The sandbox").

Skipped where the kernel has no Landlock, but for the test of a sandbox that is off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.handlers import PermissionPolicy
from ama_acp.sandbox import kernel_abi
from tests.integration.test_cancel_e2e import KEY, finish_and_check, prompt, start
from tests.integration.test_permissions_e2e import final_text, finals, tool_message
from tests.integration.test_tasks_e2e import task_call, task_id
from tests.support.harness import Ama, local_config, permission_asks, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ABI, WHY = kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")

UNCONFINED_TITLE = "outside the sandbox, with your full rights"


def configure(ama: Ama, url: str, tail: str = "") -> None:
    ama.config.write_text(local_config(url, tail=tail))


def command(cid: str, line: str, outside: object = None) -> dict[str, Any]:
    args: dict[str, Any] = {"command": line}
    if outside is not None:
        args["outside_sandbox"] = outside
    return {"tool_calls": [{"id": cid, "name": "run_command", "arguments": args}]}


def write_outside(target: Path) -> str:
    return f"echo out > {target} && echo wrote-it"


def client(permission: PermissionPolicy, terminal: bool = False) -> ClientOptions:
    """Without terminals ama runs the commands itself, in its sandbox."""
    return ClientOptions(fs=terminal, terminal=terminal, permission=permission)


def asked(conn: AgentProcess) -> list[dict[str, Any]]:
    """The tool calls the person was asked about."""
    return [params["toolCall"] for params, _ in permission_asks(conn)]


async def one_turn(
    ama: Ama, options: ClientOptions, mode: str | None, process: bool = False
) -> tuple[AgentProcess, str]:
    """A session in `mode`, prompted once (`process`: in a real `ama --mode acp`); the connection (closed) and the
    session id."""
    async with run_ama(ama, env=KEY, options=options, process=process) as conn:
        sid = await start(conn, ama, mode)
        assert (await conn.prompt(sid, "go", timeout=30))["stopReason"] == "end_turn"
    return conn, sid


@needs_landlock
async def test_a_blocked_write_is_retried_outside_the_sandbox_once_the_person_allows_it(tmp_path):
    """In Full access: the first run is not asked (and the sandbox stops it), the retry is."""
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command("c1", write_outside(target)), command("c2", write_outside(target), True), {"text": "done"})
        conn, sid = await one_turn(ama, client("allow_once"), "full_access", process=True)
        first = tool_message(llm.requests[1].body, "c1")
        assert "Permission denied" in first and "wrote-it" not in first
        assert "[Writes outside the workspace" in first and "are blocked by ama's sandbox" in first
        assert "`outside_sandbox: true`" in first  # the model is told the way past it
        [question] = permission_asks(conn)
        call = question[0]["toolCall"]
        assert call["toolCallId"] == "c2" and call["title"].endswith(UNCONFINED_TITLE)
        texts = [c["content"]["text"] for c in call["content"]]
        assert "OUTSIDE ama's sandbox, once, with your full rights" in texts[0] and write_outside(target) in texts[1]
        # Allow once and reject only: nothing to remember, no rule to write.
        assert [(o["optionId"], o["kind"]) for o in question[0]["options"]] == [
            ("allow_once", "allow_once"),
            ("reject_once", "reject_once"),
        ]
        assert finals(conn, sid)["c2"]["status"] == "completed"
        assert "wrote-it" in tool_message(llm.requests[2].body, "c2")
    assert target.read_text() == "out\n"
    assert not (ama.data / "permissions").exists()


@needs_landlock
async def test_a_rejected_retry_does_not_run_and_the_model_is_told_the_person_declined(tmp_path):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command("c1", write_outside(target), True), {"text": "ok"})
        conn, sid = await one_turn(ama, client("reject_once"), "full_access")
        final = finals(conn, sid)["c1"]
        assert (
            final["status"] == "failed" and final_text(final) == "Not run: you declined to run it outside the sandbox."
        )
        said = tool_message(llm.requests[-1].body, "c1")
        assert said.startswith("The user declined to run this command outside the sandbox; it did not run.")
    assert not target.exists()


@needs_landlock
@pytest.mark.parametrize(
    ("mode", "refused"), [("read_only", "Read only mode"), ("plan", "Plan mode")], ids=["read_only", "plan"]
)
async def test_read_only_and_plan_refuse_it_without_asking(tmp_path, mode, refused):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command("c1", write_outside(target), True), {"text": "ok"})
        conn, sid = await one_turn(ama, client("allow_once"), mode)
        assert asked(conn) == []
        assert refused in final_text(finals(conn, sid)["c1"])
    assert not target.exists()


@needs_landlock
async def test_a_deny_rule_refuses_it_and_an_allow_rule_does_not_skip_the_question(tmp_path):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url, '[permissions]\nallow = ["run_command"]\ndeny = ["run_command(touch *)"]\n')
        llm.enqueue(command("c1", f"touch {target}", True), command("c2", write_outside(target), True), {"text": "ok"})
        conn, sid = await one_turn(ama, client("allow_once"), "full_access")
        done = finals(conn, sid)
        assert done["c1"]["status"] == "failed" and "permission rule denies" in final_text(done["c1"])
        # `run_command` is allowed by a rule, yet the run outside the sandbox is asked.
        assert [c["toolCallId"] for c in asked(conn)] == ["c2"]
        assert done["c2"]["status"] == "completed"
    assert target.read_text() == "out\n"


@needs_landlock
async def test_a_flag_that_is_not_a_boolean_is_an_error_of_the_call(tmp_path):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command("c1", write_outside(target), "true"), {"text": "ok"})
        conn, sid = await one_turn(ama, client("allow_once"), "full_access")
        assert asked(conn) == []
        said = tool_message(llm.requests[-1].body, "c1")
        assert said == "Argument `outside_sandbox` must be the JSON value true or false, not 'true'."
    assert not target.exists()


async def test_with_the_sandbox_off_the_flag_changes_nothing(tmp_path):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url, '[sandbox]\nmode = "off"\n')
        llm.enqueue(command("c1", write_outside(target), True), command("c2", "echo hi", True), {"text": "ok"})
        asks: list[dict[str, Any]] = []

        def person(params: dict[str, Any]) -> str:
            asks.append(params)
            return "allow_once"

        conn, sid = await one_turn(ama, client(person), "manual")
        # The question any command gets in Manual: four options, no word of a sandbox.
        assert [len(p["options"]) for p in asks] == [4, 4]
        assert all(UNCONFINED_TITLE not in p["toolCall"]["title"] for p in asks)
        assert finals(conn, sid)["c1"]["status"] == "completed"
    assert target.read_text() == "out\n"


@needs_landlock
async def test_a_cancel_while_the_question_is_open_runs_nothing(tmp_path):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    asking = anyio.Event()

    async def hold(params: dict[str, Any]) -> Any:
        asking.set()
        await anyio.sleep_forever()  # the person never clicks; conn.cancel() answers `cancelled`

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command("c1", write_outside(target), True))
        async with run_ama(ama, env=KEY, options=client(hold)) as conn:
            sid = await start(conn, ama, "full_access")
            pending = await prompt(conn, sid)
            with anyio.fail_after(15):
                await asking.wait()
            await conn.cancel(sid)
            await finish_and_check(conn, llm, sid, pending)
            assert [o for _, o in conn.permission_log] == [{"outcome": "cancelled"}]
    assert not target.exists()


@needs_landlock
async def test_a_tasks_retry_asks_the_person_as_the_parents_calls_do(tmp_path):
    ama = Ama(tmp_path)
    target = tmp_path / "outside.txt"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Write outside", "Write a file")]},
            command("c1", write_outside(target), True),
            {"text": "wrote it"},
            {"text": "done"},
        )
        conn, sid = await one_turn(ama, client("allow_once"), "full_access")
        tid = task_id(conn, sid)
        [call] = asked(conn)
        assert call["toolCallId"].startswith(tid + ".") and call["title"].endswith(UNCONFINED_TITLE)
        assert [params["sessionId"] for params, _ in permission_asks(conn)] == [sid]
    assert target.read_text() == "out\n"


@needs_landlock
async def test_with_the_editors_terminal_the_retry_is_asked_and_runs_there(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(command("c1", "echo in > inside.txt && echo wrote-it", True), {"text": "ok"})
        conn, sid = await one_turn(ama, client("allow_once", terminal=True), "full_access")
        [call] = asked(conn)
        assert call["title"].endswith(UNCONFINED_TITLE)
        assert any(
            c.get("type") == "terminal"
            for u in conn.updates_for(sid, "tool_call_update")
            for c in u.get("content") or []
        )
        assert "wrote-it" in tool_message(llm.requests[-1].body, "c1")
    assert (ama.workspace / "inside.txt").read_text() == "in\n"
