"""Commands from files through the official ACP SDK client and a real `ama --mode acp` process (docs/commands.md).

The workspace holds commands in ama's, Claude Code's and Gemini CLI's formats, one malformed file and one whose
name a built-in has. The SDK's client sees them in `available_commands_update` (with their hints), runs them, and
the tests' model server shows what the model received: the expanded prompt. A `!` line is text (the file it
would create never appears); a command added while the session is open is offered at the next prompt; a command
run after a model switch goes to the new model; a load offers the list again and replays the command and its
prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_official_sdk import RecordingClient, sdk_ama, step
from tests.support.harness import Ama
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

CLAUDE_REVIEW = """---
description: Review a pull request
argument-hint: [pr-number] [priority]
allowed-tools: Bash(git diff:*)
model: some-other-model
---
Review PR #$1 with priority $2 (asked: $ARGUMENTS).
!`touch pwned-by-command`
"""
GEMINI_PUSH = 'description = "Push a branch"\nprompt = """\nPush {{args}} after checking it.\n"""\n'
BROKEN = "---\ndescription: fine\n  oops: not: yaml\n---\nbody\n"


def write_config(ama: Ama, server: LLMServer) -> None:
    models = "".join(f'[[models]]\nid = "local/{m}"\ncontext_window = 100000\n' for m in ("a", "b"))
    ama.config.write_text(
        f'model = "local/a"\n[providers.local]\nkind = "openai"\nbase_url = "{server.openai_url}"\n'
        f'api_key_env = "LOCAL_TEST_KEY"\nmax_retries = 0\n{models}',
        encoding="utf-8",
    )


def workspace(ama: Ama) -> None:
    ws = ama.workspace
    (ws / ".claude" / "commands").mkdir(parents=True)
    (ws / ".claude" / "commands" / "review.md").write_text(CLAUDE_REVIEW, encoding="utf-8")
    (ws / ".gemini" / "commands" / "git").mkdir(parents=True)
    (ws / ".gemini" / "commands" / "git" / "push.toml").write_text(GEMINI_PUSH, encoding="utf-8")
    (ws / ".ama" / "commands").mkdir(parents=True)
    (ws / ".ama" / "commands" / "broken.md").write_text(BROKEN, encoding="utf-8")
    (ws / ".ama" / "commands" / "model.md").write_text("Not the built-in.\n", encoding="utf-8")


def offered(client: RecordingClient, sid: str) -> dict[str, Any]:
    """The last available_commands_update's commands, by name."""
    last = client.of(sid, "available_commands_update")[-1]
    return {c["name"]: c for c in last["availableCommands"]}


def last_user_text(body: dict[str, Any]) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def said(client: RecordingClient, sid: str) -> str:
    return "".join(u["content"].get("text", "") for u in client.of(sid, "agent_message_chunk"))


async def start(conn: Any, client: RecordingClient, ama: Ama) -> str:
    from acp import PROTOCOL_VERSION
    from acp.schema import ClientCapabilities

    await step(conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()), "init")
    new = await step(conn.new_session(cwd=str(ama.workspace), mcp_servers=[]), "session/new")
    await client.wait_for(lambda: client.of(new.session_id, "usage_update"), "the meter after session/new")
    return str(new.session_id)


async def prompt(conn: Any, sid: str, text: str) -> Any:
    from acp import text_block

    return await step(conn.prompt(session_id=sid, prompt=[text_block(text)]), f"prompt {text!r}")


async def test_file_commands_offered_run_refreshed_and_after_a_model_switch(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    workspace(ama)
    with LLMServer() as server:
        write_config(ama, server)
        server.enqueue({"text": "reviewed"}, {"text": "pushed"}, {"text": "fresh"}, {"text": "b pushed"})
        async with sdk_ama(ama, "commands") as (conn, client, _wire, _process):
            sid = await start(conn, client, ama)
            commands = offered(client, sid)
            assert commands["review"]["description"] == "Review a pull request"
            assert commands["review"]["input"]["hint"] == "[pr-number] [priority]"  # Claude's hint, as written
            assert commands["git:push"]["description"] == "Push a branch"
            assert commands["init"]["input"]["hint"] == "optional focus"
            assert "broken" not in commands
            # The built-in keeps its name and its own description.
            assert commands["model"]["description"] == "Show or switch the model"
            told = said(client, sid)
            assert ".ama/commands/broken.md:3: malformed YAML" in told
            assert ".ama/commands/model.md: /model is a built-in command" in told

            result = await prompt(conn, sid, '/review 12 "very high"')
            assert result.stop_reason == "end_turn"
            sent = last_user_text(server.requests[-1].body)
            assert sent.startswith('Review PR #12 with priority very high (asked: 12 "very high").')
            assert "!`touch pwned-by-command`" in sent  # text to the model, never run
            assert not (ama.workspace / "pwned-by-command").exists()

            await prompt(conn, sid, "/git:push origin main")
            assert last_user_text(server.requests[-1].body) == "Push origin main after checking it."

            # A file added while the session is open: offered, and run, at the next prompt.
            (ama.workspace / ".ama" / "commands" / "fresh.md").write_text("Fresh: $1\n", encoding="utf-8")
            await prompt(conn, sid, "/fresh one two")
            assert last_user_text(server.requests[-1].body) == "Fresh: one"
            assert "fresh" in offered(client, sid)
            assert len(client.of(sid, "available_commands_update")) == 2

            # After a model switch the command goes to the new model.
            await step(conn.set_config_option(config_id="model", session_id=sid, value="local/b"), "set model")
            await prompt(conn, sid, "/git:push feature")
            assert server.requests[-1].body["model"] == "b"
            assert last_user_text(server.requests[-1].body) == "Push feature after checking it."

            # Each problem was told once in the session, however many prompts looked at the files again.
            again = said(client, sid)
            assert again.count("broken.md:3") == 1 and again.count("/model is a built-in command") == 1
        assert [r.body["model"] for r in server.requests] == ["a", "a", "a", "b"]


async def test_a_load_offers_the_commands_again_and_replays_the_command_and_its_prompt(tmp_path: Path) -> None:
    from acp import PROTOCOL_VERSION
    from acp.schema import ClientCapabilities

    ama = Ama(tmp_path)
    workspace(ama)
    with LLMServer() as server:
        write_config(ama, server)
        server.enqueue({"text": "reviewed"})
        async with sdk_ama(ama, "first") as (conn, client, _wire, _process):
            sid = await start(conn, client, ama)
            await prompt(conn, sid, "/review 7 low")
        async with sdk_ama(ama, "second") as (conn, client, _wire, _process):
            await step(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()), "i"
            )
            await step(conn.load_session(cwd=str(ama.workspace), session_id=sid, mcp_servers=[]), "session/load")
            await client.wait_for(lambda: client.of(sid, "available_commands_update"), "the commands after the load")
            assert {"review", "git:push", "init"} <= set(offered(client, sid))
            replayed = [u["content"]["text"] for u in client.of(sid, "user_message_chunk")]
            assert replayed[0] == "/review 7 low"
            assert replayed[1].startswith("Review PR #7 with priority low (asked: 7 low).")
        assert len(server.requests) == 1
