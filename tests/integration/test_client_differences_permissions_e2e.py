"""What a permission request shows, as every client renders it (issue 25): an MCP tool's request carries its
arguments as content (pretty JSON, without the session's MCP secrets or key-shaped values, clipped with a
marker), as ama's own tools carry the command or the diff; and each "Always" option's name says what it covers
(commands or file edits in this project, or in the outside directory asked about; one MCP tool), its optionId
unchanged. Through the real `ama --mode acp`, ama's own client, a real MCP server over stdio."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from tests.integration.test_mcp_failures_e2e import KEY, call, configure, open_session, prompt, stdio, wait_ready
from tests.support.harness import Ama, permission_asks, run_ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV_TOKEN = "plain-env-value-7781-notes"  # the server's NOTES_TOKEN: registered as a secret of the session
KEY_SHAPED = "sk-abcdefghijklmnop1234"


def _asked(conn: Any) -> dict[str, dict[str, Any]]:
    return {p["toolCall"]["toolCallId"]: p for p, _ in permission_asks(conn)}


def _text(request: dict[str, Any]) -> str:
    content = request["toolCall"].get("content") or []
    return "\n".join(c["content"]["text"] for c in content if c.get("type") == "content")


def _names(request: dict[str, Any]) -> dict[str, str]:
    return {o["optionId"]: o["name"] for o in request["options"]}


async def test_mcp_requests_show_their_arguments_and_always_options_name_their_scope(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    server = stdio("notes", notes, env={"NOTES_TOKEN": ENV_TOKEN})
    long_text = "line of the note\n" * 600  # ~10 000 characters: clipped in the dialog
    with LLMServer() as llm:
        configure(ama, llm, top='mode = "manual"')
        llm.enqueue(
            {
                "tool_calls": [
                    call("n1", "mcp__notes__write_note", name="plan.md", text=f"use {ENV_TOKEN}", api_token="named-7"),
                    call("n3", "mcp__notes__write_note", name="key.md", text=KEY_SHAPED),
                    call("n2", "mcp__notes__write_note", name="long.md", text=long_text),
                    call("c1", "run_command", command="echo hi"),
                    call("e1", "write_file", path="new.txt", content="hello\n"),
                    call("o1", "write_file", path=str(outside / "x.txt"), content="there\n"),
                ]
            },
            {"text": "done"},
        )
        async with run_ama(ama, options=ClientOptions(permission="allow_once"), env=KEY) as conn:
            sid = await open_session(conn, ama, [server])
            await wait_ready(conn, sid, "notes")
            assert await prompt(conn, sid) == "end_turn"
            asked = _asked(conn)
            raw_inputs = {u["toolCallId"]: u.get("rawInput") for u in conn.updates_for(sid, "tool_call")}

    # rawInput, in the tool_call and in the permission request, is scrubbed like the dialog's text (MCP tools).
    for raw in (raw_inputs["n1"], asked["n1"]["toolCall"]["rawInput"]):
        assert raw == {"name": "plan.md", "text": "use [redacted]", "api_token": "[redacted]"}, raw
    assert KEY_SHAPED not in json.dumps(raw_inputs["n3"]) and KEY_SHAPED not in json.dumps(asked["n3"]["toolCall"])
    assert raw_inputs["c1"] == {"command": "echo hi"}  # ama's own tools: as the model wrote them

    assert set(asked) == {"n1", "n2", "n3", "c1", "e1", "o1"}, sorted(asked)
    # The MCP call's arguments, pretty, without the session's secret or the key-shaped value.
    shown = _text(asked["n1"])
    assert shown.startswith("```json\n") and shown.endswith("\n```"), shown
    assert json.loads(shown.removeprefix("```json\n").removesuffix("\n```")) == {
        "name": "plan.md",
        "text": "use [redacted]",  # the server's NOTES_TOKEN, inside other text
        "api_token": "[redacted]",  # a value under a secret-looking name, however short
    }
    assert "[redacted]" in _text(asked["n3"]) and KEY_SHAPED not in _text(asked["n3"])  # a key-shaped value
    assert '\n  "name": "plan.md"' in shown  # indented: one argument a line
    assert ENV_TOKEN not in shown
    # A long argument is clipped, and says so.
    long_shown = _text(asked["n2"])
    assert len(long_shown) < 4200 and "more characters not shown]" in long_shown
    assert '"name": "long.md"' in long_shown

    # "Always" says what it covers; the optionIds stay as they were.
    for request in asked.values():
        assert [o["optionId"] for o in request["options"]] == [
            "allow_once", "allow_always", "reject_once", "reject_always",
        ]  # fmt: skip
    # A command's "always" is a rule of the project, its program and subcommand (docs/tools.md "Permission rules").
    assert _names(asked["c1"])["allow_always"] == "Always allow `echo hi …` in this project"
    assert _names(asked["c1"])["reject_always"] == "Always reject commands in this project"
    assert _names(asked["e1"])["allow_always"] == "Always allow file edits in this project"
    assert _names(asked["o1"])["allow_always"] == f"Always allow file edits in {outside.resolve()}"
    assert _names(asked["n1"])["allow_always"] == "Always allow notes: write_note in this session"
    # ama's own command request still shows the command.
    assert _text(asked["c1"]).startswith("echo hi")
