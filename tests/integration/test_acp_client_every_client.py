"""`ama acp-client` as issue 25 (point 8) asks, over real pipes (the client as a subprocess, the agent as its
child): one model line per /model, the agent's errors as sentences (never a Python dict), and the session's
title — sent by the agent as a session_info_update while the session opens (ama on load/resume, the fixture
agent with `--title`) — shown on open and carried by every program-status report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.test_acp_client_model_switch import CONFIG
from tests.support.harness import Ama, clean_env, write_script
from tests.support.llm_server import LLMServer
from tests.support.pty_terminal import reports

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "fixture_agent.py"


def acp_client(
    cwd: Path, agent: list[str], env: dict[str, str], *options: str, lines: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ama_acp", "acp-client", *options, "--cwd", str(cwd), "--", *agent],
        input="".join(line + "\n" for line in lines).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )


def titles(stdout: bytes) -> list[str | None]:
    """The title of each program-status report but the last (`clear`), in order."""
    return [r.get("title") for r in reports(stdout) if r.get("state") != "clear"]


def test_one_model_line_per_model_change(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(CONFIG.format(url=llm.openai_url), encoding="utf-8")
        llm.enqueue({"text": "First answer.", "usage": {"input": 20_000, "output": 50}})
        env = clean_env(tmp_path, {"LOCAL_TEST_KEY": "test-key-abcdefgh"})
        lines = ("first", "/model local/nowindow", "/model local/big", "/model local/big")
        done = acp_client(ama.workspace, ama.command(), env, lines=lines)
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stdout.decode().splitlines() if line.startswith("⚙ Model")]
    assert shown == ["⚙ Model: nowindow (local/nowindow)", "⚙ Model: big (local/big)", "⚙ Model: big (local/big)"]


def test_an_auth_error_is_printed_as_sentences(tmp_path):
    ama = Ama(tmp_path)
    ama.config.write_text("", encoding="utf-8")  # no model, no key: ama answers session/new with auth_required
    done = acp_client(ama.workspace, ama.command(), clean_env(tmp_path), "--prompt", "hi")
    assert done.returncode == 1
    message = [line for line in done.stderr.decode().splitlines() if line.startswith("ama acp-client:")]
    assert len(message) == 1, done.stderr
    text = message[0]
    assert "session/new failed: Authentication required" in text and "`ama setup`" in text
    assert "Sign-in methods: Use ama's configured model." in text
    assert "{" not in text and "'details'" not in text and "authMethods" not in text
    assert text.count("`ama setup`") == 1  # data.details repeats the message: said once


def test_a_title_sent_as_the_session_opens_is_in_every_report(tmp_path):
    agent = [sys.executable, str(FIXTURE), "--models", "options-first", "--title", "Fix the parser"]
    done = acp_client(tmp_path, agent, clean_env(tmp_path), "--program-status", "on", lines=("hello",))
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert out.index("title: Fix the parser") < out.index("» hello")  # shown on open
    shown = titles(done.stdout)
    assert shown and shown == ["Fix the parser"] * len(shown), shown


def test_a_resumed_or_loaded_session_of_ama_has_its_title(tmp_path):
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "echo.json", [{"text": "first answer"}, {"text": "second answer"}])
    env = clean_env(tmp_path, {"AMA_SCRIPT": str(script)})
    agent = ama.command("--model", "scripted/echo")
    done = acp_client(ama.workspace, agent, env, "--prompt", "remember this")
    assert done.returncode == 0, done.stderr
    session_id = next(line.split()[1] for line in done.stdout.decode().splitlines() if line.startswith("session "))
    for how in ("--resume", "--load"):
        done = acp_client(ama.workspace, agent, env, "--program-status", "on", how, session_id, lines=("and now?",))
        assert done.returncode == 0, done.stderr
        assert "title: remember this" in done.stdout.decode()
        shown = titles(done.stdout)
        assert shown and shown == ["remember this"] * len(shown), (how, shown)
