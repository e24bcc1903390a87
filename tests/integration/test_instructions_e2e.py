"""Project instructions over real pipes (issue 27 point 1; docs/context.md "Project instructions").

ama serves ACP in-process against the tests' HTTP model server, which records every request: what the system
prompt carried, and which notes of ama's reached the model. The workspace's AGENTS.md and the person's global
one are in the system prompt from the first request and in the meter from the first `usage_update`; a nested
AGENTS.md is announced once as a note when read_file first works in its folder, without rewriting the system
prompt; a file changed between turns reaches the model as a `<system-reminder>` at the next one, the system
prompt unchanged; links out of the workspace, FIFOs and huge files are handled without a hang; a load keeps the
frozen files, tells a change made meanwhile and does not announce a nested file twice; a
compaction keeps the instructions in the system prompt and announces nested files again when needed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, kinds, local_config, run_ama, usage_updates
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def configure(ama: Ama, llm: LLMServer, tail: str = "") -> None:
    ama.config.write_text(local_config(llm.openai_url, top='mode = "full_access"', tail=tail), encoding="utf-8")


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    content = first["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def notes_of(body: dict[str, Any]) -> list[str]:
    """The texts of ama's notes (user messages that begin with ama's header) in a request."""
    out = []
    for m in body["messages"]:
        content = m.get("content")
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
        if m["role"] == "user" and text.startswith("[A note from ama"):
            out.append(text)
    return out


def read_call(path: str, n: int = 1) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"call_{path}_{n}", "name": "read_file", "arguments": {"path": path}}]}


async def open_session(conn: Any, cwd: Path) -> str:
    sid: str = session_id(await conn.new_session(cwd))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


async def stats_of(conn: Any, sid: str) -> dict[str, Any]:
    stats: dict[str, Any] = await conn.request("_ama/session_stats", {"sessionId": sid})
    return stats


async def context_text(conn: Any, sid: str) -> str:
    start = len(conn.updates_for(sid, "agent_message_chunk"))
    await conn.prompt(sid, "/context", timeout=10)
    return "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")[start:])


async def test_workspace_and_global_files_in_the_prompt_the_meter_context_and_stats(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    mine = tmp_path / "xdg-config" / "ama"
    mine.mkdir(parents=True)
    (mine / "AGENTS.md").write_text("Answer in short sentences.\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "ok"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            # The same workspace before its file exists: the global file only. (Another directory would differ by
            # its path's tokens in the prompt too: "bare" against "ws" took a token off the difference.)
            other = await open_session(conn, ama.workspace)
            (ama.workspace / "AGENTS.md").write_text("# Rules\nRun `make check` before you finish.\n", encoding="utf-8")
            sid = await open_session(conn, ama.workspace)
            opened, opened_bare = usage_updates(conn, sid)[0]["used"], usage_updates(conn, other)[0]["used"]
            stats = await stats_of(conn, sid)
            files = stats["instructions"]
            assert [(f["path"], f["scope"]) for f in files] == [
                (str(mine / "AGENTS.md"), "global"),
                ("AGENTS.md", "workspace"),
            ]
            ws_tokens = files[1]["tokens"]
            assert ws_tokens > 0
            # The first usage_update on open counts the workspace's file: the same session without it is smaller
            # by at least that file's section (E4 / U10: the prefix is what the first request carries).
            assert opened - opened_bare >= ws_tokens, (opened, opened_bare, files)
            text = await context_text(conn, sid)
            assert "instructions AGENTS.md" in text  # the boot cost's part
            assert "| AGENTS.md | system prompt |" in text and f"| {ws_tokens:,} |" in text
            await conn.prompt(sid, "hello", timeout=15)
            system = system_of(llm.requests[0].body)
            assert "# Project instructions" in system
            assert "## AGENTS.md (this project's instructions, at the working directory)" in system
            assert "Run `make check` before you finish." in system
            assert f"## {mine / 'AGENTS.md'} (the user's own instructions, for every project)" in system
            assert system.index("Answer in short sentences.") < system.index("make check")  # global first
            after = usage_updates(conn, sid)[-1]
            assert after["used"] > 0


async def test_a_nested_file_is_announced_once_as_a_note_and_the_system_prompt_stays(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "AGENTS.md").write_text("Top rules.\n", encoding="utf-8")
    sub = ama.workspace / "pkg" / "deep"
    sub.mkdir(parents=True)
    (ama.workspace / "pkg" / "AGENTS.md").write_text("Never edit generated code in pkg/.\n", encoding="utf-8")
    (sub / "a.py").write_text("A = 1\n", encoding="utf-8")
    (sub / "b.py").write_text("B = 2\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(read_call("pkg/deep/a.py"), {"text": "read"}, read_call("pkg/deep/b.py"), {"text": "again"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "read a", timeout=15)
            first, second = llm.requests[0].body, llm.requests[1].body
            assert system_of(first) == system_of(second)  # the cached prefix stays valid
            assert notes_of(first) == []
            (note,) = notes_of(second)
            assert 'path="pkg/AGENTS.md"' in note and "Never edit generated code in pkg/." in note
            # The note comes after the tool result it follows, as the last message of the request.
            assert second["messages"][-1]["role"] == "user" and "Never edit" in str(second["messages"][-1]["content"])
            stats = await stats_of(conn, sid)
            assert ("pkg/AGENTS.md", "nested") in [(f["path"], f["scope"]) for f in stats["instructions"]]
            await conn.prompt(sid, "read b", timeout=15)
            assert all(len(notes_of(r.body)) == 1 for r in llm.requests[1:])  # announced once in the session
            # The replay of the session never shows ama's note as the person's words (not asserted here: the
            # person saw no user_message_chunk at all during live turns).
            assert "Never edit" not in "".join(
                u.get("content", {}).get("text", "") for u in conn.updates_for(sid, "agent_message_chunk")
            )


def reminders_of(body: dict[str, Any]) -> list[tuple[int, str]]:
    """(position, text) of each `<system-reminder>` of ama's in a request's messages."""
    out = []
    for i, m in enumerate(body["messages"]):
        content = m.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
        out += [(i, t) for t in parts if m["role"] == "user" and t.startswith("<system-reminder>")]
    return out


def position_of(body: dict[str, Any], words: str) -> int:
    """The position of the user message the person wrote as `words`."""
    (i,) = [i for i, m in enumerate(body["messages"]) if m["role"] == "user" and m.get("content") == words]
    return i


async def test_a_changed_file_reaches_the_model_as_a_system_reminder_and_the_system_prompt_stays(
    tmp_path: Path,
) -> None:
    """The seed's rule (issue 42): an AGENTS.md changed mid-session reaches the model as a `<system-reminder>` at
    its position in the conversation; the system prompt's bytes never change (the provider's cached prefix), the
    meter counts the reminder, and a load sends the same request bytes, reminder included, without a second one."""
    ama = Ama(tmp_path)
    top = ama.workspace / "AGENTS.md"
    top.write_text("Use tabs.\n", encoding="utf-8")
    (ama.workspace / "lib").mkdir()
    nested = ama.workspace / "lib" / "AGENTS.md"
    nested.write_text("lib: old rule.\n", encoding="utf-8")
    (ama.workspace / "lib" / "x.py").write_text("x = 1\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm)
        one = {"text": "one", "usage": {"input": 900, "output": 5}}
        llm.enqueue(read_call("lib/x.py"), one, {"text": "two", "usage": None})  # "two" measures nothing
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "first", timeout=15)
            first = llm.requests[0].body
            assert "Use tabs." in system_of(first) and reminders_of(llm.requests[1].body) == []
            top.write_text("Use four spaces.\n", encoding="utf-8")
            nested.write_text("lib: new rule.\n", encoding="utf-8")
            os.utime(top, ns=(1, 1))  # a different mtime even on a coarse clock
            await conn.prompt(sid, "second", timeout=15)
            last = llm.requests[2].body
            assert json.dumps(last["messages"][0]) == json.dumps(first["messages"][0])  # the system prompt: the same
            ((at, reminder),) = reminders_of(last)
            assert at == position_of(last, "second") + 1  # where the change was seen: before the reply to "second"
            assert "AGENTS.md" in reminder and "changed on disk" in reminder and "Use four spaces." in reminder
            assert reminder.endswith("</system-reminder>") and "Use tabs." not in reminder
            notes = notes_of(last)  # the nested file's change: its own note, as before
            assert len(notes) == 2 and "changed on disk" in notes[1] and "lib: new rule." in notes[1]
            # The meter counts the reminder: it is in the estimate of what came after the last measured reply (900 + 5).
            trailing = usage_updates(conn, sid)[-1]["_meta"]["ama"]
            assert trailing["source"] == "usage" and trailing["usageTokens"] == 905
            assert trailing["trailingTokens"] > len(reminder) // 4
        prefix = last["messages"]
        llm.enqueue({"text": "three"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            await conn.prompt(sid, "third", timeout=15)
            again = llm.requests[-1].body
            assert again["messages"][: len(prefix)] == prefix  # the same bytes: the frozen prompt, the reminder
            assert len(reminders_of(again)) == 1  # told once: the disk is what the reminder said


async def test_links_out_fifos_and_huge_files(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("SECRET-OUTSIDE\n", encoding="utf-8")
    (ama.workspace / "AGENTS.md").symlink_to(outside / "secret.md")  # refused: leads out of the workspace
    (ama.workspace / "CLAUDE.md").write_text("x" * 50 + "\n" + "y" * 60_000, encoding="utf-8")  # the next name
    fifo_dir = ama.workspace / "pipes"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "AGENTS.md")
    (fifo_dir / "p.py").write_text("p = 1\n", encoding="utf-8")
    (ama.workspace / "dir").mkdir()
    (ama.workspace / "dir" / "AGENTS.md").mkdir()  # a directory named AGENTS.md
    (ama.workspace / "dir" / "d.py").write_text("d = 1\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(read_call("pipes/p.py"), read_call("dir/d.py"), {"text": "done"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "go", timeout=15)
            system = system_of(llm.requests[0].body)
            assert "SECRET-OUTSIDE" not in system
            assert "## CLAUDE.md (this project's instructions" in system
            assert "[ama cut this file here: it holds 60,051 bytes" in system
            assert len(system) < 40_000 + 5_000  # the file's cap, and ama's own prompt
            assert all(notes_of(r.body) == [] for r in llm.requests)  # the FIFO and the folder: refused, no hang
            (cut,) = [f for f in (await stats_of(conn, sid))["instructions"]]
            assert cut["path"] == "CLAUDE.md" and cut["cut"] is True
        log = ama.log_text()
        assert "AGENTS.md refused: it links outside the workspace" in log
        assert "pipes/AGENTS.md refused" in log and "FIFO" in log
        assert "dir/AGENTS.md refused: it is a directory" in log


async def test_load_keeps_the_frozen_files_tells_the_change_and_remembers_announced_notes(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    top = ama.workspace / "AGENTS.md"
    top.write_text("Before the load.\n", encoding="utf-8")
    (ama.workspace / "sub").mkdir()
    (ama.workspace / "sub" / "AGENTS.md").write_text("sub rule.\n", encoding="utf-8")
    (ama.workspace / "sub" / "s.py").write_text("s = 1\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(read_call("sub/s.py"), {"text": "one"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "first", timeout=15)
        top.write_text("After the load, a longer rule than before: " + "word " * 200 + "\n", encoding="utf-8")
        llm.enqueue(read_call("sub/s.py", 2), {"text": "two"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            loaded = usage_updates(conn, sid)[0]
            stats = await stats_of(conn, sid)
            (ws,) = [f for f in stats["instructions"] if f["scope"] == "workspace"]
            assert ws["tokens"] < 50  # the system prompt's copy: the file as the first request froze it
            assert loaded["used"] == stats["contextTokens"]
            await conn.prompt(sid, "second", timeout=15)
            body = llm.requests[-1].body
            assert system_of(body) == system_of(llm.requests[0].body)  # frozen, across the load too
            ((_, reminder),) = reminders_of(body)  # the change made while closed: told as a reminder
            assert "After the load" in reminder
            assert len(notes_of(body)) == 1  # the note from before the load, not a second one


async def test_a_compaction_keeps_the_instructions_and_announces_nested_files_again(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "AGENTS.md").write_text("Keep me after compaction.\n", encoding="utf-8")
    (ama.workspace / "sub").mkdir()
    (ama.workspace / "sub" / "AGENTS.md").write_text("sub rule.\n", encoding="utf-8")
    (ama.workspace / "sub" / "s.py").write_text("s = 1\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm, tail="[compaction]\nkeep_tokens = 0\n")
        llm.enqueue(
            read_call("sub/s.py"),
            {"text": "one", "usage": {"input": 6_500, "output": 5}},  # the padded prompt, measured
            {"text": "## Goal\nhandoff text"},  # the /compact handoff
            read_call("sub/s.py", 2),
            {"text": "two"},
        )
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "first " + "padding " * 3_000, timeout=15)  # room for a compaction to free
            await conn.prompt(sid, "/compact", timeout=15)
            await conn.prompt(sid, "second", timeout=15)
            last = llm.requests[-1].body
            text = str(last["messages"])
            assert "handoff text" in text  # compacted: the handoff in place of the old messages
            assert not any(str(m.get("content")).startswith("first padding") for m in last["messages"])
            assert "Keep me after compaction." in system_of(last)
            (note,) = notes_of(last)  # announced again: the old note went with the compaction
            assert "sub rule." in note and text.index("second") < text.index("sub rule.")


def test_ama_demo_shows_the_project_s_instructions_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ama demo` writes an AGENTS.md into its throwaway project, and says what the real ama loaded from it."""
    import io

    from ama_acp.client.demo import PROJECT, run_demo

    for name in ("AMA_CONFIG", "AMA_MODEL", "AMA_DATA_DIR", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no global AGENTS.md of the person's
    out, err = io.StringIO(), io.StringIO()
    code = run_demo(["--no-color", "--model", "scripted/demo"], out, err)
    text = out.getvalue()
    assert code == 0, err.getvalue() + text
    assert "Run the tests with `python -m pytest -q`" in PROJECT["AGENTS.md"]
    (line,) = [x for x in text.splitlines() if x.startswith("project instructions in the system prompt: ")]
    assert line.startswith("project instructions in the system prompt: AGENTS.md (this project's, ≈ ")
    assert "  instructions:" in text and "path AGENTS.md · scope workspace · tokens " in text  # the final stats


async def test_a_model_switch_keeps_the_instructions_and_the_notes(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    (ama.workspace / "AGENTS.md").write_text("Same rules for every model.\n", encoding="utf-8")
    (ama.workspace / "sub").mkdir()
    (ama.workspace / "sub" / "AGENTS.md").write_text("sub rule.\n", encoding="utf-8")
    (ama.workspace / "sub" / "s.py").write_text("s = 1\n", encoding="utf-8")
    with LLMServer() as llm:
        configure(ama, llm, tail='[[models]]\nid = "local/n"\ncontext_window = 50000\n')
        llm.enqueue(read_call("sub/s.py"), {"text": "one"}, read_call("sub/s.py", 2), {"text": "two"})
        async with run_ama(ama, env=ENV) as conn:
            await conn.initialize()
            sid = await open_session(conn, ama.workspace)
            await conn.prompt(sid, "first", timeout=15)
            before = (await stats_of(conn, sid))["instructions"]
            await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/n"})
            await conn.prompt(sid, "second", timeout=15)
            bodies = [r.body for r in llm.requests]
            assert bodies[-1]["model"] == "n" and system_of(bodies[-1]) == system_of(bodies[0])
            assert len(notes_of(bodies[-1])) == 1  # not announced again for the new model
            after = await stats_of(conn, sid)
            assert after["contextWindow"] == 50_000 and after["instructions"] == before
