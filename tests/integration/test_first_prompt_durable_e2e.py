"""A crash right after a new session's first prompt loses nothing the editor holds (issue 39 point 6): the
session's file exists before session/new's answer gives its id out (session/store/early.py), and the person's
prompt is written and synced before the turn's first request. Through real pipes and a real SIGKILL; a new
process then loads the session."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.harness import Ama, local_config
from tests.support.llm_server import LLMServer
from tests.support.raw import RawAma
from tests.support.waiting import poll_until

KEY = {"LOCAL_TEST_KEY": "k" * 12}


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def _start(ama: Ama, procs: list[subprocess.Popen[bytes]]) -> RawAma:
    raw = RawAma(ama, env=KEY, process=True)
    procs.append(raw.proc)
    raw.request(1, "initialize", {"protocolVersion": 1})
    return raw


def _new_and_prompt(raw: RawAma, ama: Ama, text: str) -> str:
    """session/new written the moment initialize is answered (as editors do), the prompt the moment its
    answer is read."""
    raw.send(
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(ama.workspace), "mcpServers": []}}
    )
    sid: str = raw.response(2)["result"]["sessionId"]
    prompt = [{"type": "text", "text": text}]
    raw.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": prompt}})
    return sid


def _load(ama: Ama, procs: list[subprocess.Popen[bytes]], sid: str) -> tuple[dict[str, Any], list[str]]:
    """session/load in a new process: its answer, and the person's messages it replayed."""
    again = _start(ama, procs)
    try:
        params = {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []}
        again.send({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": params})
        seen = again.until(2)
        replayed = [
            m["params"]["update"]["content"]["text"]
            for m in seen
            if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
        ]
        return seen[-1], replayed
    finally:
        again.close()


def _kill(raw: RawAma) -> None:
    raw.proc.send_signal(signal.SIGKILL)
    raw.proc.wait(10)


def test_a_kill_right_after_session_new_leaves_a_session_that_loads(tmp_path, procs):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url))
        llm.enqueue({"hang": 30})
        raw = _start(ama, procs)
        sid = _new_and_prompt(raw, ama, "remember the heron")
        _kill(raw)  # at once: the Session was not built yet (its imports take ~50 ms), no request was made
        answer, _ = _load(ama, procs, sid)
        assert "result" in answer, answer  # before: "Session not found"


def test_a_kill_during_the_first_request_keeps_the_session_and_its_prompt(tmp_path, procs):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        ama.config.write_text(local_config(llm.openai_url))
        llm.enqueue({"hang": 30})
        raw = _start(ama, procs)
        sid = _new_and_prompt(raw, ama, "remember the heron")
        poll_until(lambda: llm.requests, 15, "the turn's first request to reach the model server")
        _kill(raw)
        answer, replayed = _load(ama, procs, sid)
        assert "result" in answer, answer
        assert replayed == ["remember the heron"]
