"""OSC 7501 `progress` follows the meter during a turn (issue 42: the seed's program status), not only at the turn's
start: `ama acp-client` under a real pseudo-terminal, ama as a real process, its model a real HTTP server on
127.0.0.1 that holds each answer until the test has seen the report the usage_update before it brought. Each
new percent is sent while the turn still works, as the seed's emitter sends it (a same-state change waits out
its 500 ms throttle on the emitter's own timer, then goes)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import pytest

from tests.integration.test_acp_client_model_switch import CONFIG
from tests.support.harness import Ama, clean_env
from tests.support.llm_server import LLMServer
from tests.support.pty_terminal import PtyTerminal, reports

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "openpty"), reason="POSIX terminals")


def _working_at(percent: str) -> Callable[[bytes], bool]:
    """A predicate: a `working` report with this progress has reached the terminal."""
    return lambda out: any(r["state"] == "working" and r.get("progress") == percent for r in reports(out))


def test_progress_follows_each_usage_update_while_the_turn_works(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "notes.txt").write_text("hello\n")
    second, third = threading.Event(), threading.Event()
    read = {"id": "r1", "name": "read_file", "arguments": {"path": "notes.txt"}}
    with LLMServer() as llm:
        ama.config.write_text(CONFIG.format(url=llm.openai_url), encoding="utf-8")
        llm.enqueue(
            {"text": "Reading.", "tool_calls": [read], "usage": {"input": 20_000, "output": 50}},
            {
                "wait": second,
                "text": "Again.",
                "tool_calls": [{**read, "id": "r2"}],
                "usage": {"input": 45_000, "output": 40},
            },
            {"wait": third, "text": "All read.", "usage": {"input": 70_000, "output": 30}},
        )
        env = clean_env(tmp_path, {"LOCAL_TEST_KEY": "test-key-abcdefgh", "TERM": "xterm-256color"})
        env.pop("TMUX", None)
        argv = [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(ama.workspace), "--no-color", "--"]
        argv += ama.command("--log-level", "warning")
        with PtyTerminal(argv, env=env, cwd=ama.workspace) as term:
            term.wait_for("» ")
            term.type("read the notes\r")
            # The first response's usage_update (20,050 of 100,000): the progress moves while the model is still
            # at work on the next request, which the server holds until the report is seen.
            term.wait_for(_working_at("20"))
            second.set()
            term.wait_for(_working_at("45"))
            third.set()
            term.wait_for("All read.")
            term.wait_for(lambda out: out.rstrip().endswith("»".encode()))
            term.type("\x04")
            assert term.wait_exit() == 0
            seen = term.reports()
    turn = seen[next(i for i, r in enumerate(seen) if r["state"] == "working") :]
    end = next(i for i, r in enumerate(turn) if r["state"] == "done")
    progress = [r.get("progress") for r in turn[:end]]
    assert "20" in progress and "45" in progress  # each sent while the turn worked, in the meter's order
    assert progress.index("20") < progress.index("45")
    assert "progress" not in turn[end]  # progress only while working or blocked (the protocol's rule)
    assert all(r.get("app") == "ama" for r in seen)
