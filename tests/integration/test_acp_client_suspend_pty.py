"""Ctrl-Z in `ama acp-client` (issue 24: it left the terminal raw): under a real pseudo-terminal, the client runs
as the foreground job of a small job-control shell (tests/support/job_shell.py), which reports the terminal's mode
when the job stops and then continues it, as `fg` does. The shell must find a sane terminal (echo and line
editing on), and the client must carry on in its own mode afterwards."""

from __future__ import annotations

import os
import sys
import termios
from pathlib import Path

import pytest

from tests.support.harness import clean_env
from tests.support.pty_terminal import PtyTerminal

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "openpty"), reason="POSIX terminals")

SUPPORT = Path(__file__).resolve().parents[1] / "support"
FIXTURE = SUPPORT / "acp_fixtures" / "fixture_agent.py"
SANE = "[job stopped: echo=1 icanon=1]"

DEAF_AGENT = SUPPORT / "acp_fixtures" / "deaf_agent.py"  # answers, streams one chunk, never ends a turn


def under_a_shell(tmp_path: Path, *agent: str) -> tuple[list[str], dict[str, str]]:
    env = clean_env(tmp_path, {"TERM": "xterm-256color"})
    env.pop("TMUX", None)
    client = [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(tmp_path), "--", *agent]
    return [sys.executable, str(SUPPORT / "job_shell.py"), *client], env


def in_client_mode(term: PtyTerminal) -> bool:
    return not termios.tcgetattr(term.master)[3] & (termios.ECHO | termios.ICANON)  # Linux: the slave's mode


def test_ctrl_z_at_the_prompt_gives_the_shell_a_sane_terminal_and_fg_carries_on(tmp_path):
    argv, env = under_a_shell(tmp_path, sys.executable, str(FIXTURE))
    with PtyTerminal(argv, env=env, cwd=tmp_path) as term:
        term.wait_for("» ")
        term.type("hel")
        term.wait_for("» hel")
        term.type("\x1a")
        term.wait_for(SANE)
        term.wait_for(lambda out: out.rstrip().endswith("» hel".encode()))  # fg: the line is shown again
        assert in_client_mode(term)
        term.type("lo\r")
        term.wait_for("[stop: end_turn]")
        term.wait_for(lambda out: out.rstrip().endswith("»".encode()))
        term.type("\x04")
        assert term.wait_exit() == 0, term.text()
    assert "[job stopped: echo=0" not in term.text()


def test_ctrl_z_during_a_turn_gives_the_shell_a_sane_terminal_and_fg_carries_on(tmp_path):
    argv, env = under_a_shell(tmp_path, sys.executable, str(DEAF_AGENT))
    with PtyTerminal(argv, env=env, cwd=tmp_path) as term:
        term.wait_for("» ")
        term.type("go\r")
        term.wait_for("working on it")
        term.type("\x1a")  # ISIG is on during a turn: the terminal sends SIGTSTP
        term.wait_for(SANE)
        term.wait_for(lambda _out: in_client_mode(term))  # fg: the client's mode is back
        term.type("\x03")  # and it still answers Ctrl-C as during any turn
        term.wait_for("cancelling the turn")
        term.type("\x03")
        assert term.wait_exit() == 130, term.text()
