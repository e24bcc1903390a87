"""Skills over real pipes (issue 40 point 2; docs/commands.md "Skills", docs/tools.md "The tools").

ama serves ACP to ama's own client (in this process, or as a real `ama --mode acp` subprocess where a hang would
show), against the tests' HTTP model server, which records every request. The skills' names and descriptions are
in the system prompt from the first request and in the meter from the first `usage_update`; /context shows their
tokens; the `skill` tool brings a skill's body into the next request; a compaction keeps the skills listed and the
inventory names the skill the model had loaded; a malformed SKILL.md is reported once and skipped; a FIFO and a
link out of the project are refused without a hang; a task's helper agent sees the same skills and tool.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.integration.test_instructions_e2e import configure, context_text, open_session, system_of
from tests.integration.test_tasks_e2e import task_call, tool_messages
from tests.support.harness import Ama, kinds, run_ama, usage_updates
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
BODY = "# Release\n1. Run scripts/release.sh --dry-run first.\n2. Tag the version as vX.Y.Z.\n"


def skill(folder: Path, name: str, description: str, body: str = BODY) -> Path:
    d = folder / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}", encoding="utf-8")
    return d


def skill_call(name: str, n: int = 1, file: str | None = None) -> dict[str, Any]:
    args = {"name": name} | ({"file": file} if file else {})
    return {"tool_calls": [{"id": f"call_skill_{n}", "name": "skill", "arguments": args}]}


def texts(conn: Any, sid: str) -> str:
    """Everything ama told the person in the session: agent messages and notices."""
    out = [u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")]
    return "\n".join(out + [str(u) for u in conn.updates_for(sid, "notice")])


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


async def test_skills_in_the_prompt_the_meter_and_context_and_the_tool_loads_a_body(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    release = skill(ama.workspace / ".ama" / "skills", "release", "Cut a release of this project.")
    (release / "scripts").mkdir()
    (release / "scripts" / "release.sh").write_text("#!/bin/sh\necho MUST-NOT-RUN > ran.txt\n", encoding="utf-8")
    (release / "scripts" / "release.sh").chmod(0o755)
    mine = tmp_path / "xdg-config" / "ama" / "skills"
    skill(mine, "notes", "Write meeting notes in the user's format.")
    broken = ama.workspace / ".claude" / "skills" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\nname: broken\ndescription: a: b\n---\nbody\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(skill_call("release"), skill_call("release", 2, "scripts/release.sh"), {"text": "done"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            bare_dir = tmp_path / "bare"
            bare_dir.mkdir()
            bare = await open_session(conn, bare_dir)  # the person's skill only
            sid = await open_session(conn, ama.workspace)
            context = await context_text(conn, sid)
            line = next(x for x in context.splitlines() if x.startswith("Skills: 2, "))
            tokens = int(line.split(", ")[1].split(" ")[0].replace(",", ""))
            assert tokens > 20 and line.endswith("(notes, release).") and "· skills " in context  # a boot part
            # The first usage_update counts the skills (U10: the prefix is what the first request carries).
            opened, opened_bare = usage_updates(conn, sid)[0]["used"], usage_updates(conn, bare)[0]["used"]
            assert opened > opened_bare
            # ... and it is the boot cost, of which the skills are a part (the parts add up to the meter's prefix).
            assert f"boot cost ≈ {opened:,} tokens (system prompt " in context and f"· skills {tokens:,} ·" in context
            # The malformed file: told with its file and line, once for the process.
            told = texts(conn, sid)
            assert f"{broken / 'SKILL.md'}:3" in told and "A skill was skipped" in told
            again = await open_session(conn, ama.workspace)
            assert "A skill was skipped" not in texts(conn, again)
            await conn.prompt(sid, "release it", timeout=15)
            first, second, third = (r.body for r in llm.requests[:3])
            system = system_of(first)
            assert "# Skills\n" in system and "- `release`: Cut a release of this project.\n" in system
            assert "- `notes`: Write meeting notes in the user's format.\n" in system
            assert "broken" not in system and BODY not in system  # the body only when asked for
            assert "skill" in tool_names(first)
            assert system_of(second) == system  # the cached prefix stays valid
            (_, body), *_ = tool_messages(second)
            assert body.startswith('<skill name="release"') and BODY.strip() in body
            assert "- scripts/release.sh\n" in body
            (_, script) = tool_messages(third)[-1]
            assert "MUST-NOT-RUN" in script  # read as text, never run
            assert not (ama.workspace / "ran.txt").exists()
            # The meter counts the result like any other tool result.
            after = await context_text(conn, sid)
            results = next(x for x in after.splitlines() if x.startswith("| tool results |"))
            assert int(results.split("|")[2].strip().replace(",", "")) > 20
            # Another project: the person's own skill only, and the tool to load it.
            await conn.prompt(bare, "hi", timeout=15)
            assert "skill" in tool_names(llm.requests[-1].body)  # the person's own skill is there too
    assert not (ama.workspace / "ran.txt").exists()


async def test_a_session_without_skills_declares_no_tool_and_lists_nothing(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "hello"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "hi", timeout=15)
            body = llm.requests[0].body
            assert "skill" not in tool_names(body) and "# Skills" not in system_of(body)
            assert "Skills:" not in await context_text(conn, sid)


async def test_a_skill_loaded_before_a_compaction_is_still_known_after_it(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    skill(ama.workspace / ".ama" / "skills", "release", "Cut a release of this project.")
    with LLMServer() as llm:
        configure(ama, llm, tail="[compaction]\nkeep_tokens = 0\n")
        llm.enqueue(
            skill_call("release"),
            {"text": "one", "usage": {"input": 6_500, "output": 5}},
            {"text": "## Goal\nhandoff text"},  # the /compact handoff
            {"text": "two"},
        )
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "first " + "padding " * 3_000, timeout=15)
            await conn.prompt(sid, "/compact", timeout=15)
            handoff_request = llm.requests[2].body
            assert "skill×1" in str(handoff_request["messages"]) and "Skills loaded" in str(handoff_request)
            await conn.prompt(sid, "second", timeout=15)
            last = llm.requests[-1].body
            text = str(last["messages"])
            assert "handoff text" in text and BODY.strip()[:20] not in text  # compacted: the body went with it
            assert "- `release`: Cut a release of this project." in system_of(last)  # still listed
            assert "Skills loaded" in text and "`release`" in text  # the inventory says it had been loaded
            assert "skill" in tool_names(last)


async def test_a_fifo_and_links_out_of_the_project_are_refused_without_a_hang(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    outside = tmp_path / "outside"
    skill(outside, "secret", "SECRET-OUTSIDE skill")
    (outside / "far.txt").write_text("FAR-OUTSIDE\n", encoding="utf-8")
    base = ama.workspace / ".ama" / "skills"
    base.mkdir(parents=True)
    (base / "secret").symlink_to(outside / "secret")  # a skill folder linked out of the project
    pipe = base / "pipe"
    pipe.mkdir()
    os.mkfifo(pipe / "SKILL.md")
    ok = skill(base, "ok", "A fine skill.")
    os.mkfifo(ok / "fifo.txt")
    (ok / "far.txt").symlink_to(outside / "far.txt")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(skill_call("ok", 1, "fifo.txt"), skill_call("ok", 2, "far.txt"), {"text": "done"})
        async with run_ama(ama, env=ENV, process=True) as conn:  # a real process: a blocked open would hang it
            with anyio.fail_after(30):
                await conn.initialize()
                sid = await open_session(conn, ama.workspace)
                await conn.prompt(sid, "go", timeout=15)
            system = system_of(llm.requests[0].body)
            assert "- `ok`: A fine skill." in system
            assert "SECRET-OUTSIDE" not in system and "`pipe`" not in system
            fifo = tool_messages(llm.requests[1].body)[-1][1]
            far = tool_messages(llm.requests[2].body)[-1][1]
            assert "FIFO" in fifo and "links outside" in far and "FAR-OUTSIDE" not in far
            told = texts(conn, sid)
            assert "secret/SKILL.md: refused: it links outside" in told and "FIFO" in told
            assert "usage_update" in kinds(conn, sid)


async def test_a_tasks_helper_agent_sees_the_skills_and_loads_one(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    skill(ama.workspace / ".ama" / "skills", "release", "Cut a release of this project.")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(
            {"tool_calls": [task_call("t1", "Follow the release skill", "Release")]},
            skill_call("release"),
            {"text": "The skill says: dry run first."},
            {"text": "done"},
        )
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "delegate", timeout=20)
            task_first, task_second = llm.requests[1].body, llm.requests[2].body
            assert "helper agent" in system_of(task_first)
            assert "- `release`: Cut a release of this project." in system_of(task_first)
            assert "skill" in tool_names(task_first)
            assert BODY.strip() in tool_messages(task_second)[-1][1]
            assert tool_messages(llm.requests[3].body) == [("t1", "The skill says: dry run first.")]


async def test_a_skill_added_later_appears_when_the_session_is_loaded_again(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    base = ama.workspace / ".ama" / "skills"
    skill(base, "release", "Cut a release of this project.")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "one"}, {"text": "two"}, {"text": "three"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "first", timeout=15)
            skill(base, "deploy", "Deploy to staging.")  # added during the session: not in it
            await conn.prompt(sid, "second", timeout=15)
            assert system_of(llm.requests[1].body) == system_of(llm.requests[0].body)
            assert "`deploy`" not in system_of(llm.requests[1].body)
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            await conn.prompt(sid, "third", timeout=15)
            system = system_of(llm.requests[-1].body)
            assert "- `deploy`: Deploy to staging." in system and "- `release`:" in system
