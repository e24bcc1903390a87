"""A fresh `ama --mode acp`: its first session/new and its first prompt (issue 15), through the real process.

session/new is answered before the session machinery is imported (session/manager.py `open_session`); the
preload thread (server.py) imports that machinery, then what the configured model's first prompt needs. So,
after the preload, a first prompt imports no module at all: `python -X importtime` prints a line on stderr
for every module imported, and none may appear while the prompt runs.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.server import PRELOAD_STOPPED, PRELOADED
from tests.support.harness import Ama, check_transcript, clean_env, local_config
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer
from tests.support.waiting import poll_until

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
OPENING = ["available_commands_update", "config_option_update", "usage_update"]


def preloaded(ama: Ama) -> bool:
    try:
        return PRELOADED in (ama.data / "logs" / "ama.log").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False


def imported(stderr: str) -> list[str]:
    """The modules `-X importtime` reported as loaded (the last column of its lines). It reports a failed
    import too: those of modules that are not installed load nothing and are left out (httpcore tries
    `import sniffio` for every lock it makes, and this environment has no sniffio)."""
    names = [line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")]
    return [name for name in names if installed(name.split(".")[0])]


@functools.cache
def installed(top: str) -> bool:
    return importlib.util.find_spec(top) is not None


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def agent(ama: Ama, *, importtime: bool = False) -> AgentProcess:
    cmd = ama.command()
    if importtime:
        cmd = [cmd[0], "-X", "importtime", *cmd[1:]]
    return AgentProcess(
        cmd, ClientOptions(), cwd=str(ama.workspace), env=clean_env(ama.tmp, ENV), stderr=str(ama.stderr)
    )


async def test_session_new_right_after_initialize_then_its_opening_updates(tmp_path: Path) -> None:
    """E4 still holds when the Session is built after the answer: the answer first, then the commands, the
    options (the same as the answer's) and the meter; the session's file exists once they are out."""
    ama = Ama(tmp_path)
    async with agent(ama) as conn:
        await conn.initialize()
        opened = as_object(await conn.new_session(ama.workspace))
        sid = opened["sessionId"]
        await conn.wait_for(lambda: len(conn.updates_for(sid)) >= len(OPENING), timeout=30)
        assert [u["sessionUpdate"] for u in conn.updates_for(sid)] == OPENING
        assert conn.updates_for(sid, "config_option_update")[0]["configOptions"] == opened["configOptions"]
        assert opened["modes"]["currentModeId"] == "manual"
        assert (ama.data / "sessions" / f"{sid}.jsonl").is_file()
        # Issue 25: its file is written at once, but it is listed only once someone spoke in it.
        listed = as_object(await conn.request("session/list", {"cwd": str(ama.workspace)}))
        assert listed["sessions"] == []
        await conn.prompt(sid, "/context", timeout=30)
        listed = as_object(await conn.request("session/list", {"cwd": str(ama.workspace)}))
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
    check_transcript(conn)


async def test_a_prompt_right_after_session_new_is_answered(tmp_path: Path) -> None:
    """A prompt that arrives before the session is built (the editor does not wait for the opening updates)
    builds it, and the opening updates still come."""
    ama = Ama(tmp_path)
    async with agent(ama) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ama.workspace))
        result = await conn.prompt(sid, "hello", timeout=60)
        assert result["stopReason"] == "end_turn"
        await conn.wait_for(lambda: conn.updates_for(sid, "available_commands_update") != [], timeout=30)
        assert conn.updates_for(sid, "agent_message_chunk")
    check_transcript(conn)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_after_the_preload_a_first_prompt_imports_nothing(tmp_path: Path, kind: str) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        url = llm.openai_url if kind == "openai" else llm.anthropic_url
        ama.config.write_text(local_config(url, kind), encoding="utf-8")
        llm.enqueue({"text": "The answer.", "usage": {"input": 20, "output": 3}})
        async with agent(ama, importtime=True) as conn:
            await conn.initialize()
            sid = session_id(await conn.new_session(ama.workspace))
            await conn.wait_for(lambda: conn.updates_for(sid, "usage_update") != [] and preloaded(ama), timeout=60)
            before = read(ama.stderr)
            result = await conn.prompt(sid, "hello", timeout=60)
            after = read(ama.stderr)
        assert result["stopReason"] == "end_turn"
        assert len(llm.requests) == 1
    assert "httpcore" in imported(before)  # by the preload, before the prompt
    assert "httpx" not in imported(after)  # a model request goes straight over httpcore (providers/exchange.py)
    assert after.startswith(before)
    assert imported(after[len(before) :]) == []
    check_transcript(conn)


async def test_the_demo_model_never_imports_httpx(tmp_path: Path) -> None:
    """The preload prepares only the configured model's provider: the scripted one needs no HTTP client."""
    ama = Ama(tmp_path)
    async with agent(ama, importtime=True) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ama.workspace))
        await conn.wait_for(lambda: preloaded(ama), timeout=60)
        assert (await conn.prompt(sid, "hello", timeout=60))["stopReason"] == "end_turn"
    modules = imported(read(ama.stderr))
    # (The modules the preload names are imported with importlib.import_module, which -X importtime does not
    # report; what they import, it does.)
    assert "ama_acp.session.accounting.session_context" in modules and "ama_acp.providers.scripted" in modules
    assert not [m for m in modules if m.split(".")[0] in {"httpx", "httpcore", "h11"}]
    check_transcript(conn)


async def test_an_ama_closed_at_once_exits_promptly_and_says_how_its_preload_ended(tmp_path: Path) -> None:
    """The preload stops between steps once the connection ends: the exit never waits for the rest of it."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url), encoding="utf-8")
        conn = agent(ama)
        async with conn:
            await conn.initialize()
            code = await conn.close(timeout=10)
        assert code == 0 and conn.ended_by == "eof"
    log = poll_until(lambda: (ama.data / "logs" / "ama.log").read_text(encoding="utf-8"), 5, "ama's log")
    assert PRELOADED in log or PRELOAD_STOPPED in log
    assert "Traceback" not in log  # nothing failed on the way out
