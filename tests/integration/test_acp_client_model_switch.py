"""`ama acp-client` forgets its meter when the model changes (issue 22, point 7), prompts and /model piped in (the
client in the test's process, `acp_client_in_process`: what it prints is the subject, not its process), against ama
(in-process too; two models: one with a window and a price, one with neither; the local HTTP model server behind
them) and against the stdlib fixture agent (its child process; `--models`, in either order of a model change's
updates). The program status's progress, under a real pseudo-terminal: the client and ama as real processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.harness import Ama, acp_client_in_process, clean_env
from tests.support.llm_server import LLMServer
from tests.support.pty_terminal import PtyTerminal

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "acp_fixtures" / "fixture_agent.py"
UNKNOWN = "ctx ? $?"
CONFIG = """
model = "local/big"
[providers.local]
kind = "openai"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 0

[[models]]
id = "local/big"
context_window = 100000
price = {{ input = 2.0, output = 8.0 }}

[[models]]
id = "local/nowindow"
"""


def acp_client(cwd: Path, agent: list[str], lines: list[str], env: dict[str, str], ama: Ama | None = None) -> list[str]:
    """Run the client with `lines` piped in (one prompt or /command each); its stdout, line by line. ama's `agent`
    runs in-process too (`ama`)."""
    stdin = "".join(line + "\n" for line in lines)
    done = acp_client_in_process(["--cwd", str(cwd), "--", *agent], env, stdin=stdin, agents_of=ama)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().splitlines()


def meters_after(lines: list[str], marker: str, until: str | None = None) -> list[str]:
    """The meter lines printed after the line `marker` (up to the line `until`)."""
    start = lines.index(marker)
    end = lines.index(until, start) if until is not None else len(lines)
    return [line for line in lines[start:end] if line.startswith("ctx ")]


@pytest.fixture
def llm():
    with LLMServer() as server:
        yield server


def test_ama_switching_to_a_model_without_window_or_price(tmp_path, llm):
    ama = Ama(tmp_path)
    ama.config.write_text(CONFIG.format(url=llm.openai_url), encoding="utf-8")
    llm.enqueue(
        {"text": "First answer.", "usage": {"input": 20_000, "output": 50}},
        {"text": "Second answer.", "usage": {"input": 21_000, "output": 40}},
        {"text": "Third answer.", "usage": {"input": 22_000, "output": 30}},
    )
    env = clean_env(tmp_path, {"LOCAL_TEST_KEY": "test-key-abcdefgh"})
    agent = ama.command("--log-level", "warning")
    lines = acp_client(
        ama.workspace,
        agent,
        ["first", "/model local/nowindow", "second", "/model local/big", "third"],
        env,
        ama,
    )
    # On the first model the meter has a figure and a cost.
    (before,) = meters_after(lines, "» first", "» /model local/nowindow")[-1:]
    assert before.startswith("ctx 20% (20,050 / 100,000) $0.0404 ") and "$?" not in before
    # The switch: the previous model's figure and cost are forgotten, once — and stay so through a turn, as ama
    # reports nothing for a model without a window (D3).
    assert meters_after(lines, "» /model local/nowindow", "» second") == [UNKNOWN]
    assert meters_after(lines, "» second", "» /model local/big") == [UNKNOWN]
    # Back to a model with a window: ama's options, then its figure (E3) — the figure shows, with no `ctx ?` before it.
    (back,) = meters_after(lines, "» /model local/big", "» third")
    assert back.startswith("ctx ") and not back.startswith("ctx ?")
    assert "Second answer." in lines and "Third answer." in lines


@pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "openpty"), reason="POSIX terminals")
def test_the_program_status_drops_its_progress_after_a_switch_to_a_model_without_window(tmp_path, llm):
    """A turn's progress is the context percent of the model in use; after a switch to a model without a window
    no progress is invented. The figure of a turn's own usage_update arrives just before its `done`, inside the
    seed's 500 ms throttle (OSC 7501: the newest report wins, so it may never be sent): the next turn's first
    `working` report, a change of state that goes at once, is where the figure shows."""
    ama = Ama(tmp_path)
    ama.config.write_text(CONFIG.format(url=llm.openai_url), encoding="utf-8")
    llm.enqueue(
        {"text": "First answer.", "usage": {"input": 20_000, "output": 50}},
        {"text": "Second answer.", "usage": {"input": 21_000, "output": 40}},
        {"text": "Third answer.", "usage": {"input": 22_000, "output": 30}},
    )
    env = clean_env(tmp_path, {"LOCAL_TEST_KEY": "test-key-abcdefgh", "TERM": "xterm-256color"})
    env.pop("TMUX", None)
    argv = [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(ama.workspace), "--no-color", "--"]
    argv += ama.command("--log-level", "warning")
    with PtyTerminal(argv, env=env, cwd=ama.workspace) as term:
        term.wait_for("» ")
        for prompt, answer in (("first", "First answer."), ("second", "Second answer.")):
            term.type(f"{prompt}\r")
            term.wait_for(answer)
            term.wait_for(lambda out: out.rstrip().endswith("»".encode()))
        term.type("/model local/nowindow\r")
        term.wait_for("(local/nowindow)")
        term.wait_for(lambda out: out.rstrip().endswith("»".encode()))
        term.type("third\r")
        term.wait_for("Third answer.")
        term.wait_for(lambda out: out.rstrip().endswith("»".encode()))
        term.type("\x04")
        assert term.wait_exit() == 0
        reports = term.reports()
    turns: list[list[dict[str, str]]] = [[]]
    for report in reports:
        turns[-1].append(report)
        if report["state"] == "done":
            turns.append([])
    _, second, third = ([r for r in turn if r["state"] == "working"] for turn in turns[:3])
    assert second[0].get("progress") == "20"  # 20,050 of 100,000 on the first model, shown as the turn starts
    assert third and all("progress" not in r for r in third)  # the meter is unknown: no progress invented


def fixture(order: str) -> list[str]:
    return [sys.executable, str(FIXTURE), "--models", order]


SCRIPT = ["hello", "/model nowindow", "again", "/model big", "once more"]


def test_an_agent_sending_the_options_first(tmp_path):
    lines = acp_client(tmp_path, fixture("options-first"), SCRIPT, clean_env(tmp_path))
    assert meters_after(lines, "» hello", "» /model nowindow")[-1].startswith("ctx 21% (21,000 / 100,000) $0.0125 ")
    assert meters_after(lines, "» /model nowindow", "» again") == [UNKNOWN]
    assert meters_after(lines, "» again", "» /model big") == [UNKNOWN]
    # The new model's figure, sent after its options, shows at once; the cost stays unknown (a turn had no price).
    (back,) = meters_after(lines, "» /model big", "» once more")
    assert back.startswith("ctx 41% (41,000 / 100,000) $? ")
    assert meters_after(lines, "» once more")[-1].startswith("ctx 61% (61,000 / 100,000) $? ")


def test_an_agent_sending_the_usage_before_the_options(tmp_path):
    """The documented rule: a figure sent before the model change it belongs to is forgotten with the old
    model's; the meter is unknown until the next figure, which shows as usual."""
    lines = acp_client(tmp_path, fixture("usage-first"), SCRIPT, clean_env(tmp_path))
    assert meters_after(lines, "» /model nowindow", "» again") == [UNKNOWN]
    assert meters_after(lines, "» /model big", "» once more") == []  # the line already reads `ctx ? $?`
    assert meters_after(lines, "» once more")[-1].startswith("ctx 61% (61,000 / 100,000) $? ")
