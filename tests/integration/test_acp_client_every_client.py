"""`ama acp-client` as issue 25 (point 8) asks: one model line per /model, the agent's errors as sentences (never a
Python dict), and the session's title — sent by the agent as a session_info_update while the session opens (ama on
load/resume, the fixture agent with `--title`) — shown on open and carried by every program-status report.

The client runs in the test's process (`acp_client_in_process`: `run_acp_client` with piped stand-ins, not a
terminal, in the environment a subprocess would have been given), and so does ama as its agent; the fixture agent
is its child process. What is tested is what the client prints, not its process (test_acp_client_pty.py and
test_acp_client_sessions.py's piped test run it as one)."""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path

from ama_acp.client.terminal import cli, turn
from tests.integration.test_acp_client_model_switch import CONFIG
from tests.support.harness import Ama, acp_client_in_process, clean_env, write_script
from tests.support.llm_server import LLMServer
from tests.support.pty_terminal import reports

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "fixture_agent.py"


def acp_client(
    cwd: Path, agent: list[str], env: dict[str, str], *options: str, lines: tuple[str, ...] = (), ama: Ama | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`ama acp-client OPTIONS --cwd CWD -- AGENT` with `lines` piped in; ama's `agent` in-process too (`ama`)."""
    stdin = "".join(line + "\n" for line in lines)
    return acp_client_in_process([*options, "--cwd", str(cwd), "--", *agent], env, stdin=stdin, agents_of=ama)


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
        done = acp_client(ama.workspace, ama.command(), env, lines=lines, ama=ama)
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stdout.decode().splitlines() if line.startswith("⚙ Model")]
    assert shown == ["⚙ Model: nowindow (local/nowindow)", "⚙ Model: big (local/big)", "⚙ Model: big (local/big)"]


def test_an_auth_error_is_printed_as_sentences(tmp_path):
    ama = Ama(tmp_path)
    ama.config.write_text("", encoding="utf-8")  # no model, no key: ama answers session/new with auth_required
    done = acp_client(ama.workspace, ama.command(), clean_env(tmp_path), "--prompt", "hi", ama=ama)
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


def test_a_resumed_or_loaded_session_of_ama_has_its_title(tmp_path, monkeypatch):
    # A test-sized settle: after an open the client waits up to 1 s for a first meter, which ama's scripted model
    # never sends (three opens, three whole seconds); in-process, the open's updates are there at once.
    monkeypatch.setattr(cli, "settle_session_open", partial(turn.settle_session_open, timeout=0.2))
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "echo.json", [{"text": "first answer"}, {"text": "second answer"}])
    env = clean_env(tmp_path, {"AMA_SCRIPT": str(script)})
    agent = ama.command("--model", "scripted/echo")
    done = acp_client(ama.workspace, agent, env, "--prompt", "remember this", ama=ama)
    assert done.returncode == 0, done.stderr
    session_id = next(line.split()[1] for line in done.stdout.decode().splitlines() if line.startswith("session "))
    for how in ("--resume", "--load"):
        done = acp_client(
            ama.workspace, agent, env, "--program-status", "on", how, session_id, lines=("and now?",), ama=ama
        )
        assert done.returncode == 0, done.stderr
        assert "title: remember this" in done.stdout.decode()
        shown = titles(done.stdout)
        assert shown and shown == ["remember this"] * len(shown), (how, shown)
