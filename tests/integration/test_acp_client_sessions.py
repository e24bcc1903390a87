"""`ama acp-client --list / --load / --resume` against ama (which offers them) and the fixture agent (which offers
none of them), over plain pipes. Where the client runs in the test's process (`run_acp_client`), ama does too
(`agents_in_process`: the subject is the client's options, not ama's process); the piped test runs the client as a
process, ama as its child."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from ama_acp.client.terminal import cli, turn
from ama_acp.client.terminal.cli import run_acp_client
from tests.support.harness import Ama, client_agents_in_process, write_script

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "fixture_agent.py"


@pytest.fixture
def agents_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`ama.command(...)` of the test's `Ama(tmp_path)` run in-process by the in-process client. And a test-sized
    settle: after a session opens the client waits up to 1 s for a first meter, which ama's scripted model
    never sends (each open waited the whole second); in-process, the open's updates are there at once."""
    monkeypatch.setattr(cli, "settle_session_open", partial(turn.settle_session_open, timeout=0.2))
    with client_agents_in_process(Ama(tmp_path)):
        yield


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_acp_client(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_list_then_resume_a_session_of_ama(tmp_path, monkeypatch, agents_in_process):
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "echo.json", [{"text": "first answer"}, {"text": "second answer"}])
    monkeypatch.setenv("AMA_SCRIPT", str(script))
    agent = ama.command("--model", "scripted/echo")
    ws = str(ama.workspace)
    code, out, err = run("--prompt", "remember this", "--cwd", ws, "--", *agent)
    assert code == 0, err
    session_id = next(line.split()[1] for line in out.splitlines() if line.startswith("session "))
    assert f"session {session_id} (new)" in out

    code, out, err = run("--list", "--cwd", ws, "--", *agent)
    assert code == 0, err
    listed = [line for line in out.splitlines() if line.startswith(session_id)]
    assert len(listed) == 1 and "remember this" in listed[0], out  # its title: the first prompt
    assert "[" not in listed[0]  # the session is in the listed folder: no folder shown

    code, out, err = run("--resume", session_id, "--prompt", "and now?", "--cwd", ws, "--", *agent)
    assert code == 0, err
    lines = out.splitlines()
    assert f"session {session_id} (resume)" in lines
    assert "first answer" not in out  # resume does not replay
    assert "second answer" in out  # the script carries on where the session stopped
    first_meter = next(i for i, line in enumerate(lines) if line.startswith("ctx "))
    assert first_meter < lines.index("» and now?")  # the meter is there from the open

    code, out, err = run("--load", session_id, "--cwd", ws, "--", *agent)
    assert code == 0, err
    assert "» remember this" in out and "first answer" in out and "second answer" in out  # the replay


def test_list_elsewhere_shows_no_sessions(tmp_path, agents_in_process):
    ama = Ama(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    code, out, err = run("--list", "--cwd", str(other), "--", *ama.command())
    assert code == 0, err
    assert f"no sessions in {other}" in out


def test_what_the_agent_does_not_offer_is_refused_without_asking(tmp_path):
    agent = [sys.executable, str(FIXTURE)]
    for flag in (["--load", "abc"], ["--resume", "abc"], ["--list"]):
        code, out, err = run(*flag, "--cwd", str(tmp_path), "--", *agent)
        method = {"--load": "load", "--resume": "resume", "--list": "list"}[flag[0]]
        assert code == 1, (flag, err)
        assert f"the agent does not offer session/{method}, so {flag[0]} cannot work with it" in err


def test_load_of_an_unknown_session_is_the_agents_error(tmp_path, agents_in_process):
    ama = Ama(tmp_path)
    code, out, err = run("--load", "ses_does_not_exist", "--cwd", str(ama.workspace), "--", *ama.command())
    assert code == 1
    assert "session/load failed" in err


def test_prompts_piped_in_one_per_line_with_client_commands(tmp_path):
    ama = Ama(tmp_path)
    script = write_script(tmp_path / "echo.json", [{"text": "first answer"}, {"text": "second answer"}])
    agent = ama.command("--model", "scripted/echo")
    env = {**os.environ, "AMA_SCRIPT": str(script)}
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(ama.workspace), "--", *agent],
        input="first\n\n/mode nonsense\nsecond\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("» first") < out.index("first answer") < out.index("» second") < out.index("second answer")
    assert "no mode 'nonsense'" in out  # a client command, answered by the client, the session going on
    assert out.count("[stop: end_turn]") == 2
    assert "\x1b" not in out  # not a terminal: no colours, no program status
