"""Permission requests a person can judge, answers decoded before they are believed, over real pipes."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.handlers import RpcError
from tests.integration.test_cancel_e2e import KEY, configure, dangling, open_calls, start
from tests.support.harness import Ama, permission_asks, run_ama
from tests.support.json_values import as_object, as_str
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio


def finals(conn: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    return {
        u["toolCallId"]: u
        for u in conn.updates_for(sid, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    }


def final_text(update: dict[str, Any]) -> str:
    return as_str(update["content"][-1]["content"]["text"])


def tool_message(body: dict[str, Any], call_id: str) -> str:
    return as_str(
        next(m["content"] for m in body["messages"] if m.get("role") == "tool" and m["tool_call_id"] == call_id)
    )


def write_call(cid: str = "w1", path: str = "out.txt") -> dict[str, Any]:
    return {"tool_calls": [{"id": cid, "name": "write_file", "arguments": {"path": path, "content": "new\n"}}]}


@pytest.mark.parametrize(
    "answer",
    [
        "yes",
        [1, 2],
        None,
        {},
        {"outcome": "selected"},
        {"outcome": {"outcome": "selected"}},
        {"outcome": {"outcome": "selected", "optionId": "make_it_so"}},
        {"outcome": {"outcome": "selected", "optionId": 3}},
        {"outcome": {"outcome": "maybe"}},
    ],
    ids=["string", "list", "null", "empty", "string-outcome", "no-option", "unknown-option", "int-option", "unknown"],
)
async def test_a_malformed_answer_is_a_rejection_and_the_turn_goes_on(tmp_path, answer):
    ama = Ama(tmp_path)

    async def malformed(params: dict[str, Any]) -> Any:
        return answer

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(write_call(), {"text": "understood"})
        # validate=False: the client's own answers are malformed on purpose
        async with run_ama(ama, env=KEY, validate=False) as conn:
            conn.set_handler("session/request_permission", malformed)
            sid = await start(conn, ama)
            result = await conn.prompt(sid, "go", timeout=15)
            assert result["stopReason"] == "end_turn"
            final = finals(conn, sid)["w1"]
            assert final["status"] == "failed" and "not understood" in final_text(final)
            assert "not understood" in tool_message(llm.requests[-1].body, "w1")
            assert not (ama.workspace / "out.txt").exists()
            assert open_calls(conn, sid) == []


async def test_switching_to_read_only_while_asked_stops_a_later_allow(tmp_path):
    ama = Ama(tmp_path)
    asked = anyio.Event()
    click = anyio.Event()

    async def slow_person(params: dict[str, Any]) -> str:
        asked.set()
        await click.wait()
        return "allow_once"

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(write_call(), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission=slow_person)) as conn:
            sid = await start(conn, ama)
            pending = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            )
            with anyio.fail_after(10):
                await asked.wait()
            await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
            click.set()
            assert as_object(await pending.wait(timeout=15))["stopReason"] == "end_turn"
            final = finals(conn, sid)["w1"]
            assert final["status"] == "failed" and "Read only" in final_text(final)
            assert not (ama.workspace / "out.txt").exists()


async def test_always_allow_outside_does_not_cover_a_symlink_out_of_that_directory(tmp_path):
    ama = Ama(tmp_path)
    outside = tmp_path / "notes"
    outside.mkdir()
    (outside / "a.txt").write_text("a\n")
    (outside / "b.txt").write_text("b\n")
    secret = tmp_path / "ssh" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("PRIVATE-KEY-MATERIAL\n")
    os.symlink(secret, outside / "key")
    answers = iter(["allow_always", "reject_once"])

    def person(params: dict[str, Any]) -> str:
        return next(answers)

    def read(cid: str, path: str) -> dict[str, Any]:
        return {"tool_calls": [{"id": cid, "name": "read_file", "arguments": {"path": str(path)}}]}

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(read("r1", outside / "a.txt"), read("r2", outside / "b.txt"), read("r3", outside / "key"))
        llm.enqueue({"text": "done"})
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=False, terminal=False, permission=person)) as conn:
            sid = await start(conn, ama)
            assert (await conn.prompt(sid, "go", timeout=15))["stopReason"] == "end_turn"
            asked = [p["toolCall"]["toolCallId"] for p, _ in permission_asks(conn)]
            assert asked == ["r1", "r3"]  # b.txt is covered by "always"; the symlink out of it is not
            assert str(secret) in permission_asks(conn)[1][0]["toolCall"]["title"]  # the real target is named
            f = finals(conn, sid)
            assert f["r2"]["status"] == "completed" and f["r3"]["status"] == "failed"
            assert "PRIVATE-KEY-MATERIAL" not in str(llm.requests[-1].body)


async def test_the_request_shows_the_whole_command_and_a_rejection_reads_for_the_person(tmp_path):
    ama = Ama(tmp_path)
    command = "echo " + "harmless-looking " * 8 + "&& rm -rf ./important-directory"
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command}}]})
        llm.enqueue({"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "go", timeout=15)
            ((params, _),) = permission_asks(conn)
            texts = [c["content"]["text"] for c in params["toolCall"]["content"] if c["type"] == "content"]
            assert any(command in t for t in texts)
            final = finals(conn, sid)["c1"]
            assert final_text(final) == "You rejected this call."
            assert "Do not retry it" in tool_message(llm.requests[-1].body, "c1")


async def test_an_edit_request_carries_the_diff_it_would_apply(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "app.py").write_text("x = 1\ny = 2\n")
    edit = {"path": "app.py", "edits": [{"old_text": "x = 1", "new_text": "x = 10"}]}
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [{"id": "e1", "name": "edit_file", "arguments": edit}]},
            write_call("w1", "fresh.txt"),
            {"text": "ok"},
        )
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "go", timeout=15)
            diffs = [[c for c in p["toolCall"]["content"] if c["type"] == "diff"] for p, _ in permission_asks(conn)]
            assert diffs[0] == [
                {
                    "type": "diff",
                    "path": str(ama.workspace / "app.py"),
                    "oldText": "x = 1\ny = 2\n",
                    "newText": "x = 10\ny = 2\n",
                }
            ]
            assert diffs[1] == [
                {"type": "diff", "path": str(ama.workspace / "fresh.txt"), "oldText": None, "newText": "new\n"}
            ]
            assert (ama.workspace / "app.py").read_text() == "x = 1\ny = 2\n"  # the preview wrote nothing


async def test_an_editor_error_reaches_the_person_with_its_message(tmp_path):
    ama = Ama(tmp_path)

    async def locked(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError(-32603, "The file is locked by another editor window")

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(write_call(), {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(fs=True, terminal=False)) as conn:
            conn.set_handler("fs/write_text_file", locked)
            sid = await start(conn, ama, "accept_edits")
            await conn.prompt(sid, "go", timeout=15)
            text = final_text(finals(conn, sid)["w1"])
            assert "The file is locked by another editor window" in text
            assert "ClientError" not in text and "Internal error" not in text
            assert dangling(llm.requests[-1].body) == []


async def test_an_edit_preview_reads_the_arguments_as_the_tool_will(tmp_path):
    """The approval's diff is the edit that will run: `replace_all` given as the string "false" is false for the
    tool (which then refuses a text found twice), so the preview shows no diff; "true" shows every occurrence."""
    ama = Ama(tmp_path)
    (ama.workspace / "app.py").write_text("a = 1\na = 1\n")

    def edit(cid: str, flag: str) -> dict[str, Any]:
        args = {"path": "app.py", "edits": [{"old_text": "a = 1", "new_text": "a = 2", "replace_all": flag}]}
        return {"id": cid, "name": "edit_file", "arguments": args}

    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"tool_calls": [edit("f1", "false"), edit("t1", "true")]}, {"text": "ok"})
        async with run_ama(ama, env=KEY, options=ClientOptions(permission="reject_once")) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "go", timeout=15)
            diffs = {
                p["toolCall"]["toolCallId"]: [c for c in p["toolCall"].get("content") or [] if c["type"] == "diff"]
                for p, _ in permission_asks(conn)
            }
            assert diffs["f1"] == []  # the tool would refuse it: nothing to preview
            assert [d["newText"] for d in diffs["t1"]] == ["a = 2\na = 2\n"]
