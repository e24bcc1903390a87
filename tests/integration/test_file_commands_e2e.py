"""Commands from files and `/init` through ama's own client (docs/commands.md).

A real `ama --mode acp` process: a FIFO and a link out of the project in `.ama/commands/` are refused without
blocking the session's open (the whole test runs under a deadline); the person's own folder is read; an enormous
command is cut with a marker; `/init` sends its built-in prompt as the turn's message, and the model's write of
AGENTS.md asks for permission as any write does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import ClientOptions
from ama_acp.shaping.commands import BODY_CHARS
from ama_acp.shaping.init_prompt import INIT_BODY
from tests.support.harness import Ama, agent_text, kinds, local_config, permission_asks, run_ama
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
DEADLINE = 30  # seconds: a blocking open of the FIFO would hang the session's open far past it


def last_user_text(body: dict[str, Any]) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


async def open_session(conn: Any, ama: Ama) -> str:
    await conn.initialize()
    sid: str = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


def offered(conn: Any, sid: str) -> dict[str, Any]:
    last = conn.updates_for(sid, "available_commands_update")[-1]
    return {c["name"]: c for c in last["availableCommands"]}


async def test_fifo_and_link_out_refused_without_blocking_person_folder_read_huge_cut(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    folder = ama.workspace / ".ama" / "commands"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "pipe.md")
    secret = tmp_path / "outside.md"
    secret.write_text("SECRET-OUTSIDE\n", encoding="utf-8")
    (folder / "leak.md").symlink_to(secret)
    (folder / "huge.md").write_text("Huge $ARGUMENTS\n" + "x" * (BODY_CHARS + 5000), encoding="utf-8")
    mine = tmp_path / "xdg-config" / "ama" / "commands"
    mine.mkdir(parents=True)
    (mine / "mine.md").write_text("---\ndescription: Mine\n---\nMy own: $ARGUMENTS\n", encoding="utf-8")
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url), encoding="utf-8")
        llm.enqueue({"text": "ok"}, {"text": "ok"})
        with anyio.fail_after(DEADLINE):
            async with run_ama(ama, env=ENV, process=True) as conn:
                sid = await open_session(conn, ama)
                await conn.wait_for(lambda: "available_commands_update" in kinds(conn, sid))
                commands = offered(conn, sid)
                assert "pipe" not in commands and "leak" not in commands
                assert commands["mine"]["description"] == "Mine" and "huge" in commands
                told = agent_text(conn, sid)
                assert ".ama/commands/pipe.md: refused" in told and "FIFO" in told
                assert ".ama/commands/leak.md: refused: it links outside the workspace" in told
                await conn.prompt(sid, "/mine please", timeout=15)
                assert last_user_text(llm.requests[-1].body) == "My own: please"
                await conn.prompt(sid, "/huge x", timeout=15)
                sent = last_user_text(llm.requests[-1].body)
                assert sent.startswith("Huge x\n") and "[ama cut this command here" in sent
                assert len(sent) < BODY_CHARS + 200
        assert all("SECRET-OUTSIDE" not in str(r.body) for r in llm.requests)
        assert "command files: .ama/commands/pipe.md: refused" in ama.log_text()


@pytest.mark.parametrize("mode", ["manual", "read_only"])
async def test_init_sends_its_prompt_and_the_write_goes_through_the_permission_flow(tmp_path: Path, mode: str) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "README.md").write_text("A tiny project.\n", encoding="utf-8")
    write = {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "AGENTS.md", "content": "# A\n"}}]}
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url, top=f'mode = "{mode}"'), encoding="utf-8")
        llm.enqueue(write, {"text": "done"})
        async with run_ama(ama, env=ENV, options=ClientOptions(permission="allow_once")) as conn:
            sid = await open_session(conn, ama)
            result = await conn.prompt(sid, "/init focus on the tests", timeout=20)
            assert result["stopReason"] == "end_turn"
            sent = last_user_text(llm.requests[0].body)
            assert sent == INIT_BODY + "\n\nfocus on the tests"
            asks = permission_asks(conn)
            if mode == "manual":
                assert len(asks) == 1 and (ama.workspace / "AGENTS.md").read_text(encoding="utf-8") == "# A\n"
            else:  # the mode refuses the write: the model can only propose the file
                assert asks == [] and not (ama.workspace / "AGENTS.md").exists()


async def test_problems_are_one_notice_where_the_client_takes_notices(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    folder = ama.workspace / ".ama" / "commands"
    folder.mkdir(parents=True)
    (folder / "broken.md").write_text("---\ndescription: x\n", encoding="utf-8")
    (folder / "rewind.md").write_text("Not the built-in\n", encoding="utf-8")
    # A name with ESC and a byte that is not UTF-8: not a command name, told with both made visible.
    (folder / os.fsdecode(b"evil\x1b]0;x\x07\xff.md")).write_bytes(b"body\n")
    (folder / "esc.md").write_bytes(b"---\ndescription: \x1b[2Jwiped\n---\nbody\n")
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url), encoding="utf-8")
        llm.enqueue({"text": "ok"})
        async with run_ama(ama, env=ENV, options=ClientOptions(notices=True)) as conn:
            sid = await open_session(conn, ama)
            (notice,) = conn.updates_for(sid, "notice")
            assert notice["title"] == "Command files" and notice["severity"] == "warning"
            assert (
                ".ama/commands/broken.md:1: the front matter opened by `---` on line 1 is never closed"
                in (notice["description"])
            )
            assert ".ama/commands/rewind.md: /rewind is a built-in command" in notice["description"]
            assert ".ama/commands/evil^[]0;x^G<U+DCFF>.md: not a command name" in notice["description"]
            shown = [c["description"] for c in offered(conn, sid).values()]
            assert not any("\x1b" in text for text in [notice["description"], *shown])
            esc = next(
                c
                for c in conn.updates_for(sid, "available_commands_update")[-1]["availableCommands"]
                if c["name"] == "esc"
            )
            assert esc["description"] == "^[[2Jwiped"
            await conn.prompt(sid, "hello", timeout=15)
            assert len(conn.updates_for(sid, "notice")) == 1  # told once
            assert agent_text(conn, sid) == "ok"
