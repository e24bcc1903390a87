"""An editor's MCP server's prompts as slash commands and its resources as tools, through the real `ama --mode acp`
(docs/commands.md "MCP prompts and resources", docs/tools.md "MCP resources"): the prompt in
`available_commands_update` with its hint, running it sends the prompt's messages to the model, a missing
argument is told and nothing is sent, a prompt added later is offered, the prompt still works after a
session/load, the resource tools list and read (bounded, counted by the meter), and servers that list thousands
of prompts, answer garbage or a 10 MB prompt stay bounded while the session goes on; with the features it meets:
a command file of the same name, the `prompt_submit` and `stop` hooks.

The server is tests/support/mcp_servers/prompt_server.py (standard library only; it logs each method received;
its `sdk` mode is the official SDK's server), the client ama's own over a real `ama --mode acp` process and, in
one test, the official ACP SDK's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.integration.test_mcp_failures_e2e import KEY, call, configure, open_session, tool_message
from tests.support.harness import Ama, agent_text, local_config, permission_asks, run_ama, usage_updates
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def prompt_server(name: str, log: Path, mode: str = "serve", *args: str) -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-S", "-m", "tests.support.mcp_servers.prompt_server", mode, *args],
        "env": [{"name": "PYTHONPATH", "value": str(ROOT)}, {"name": "PROMPT_SERVER_LOG", "value": str(log)}],
    }


def commands(conn: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    """The latest available_commands_update, by name."""
    updates = conn.updates_for(sid, "available_commands_update")
    return {c["name"]: c for c in updates[-1]["availableCommands"]} if updates else {}


async def offered(conn: AgentProcess, sid: str, name: str, timeout: float = 30) -> dict[str, Any]:
    await conn.wait_for(lambda: name in commands(conn, sid), timeout=timeout)
    return commands(conn, sid)[name]


def user_text(body: dict[str, Any]) -> str:
    """Every user message's text of a request (OpenAI's shape), joined."""
    out: list[str] = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        out.extend([content] if isinstance(content, str) else [p.get("text", "") for p in content])
    return "\n".join(out)


def methods(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


async def test_a_prompt_is_offered_with_its_hint_and_running_it_sends_its_messages(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    with LLMServer() as llm:
        configure(ama, llm)
        # No usage reported: the meter's own estimate, which counts the prompt's message.
        llm.enqueue({"text": "reviewed", "usage": None}, {"text": "greeted"}, {"text": "seen"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [prompt_server("notes", log)])
            review = await offered(conn, sid, "mcp__notes__review")
            assert review["description"] == "Review a file, with an optional focus."
            assert review["input"] == {"hint": "file [focus]"}
            assert commands(conn, sid)["mcp__notes__greet"].get("input") is None
            assert "context" in commands(conn, sid)  # ama's own commands are still there, first
            assert list(commands(conn, sid))[0] == "context"

            # A required argument missing: told, and neither the server nor the model is asked.
            result = await conn.prompt(sid, "/mcp__notes__review", timeout=30)
            assert result["stopReason"] == "end_turn"
            assert "needs `file`" in agent_text(conn, sid)
            assert llm.requests == [] and "prompts/get" not in methods(log)
            # An unclosed quote: the same.
            await conn.prompt(sid, '/mcp__notes__review "src/app.py', timeout=30)
            assert "Could not read the arguments" in agent_text(conn, sid)
            assert llm.requests == [] and "prompts/get" not in methods(log)

            # Positional, quotes group words, the words past the last argument join it.
            before = usage_updates(conn, sid)[-1]["used"]
            result = await conn.prompt(sid, '/mcp__notes__review "src/my app.py" security and speed', timeout=30)
            assert result["stopReason"] == "end_turn"
            assert "Review src/my app.py for security and speed." in user_text(llm.requests[0].body)
            assert "/mcp__notes__review" not in user_text(llm.requests[0].body)
            assert usage_updates(conn, sid)[-1]["used"] > before  # the meter counted the prompt's message

            # Two messages, one in the assistant's role: both reach the model as the person's turn.
            await conn.prompt(sid, "/mcp__notes__greet", timeout=30)
            said = user_text(llm.requests[1].body)
            assert "Hello from the prompt." in said and "Hi, I was told so." in said
            assert "assistant's message" in said

            # An image and an embedded resource.
            await conn.prompt(sid, "/mcp__notes__attach", timeout=30)
            last = llm.requests[2].body["messages"][-1]
            kinds = [p["type"] for p in last["content"]]
            assert "image_url" in kinds, last
            assert '<context uri="notes://readme">' in user_text(llm.requests[2].body)


async def test_resources_are_listed_and_read_bounded_in_read_only_mode_and_counted(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    with LLMServer() as llm:
        # A window large enough that the session's own fit to the window (agent/result_fit.py) leaves the read as
        # the resource tool bounded it.
        ama.config.write_text(local_config(llm.openai_url, window=1_000_000, top='mode = "read_only"'))
        llm.enqueue(
            {
                "tool_calls": [
                    call("l1", "list_mcp_resources"),
                    call("r1", "read_mcp_resource", server="notes", uri="notes://readme"),
                    call("r2", "read_mcp_resource", server="notes", uri="notes://big"),
                    call("r3", "read_mcp_resource", server="notes", uri="notes://logo"),
                    call("r4", "read_mcp_resource", server="notes", uri="notes://todo"),
                    call("r5", "read_mcp_resource", server="nobody", uri="notes://readme"),
                ]
            },
            {"text": "read them", "usage": None},  # no usage: the meter's own count of the results
        )
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [prompt_server("notes", log, "serve", "1")])
            await offered(conn, sid, "mcp__notes__review")
            assert (await conn.prompt(sid, "look", timeout=60))["stopReason"] == "end_turn"
            assert permission_asks(conn) == []  # reads: asked in no mode, refused in none
            first = llm.requests[0].body
            assert {"list_mcp_resources", "read_mcp_resource"} <= {t["function"]["name"] for t in first["tools"]}
            second = llm.requests[1].body
            listing = tool_message(second, "l1")
            assert "notes://readme — readme (text/plain): The notes." in listing
            assert "template notes://{name}" in listing
            assert tool_message(second, "r1") == "README NOTES: the project's notes."
            big = tool_message(second, "r2")
            assert len(big) < 101_000 and "more characters of the resource left out" in big
            assert "[image notes://logo (image/png)]" in json.dumps(second)
            assert "the note called todo" in tool_message(second, "r4")
            assert "not running or offers no resources" in tool_message(second, "r5")
            # The meter counted the results: the 100,000 characters read are about 25,000 tokens of its estimate.
            assert usage_updates(conn, sid)[-1]["used"] >= 20_000
            # And /context lists the resource tools' declarations with the server that brought them.
            await conn.prompt(sid, "/context", timeout=30)
            assert "| notes |" in agent_text(conn, sid)


async def test_a_prompt_added_later_is_offered_and_prompts_work_after_a_load(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    ws = str(ama.workspace.resolve())
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {"tool_calls": [call("a1", "mcp__notes__add_prompt", name="fresh")]},
            {"text": "added"},
            {"text": "fresh ran"},
            {"text": "after load"},
            {"text": "in a new process"},
        )
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [prompt_server("notes", log)])
            await offered(conn, sid, "mcp__notes__review")
            await conn.prompt(sid, "add one", timeout=60)  # add_prompt is not read-only: the client allows it
            fresh = await offered(conn, sid, "mcp__notes__fresh")
            assert fresh["description"] == "The added prompt fresh."
            await conn.prompt(sid, "/mcp__notes__fresh", timeout=30)
            assert "the added prompt fresh" in user_text(llm.requests[-1].body)

            await conn.request("session/close", {"sessionId": sid}, timeout=20)
            before = len(conn.updates_for(sid, "available_commands_update"))
            servers = [prompt_server("notes", log)]
            await conn.request("session/load", {"sessionId": sid, "cwd": ws, "mcpServers": servers}, timeout=20)
            await conn.wait_for(
                lambda: (
                    len(conn.updates_for(sid, "available_commands_update")) > before
                    and "mcp__notes__review" in commands(conn, sid)
                ),
                timeout=30,
            )
            result = await conn.prompt(sid, "/mcp__notes__review README.md", timeout=30)
            assert result["stopReason"] == "end_turn"
            assert "Review README.md for everything." in user_text(llm.requests[-1].body)
            # The loaded conversation carries the earlier prompt's messages too.
            assert "the added prompt fresh" in user_text(llm.requests[-1].body)

        # Another ama process, the server started anew: the prompt is offered and runs again.
        async with run_ama(ama, env=KEY, process=True) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": ws, "mcpServers": servers}, timeout=20)
            await offered(conn, sid, "mcp__notes__review")
            result = await conn.prompt(sid, "/mcp__notes__review setup.py tests", timeout=30)
            assert result["stopReason"] == "end_turn"
            assert "Review setup.py for tests." in user_text(llm.requests[-1].body)
            assert "Review README.md for everything." in user_text(llm.requests[-1].body)


async def test_hostile_prompt_servers_stay_bounded_and_the_session_goes_on(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {"text": "big one", "usage": None},
            {
                "tool_calls": [
                    call("l1", "list_mcp_resources", server="huge"),
                    call("r1", "read_mcp_resource", server="bad", uri="notes://readme"),
                ]
            },
            {"text": "still here"},
        )
        servers = [
            prompt_server("huge", logs / "huge", "huge"),
            prompt_server("bad", logs / "bad", "malformed"),
            prompt_server("big", logs / "big", "big-prompt", "10"),
        ]
        async with run_ama(ama, options=ClientOptions(notices=True), env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, servers)
            await offered(conn, sid, "mcp__big__review")
            await offered(conn, sid, "mcp__huge__p0")
            await conn.wait_for(lambda: "prompts/list" in methods(logs / "bad"), timeout=30)
            names = commands(conn, sid)
            huge = [c for n, c in names.items() if n.startswith("mcp__huge__")]
            assert len(huge) == 200
            assert all(len(c["description"]) <= 300 for c in huge)
            assert all(len(c["input"]["hint"]) < 20 * 10 for c in huge)  # 20 arguments at most
            assert not [n for n in names if n.startswith("mcp__bad__")]
            await conn.wait_for(
                lambda: any(
                    "'bad'" in json.dumps(n) and "prompts" in json.dumps(n) for n in conn.updates_for(sid, "notice")
                ),
                timeout=30,
            )

            # A 10 MB prompt: cut with a marker before it reaches the model.
            assert (await conn.prompt(sid, "/mcp__big__review x", timeout=60))["stopReason"] == "end_turn"
            sent = user_text(llm.requests[0].body)
            assert 200_000 <= len(sent) < 201_000 + 200, len(sent)
            assert "characters of the prompt left out" in sent
            assert usage_updates(conn, sid)[-1]["used"] >= 40_000  # the meter counted what was sent, no more
            assert usage_updates(conn, sid)[-1]["used"] < 100_000

            # A required argument of a hostile prompt: the same clear refusal.
            await conn.prompt(sid, "/mcp__huge__p0", timeout=30)
            assert "needs `arg0`" in agent_text(conn, sid)
            # Thousands of resources, and a read answered with garbage: bounded, a sentence, the turn goes on.
            assert (await conn.prompt(sid, "plain words", timeout=30))["stopReason"] == "end_turn"
            assert len(llm.requests) == 3
            listed = tool_message(llm.requests[2].body, "l1")
            assert "(1800 more resource entries left out)" in listed or "ask for one `server`" in listed
            assert len(listed) < 33_000
            assert "'bad' answered resources/read of 'notes://readme' with a result that is not MCP" in tool_message(
                llm.requests[2].body, "r1"
            )


async def test_the_official_sdk_client_sees_the_prompt_and_runs_it(tmp_path: Path) -> None:
    from acp import text_block
    from acp.schema import EnvVariable, McpServerStdio

    from tests.integration.test_official_sdk import open_session as sdk_open
    from tests.integration.test_official_sdk import sdk_ama, step, write_config

    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    with LLMServer() as llm:
        write_config(ama, llm, "openai")
        llm.enqueue(
            {"text": "done"},
            {
                "tool_calls": [
                    call("l1", "list_mcp_resources"),
                    call("r1", "read_mcp_resource", server="notes", uri="notes://todo"),
                ]
            },
            {"text": "read"},
        )
        async with sdk_ama(ama, "mcp-prompts") as (conn, client, _wire, _process):
            plain = await sdk_open(conn, client, ama)  # initialize, and a session without servers
            assert "mcp__notes__review" not in json.dumps(client.of(plain, "available_commands_update"))
            server = McpServerStdio(
                name="notes",
                command=sys.executable,
                args=["-m", "tests.support.mcp_servers.prompt_server", "sdk"],  # the SDK's server: interop
                env=[
                    EnvVariable(name="PYTHONPATH", value=str(ROOT)),
                    EnvVariable(name="PROMPT_SERVER_LOG", value=str(log)),
                ],
            )
            new = await step(
                conn.new_session(cwd=str(ama.workspace.resolve()), mcp_servers=[server]), "session/new", timeout=10
            )
            sid = new.session_id

            def review() -> dict[str, Any] | None:
                for update in reversed(client.of(sid, "available_commands_update")):
                    found = [c for c in update["availableCommands"] if c["name"] == "mcp__notes__review"]
                    return found[0] if found else None
                return None

            await client.wait_for(review, "the prompt offered as a command", timeout=30)
            assert review() == {
                "name": "mcp__notes__review",
                "description": "Review a file, with an optional focus.",
                "input": {"hint": "file [focus]"},
            }
            result = await step(
                conn.prompt(session_id=sid, prompt=[text_block("/mcp__notes__review a.py style")]), "the prompt", 30
            )
            assert result.stop_reason == "end_turn"
            assert "Review a.py for style." in user_text(llm.requests[0].body)
            result = await step(conn.prompt(session_id=sid, prompt=[text_block("read")]), "the resources", 30)
            assert result.stop_reason == "end_turn"
            assert "notes://readme — readme (text/plain): The notes." in tool_message(llm.requests[2].body, "l1")
            assert "template notes://{name} — a note by name" in tool_message(llm.requests[2].body, "l1")
            assert tool_message(llm.requests[2].body, "r1") == "the note called todo"


async def test_a_command_file_of_the_same_name_keeps_it(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    folder = ama.workspace / ".ama" / "commands"
    folder.mkdir(parents=True)
    (folder / "mcp__notes__greet.md").write_text("---\ndescription: The file's greeting.\n---\nHello from the file.\n")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "hi"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [prompt_server("notes", log)])
            await offered(conn, sid, "mcp__notes__review")  # the server's prompts are offered by now
            updates = conn.updates_for(sid, "available_commands_update")
            greets = [c for c in updates[-1]["availableCommands"] if c["name"] == "mcp__notes__greet"]
            assert [c["description"] for c in greets] == ["The file's greeting."]
            await conn.prompt(sid, "/mcp__notes__greet", timeout=30)
            assert "Hello from the file." in user_text(llm.requests[0].body)
            assert "Hello from the prompt." not in user_text(llm.requests[0].body)
            assert "prompts/get" not in methods(log)


async def test_the_hooks_see_an_mcp_prompts_messages_as_the_prompt(tmp_path: Path) -> None:
    from tests.integration.test_hooks_e2e import ECHO_PROMPT, RECORD, hook, records, script

    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    stops = tmp_path / "stop.jsonl"
    with LLMServer() as llm:
        hooks = [
            hook("prompt_submit", script(ama, "echo", ECHO_PROMPT)),
            hook("stop", script(ama, "rec", RECORD, str(stops))),
        ]
        ama.config.write_text(local_config(llm.openai_url, tail="\n" + "\n".join(hooks)))
        llm.enqueue({"text": "reviewed"})
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [prompt_server("notes", log)])
            await offered(conn, sid, "mcp__notes__review")
            await conn.prompt(sid, "/mcp__notes__review a.py", timeout=30)
            # A refused line is no turn of the model's: no hook runs for it.
            await conn.prompt(sid, "/mcp__notes__review", timeout=30)
    assert "the hook saw the prompt: Review a.py for everything." in user_text(llm.requests[0].body)
    assert [r["stop_reason"] for r in records(stops)] == ["end_turn"]


async def test_a_refused_prompt_s_reply_has_an_id_live_and_the_same_one_after_a_load(tmp_path: Path) -> None:
    """The refusal is a command's output like any other (session/commands.py `say`): stored with its id."""
    ama = Ama(tmp_path)
    log = tmp_path / "server.log"
    ws = str(ama.workspace.resolve())
    with LLMServer() as llm:
        configure(ama, llm)
        async with run_ama(ama, env=KEY, process=True) as conn:
            sid = await open_session(conn, ama, [prompt_server("notes", log)])
            await offered(conn, sid, "mcp__notes__review")
            await conn.prompt(sid, "/mcp__notes__review", timeout=30)  # its required argument missing
            [live] = [u for u in conn.updates_for(sid, "agent_message_chunk") if "needs `file`" in u["content"]["text"]]
            await conn.request("session/close", {"sessionId": sid}, timeout=20)
            mark = len(conn.updates_for(sid, "agent_message_chunk"))
            await conn.request("session/load", {"sessionId": sid, "cwd": ws, "mcpServers": []}, timeout=20)
            replayed = [
                u for u in conn.updates_for(sid, "agent_message_chunk")[mark:] if "needs `file`" in u["content"]["text"]
            ]
        assert llm.requests == []
    assert live.get("messageId") and [u.get("messageId") for u in replayed] == [live["messageId"]]
