"""`ama acp-client` under a real pseudo-terminal, against an agent that puts terminal escapes in everything it
sends (the fixture agent's `--escapes`): its name (a DSR query, an OSC 0 title), its stderr (OSC 52, OSC 0, a
forged OSC 7501, DSR in 7-bit and C1 form), a reply with a forged status and a clipboard write, a permission
title with a newline that forges an option line, a stop reason and a turn-usage key with escapes. The terminal
receives none of them raw: each is shown with its controls made visible (issue 23, ama_acp/textsafe.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.harness import clean_env
from tests.support.pty_terminal import PtyTerminal

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "openpty"), reason="POSIX terminals")

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "fixture_agent.py"

RAW = {
    "OSC 52 (clipboard)": b"\x1b]52;",
    "OSC 0 (title)": b"\x1b]0;",
    "OSC 7501 (program status)": b"\x1b]7501",
    "DSR query": b"\x1b[6n",
    "C1 CSI": "\x9b".encode(),
    "BEL": b"\x07",
}


def test_no_escape_of_the_agent_reaches_the_terminal(tmp_path: Path) -> None:
    env = clean_env(tmp_path, {"TERM": "xterm-256color"})
    env.pop("TMUX", None)
    agent = [sys.executable, str(FIXTURE), "--escapes"]
    argv = [sys.executable, "-m", "ama_acp", "acp-client", "--program-status", "off", "--cwd", str(tmp_path)]
    target = tmp_path / "out.txt"
    with PtyTerminal([*argv, "--", *agent], env=env, cwd=tmp_path) as term:
        term.wait_for("» ")
        term.type("tell me\r")
        term.wait_for("[stop: end_turn")
        term.wait_for("» ")
        term.type(f"acp-conformance: write {target} hi\r")
        term.wait_for("Choose a number")
        term.type("1\r")
        term.wait_for(lambda out: out.count(b"[stop: end_turn") == 2)
        term.wait_for("» ")
        term.type("\x04")
        rc = term.wait_exit()
        output = term.output
    assert rc == 0, output
    for what, raw in RAW.items():
        assert raw not in output, f"{what} reached the terminal raw"
    text = output.decode("utf-8")
    # Each was shown, made visible, where it belongs.
    assert "agent: Fixture ^[]0;agent-title^Gagent ^[[6n 1.0^[]52;c;cm0gLXJmIH4K^G" in text  # the name, one line
    assert "stderr says ^[]52;c;cm0gLXJmIH4K^G ^[]0;stderr-title^G ^[]7501;state=done^[\\ ^[[6n <U+009B>6n" in text
    assert "forged ^[]7501;state=done^[\\ status and ^[]52;c;cm0gLXJmIH4K^G clipboard" in text
    assert "[stop: end_turn^[]0;stop-title^G]" in text
    assert "turn usage: ^[]0;key^Gin 5" in text
    # The title's newline did not make a line of its own: the forged option is on the question's line.
    assert f"? permission: Write {target}^J  9. Yes, always (allow_always)^[]52;c;cm0gLXJmIH4K^G" in text
    assert "\n  9. Yes" not in text.replace("\r\n", "\n")
    assert target.read_text() == "hi"
