"""Permission rules that stick (docs/tools.md "Permission rules"), over real pipes: ama's client, the scripted
model server, `[permissions]` in the config and the project's rule file in ama's data dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_cancel_e2e import KEY, start
from tests.integration.test_permissions_e2e import final_text, finals
from tests.support.harness import Ama, agent_text, local_config, permission_asks, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


def configure(ama: Ama, url: str, rules: str) -> None:
    ama.config.write_text(local_config(url, tail="[permissions]\n" + rules + "\n"))


def command(cid: str, line: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": "run_command", "arguments": {"command": line}}]}


def asked_ids(conn: AgentProcess) -> list[str]:
    return [params["toolCall"]["toolCallId"] for params, _ in permission_asks(conn)]


async def test_a_deny_rule_holds_in_full_access_for_any_part_of_a_line(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "keep.txt").write_text("x")
    with LLMServer() as llm:
        configure(ama, llm.openai_url, 'deny = ["run_command(rm *)"]')
        llm.enqueue(command("c1", "echo hi && rm -f keep.txt"), {"text": "ok"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            final = finals(conn, sid)["c1"]
            assert final["status"] == "failed", final
            assert "permission rule denies" in final_text(final) and "rm *" in final_text(final)
            assert asked_ids(conn) == []
    assert (ama.workspace / "keep.txt").exists()


async def test_an_allow_rule_skips_the_question_but_not_for_a_compound_line(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, 'allow = ["run_command(echo *)"]')
        llm.enqueue(
            command("c1", "echo allowed"),
            command("c2", "echo hi && touch made.txt"),
            command("c3", "echo $(touch made.txt)"),
            {"text": "ok"},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)  # manual: a command asks
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            done = finals(conn, sid)
            assert done["c1"]["status"] == "completed", done["c1"]
            assert asked_ids(conn) == ["c2", "c3"]  # asked, and rejected: not run
    assert not (ama.workspace / "made.txt").exists()


async def test_always_allow_writes_a_project_rule_that_holds_in_the_next_process(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, "")
        llm.enqueue(command("c1", "echo status --short"), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="allow_always"), process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            [(params, _)] = permission_asks(conn)
            names = {o["optionId"]: o["name"] for o in params["options"]}
            assert names["allow_always"] == "Always allow `echo status …` in this project"
        [rule_file] = (ama.data / "permissions").iterdir()
        assert 'allow = [\n  "run_command(echo status *)",\n]' in rule_file.read_text()

        llm.enqueue(command("c2", "echo status"), command("c3", "echo push"), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once"), process=True) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert asked_ids(conn) == ["c3"]  # `echo status`: by the rule; `echo push`: asked
            assert finals(conn, sid)["c2"]["status"] == "completed"

            assert (await conn.prompt(sid, "/permissions", timeout=10))["stopReason"] == "end_turn"
            listing = agent_text(conn, sid)
            assert "1. allow `run_command(echo status *)` — this project line 4" in listing, listing
            assert (await conn.prompt(sid, "/permissions remove 1", timeout=10))["stopReason"] == "end_turn"
            assert "Removed `run_command(echo status *)`." in agent_text(conn, sid)
    assert "echo status" not in rule_file.read_text()


async def test_a_malformed_rule_is_reported_with_its_line_and_the_others_apply(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, 'allow = [\n  "run_command(echo $(id))",\n  "run_command(echo *)",\n]')
        llm.enqueue(command("c1", "echo fine"), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert asked_ids(conn) == [] and finals(conn, sid)["c1"]["status"] == "completed"
            assert (await conn.prompt(sid, "/permissions", timeout=10))["stopReason"] == "end_turn"
            listing = agent_text(conn, sid)
    line = ama.config.read_text().split("\n").index('  "run_command(echo $(id))",') + 1
    reported = f"{ama.config} (line {line}): the allow rule 'run_command(echo $(id))' is ignored"
    assert reported in listing, listing
    assert reported in ama.stderr.read_text()
    assert f"1. allow `run_command(echo *)` — config.toml line {line + 1}" in listing


def tool(cid: str, name: str, **arguments: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": name, "arguments": arguments}]}


async def test_path_rules_match_the_path_and_the_real_path_behind_a_link(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    secret = tmp_path / "secrets"
    secret.mkdir()
    (secret / "key").write_text("k")
    (ama.workspace / "src").mkdir()
    (ama.workspace / "src" / "key").symlink_to(secret / "key")
    with LLMServer() as llm:
        configure(ama, llm.openai_url, f'allow = ["write_file(src/**)"]\ndeny = ["read_file({secret}/**)"]')
        llm.enqueue(
            tool("w1", "write_file", path="src/new.txt", content="x\n"),
            tool("w2", "write_file", path="other.txt", content="x\n"),
            tool("r1", "read_file", path="src/key"),
            {"text": "ok"},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            done = finals(conn, sid)
            assert done["w1"]["status"] == "completed", done["w1"]
            assert asked_ids(conn) == ["w2"]
            assert done["r1"]["status"] == "failed" and "permission rule denies" in final_text(done["r1"])
    assert (ama.workspace / "src" / "new.txt").exists() and not (ama.workspace / "other.txt").exists()


async def test_an_ask_rule_asks_even_in_full_access(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url, 'allow = ["run_command"]\nask = ["run_command(touch *)"]')
        llm.enqueue(command("c1", "echo a"), command("c2", "echo b; touch made.txt"), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama, "full_access")
            assert (await conn.prompt(sid, "go", timeout=20))["stopReason"] == "end_turn"
            assert asked_ids(conn) == ["c2"] and finals(conn, sid)["c1"]["status"] == "completed"
    assert not (ama.workspace / "made.txt").exists()
