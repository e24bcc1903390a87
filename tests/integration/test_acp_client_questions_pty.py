"""`ama acp-client`'s questions under a real pseudo-terminal (issue 39, item 7): one question per action — a command
the person has just allowed in a permission request runs without a second question, any other command is asked
about — and a question the agent gives up on (a cancelled request, a turn that ends with it open) is withdrawn,
never wedging the client: the next question is asked and the session ends with exit code 0."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_acp_client_pty import at_prompt, ctrl_d, plain
from tests.support.harness import Ama, clean_env, write_script
from tests.support.pty_terminal import PtyTerminal

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "openpty"), reason="POSIX terminals")

ASKING_AGENT = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "asking_agent.py"
GATE = "Allow? [y/N]"
WITHDRAWN = "(question withdrawn: the agent no longer waits for this answer)"
RUN_TURN: list[dict[str, Any]] = [
    {
        "text": "Running it.",
        "tool_calls": [{"id": "r1", "name": "run_command", "arguments": {"command": "echo one-question-ran"}}],
    },
    {"text": "Done."},
]


def ama_client(tmp_path: Path, replies: list[dict[str, Any]]) -> tuple[list[str], dict[str, str], Path]:
    """`ama acp-client -- ama --mode acp` with a scripted model, as a person starts it (no --allow-terminals)."""
    ama = Ama(tmp_path)
    ama.config.write_text(
        'model = "scripted/turn"\n\n[[models]]\nid = "scripted/turn"\ncontext_window = 100000\n', encoding="utf-8"
    )
    script = write_script(tmp_path / "turn.json", replies)
    env = clean_env(tmp_path, {"AMA_SCRIPT": str(script), "TERM": "xterm-256color", "PYTHONDONTWRITEBYTECODE": "1"})
    env.pop("TMUX", None)
    agent = ama.command("--log-level", "warning")
    argv = [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(ama.workspace), "--", *agent]
    return argv, env, ama.workspace


def agent_client(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    """`ama acp-client -- asking_agent.py`: an agent that asks and then misbehaves on cue."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = clean_env(tmp_path, {"TERM": "xterm-256color", "PYTHONDONTWRITEBYTECODE": "1"})
    env.pop("TMUX", None)
    argv = [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(workspace), "--", sys.executable]
    return [*argv, str(ASKING_AGENT)], env, workspace


def said(term: PtyTerminal) -> str:
    """The agent's report of the last turn (`permission=… create=…`), once the turn has ended."""
    term.wait_for("[stop: end_turn]")
    found = re.findall(r"(?:permission|create)=\S+(?: (?:permission|create)=\S+)*|moved on", plain(term.output))
    assert found, plain(term.output)
    return str(found[-1])


def test_an_allowed_command_is_asked_about_once_and_runs(tmp_path: Path) -> None:
    argv, env, workspace = ama_client(tmp_path, RUN_TURN)
    with PtyTerminal(argv, env=env, cwd=workspace) as term:
        at_prompt(term)
        term.type("run it\r")
        term.wait_for("Choose a number")
        term.type("1\r")
        term.wait_for("[stop: end_turn]")
        shown = plain(term.output)
        ctrl_d(term)
    assert shown.count("Choose a number") == 1 and GATE not in shown, shown
    assert "→ completed" in shown and "one-question-ran" in shown.split("→ completed", 1)[1], shown
    assert "BusyResourceError" not in shown


def test_a_command_other_than_the_one_allowed_is_asked_about(tmp_path: Path) -> None:
    # The agent asks to run `ls` and then creates a terminal running `rm -rf ~` (its HOME a folder of the test's,
    # with a file in it that must survive): the grant for `ls` does not cover it, so the person is asked.
    argv, env, workspace = agent_client(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep").write_text("still here\n", encoding="utf-8")
    with PtyTerminal(argv, env=env, cwd=workspace) as term:
        at_prompt(term)
        term.type(f"mismatch {home}\r")
        term.wait_for("Choose a number")
        term.type("1\r")
        term.wait_for(GATE)
        assert "The agent wants to run: /bin/sh -c 'rm -rf ~'" in plain(term.output)
        term.type("n\r")
        assert said(term) == "permission=allow create=error-32602"
        ctrl_d(term)
    assert (home / "keep").read_text(encoding="utf-8") == "still here\n"


def test_a_question_the_agent_cancels_is_withdrawn_and_the_next_is_asked(tmp_path: Path) -> None:
    argv, env, workspace = agent_client(tmp_path)
    trigger = tmp_path / "cancel-now"
    with PtyTerminal(argv, env=env, cwd=workspace) as term:
        at_prompt(term)
        term.type(f"cancel {trigger}\r")
        term.wait_for(GATE)
        trigger.touch()  # the agent gives up on its terminal/create with $/cancel_request
        term.wait_for(WITHDRAWN)
        term.wait_for("Choose a number")
        term.type("1\r")
        assert said(term) == "create=error-32800 permission=allow"
        ctrl_d(term)
        shown = plain(term.output)
    assert shown.index(GATE) < shown.index(WITHDRAWN) < shown.index("Choose a number"), shown
    assert "BusyResourceError" not in shown


def test_a_question_left_open_when_the_agent_moves_on_does_not_wedge_the_client(tmp_path: Path) -> None:
    # The agent never cancels its terminal/create: it ends the turn with the question still open (ama did so
    # when its deadline for terminal/create passed). The prompt comes back, and the next question works.
    argv, env, workspace = agent_client(tmp_path)
    trigger = tmp_path / "move-on-now"
    with PtyTerminal(argv, env=env, cwd=workspace) as term:
        at_prompt(term)
        term.type(f"moveon {trigger}\r")
        term.wait_for(GATE)
        trigger.touch()
        assert said(term) == "moved on"
        term.wait_for(WITHDRAWN)
        at_prompt(term)
        term.type("ask\r")
        term.wait_for("Choose a number")
        term.type("1\r")
        term.wait_for(lambda out: plain(out).count("[stop: end_turn]") == 2)
        assert said(term) == "permission=allow"
        ctrl_d(term)
        shown = plain(term.output)
    assert "BusyResourceError" not in shown, shown
