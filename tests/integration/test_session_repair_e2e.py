"""Sessions killed at any point load and can be prompted again; secrets reach no file, no log, no command.

Over real pipes (the `ama --mode acp` subprocess; the loads after the kills in-process, tests/support/raw.py)
against a real HTTP model server that, like the real APIs, answers HTTP 400 to a conversation holding a tool
call without its result.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.harness import Ama, local_config
from tests.support.llm_server import LLMServer
from tests.support.raw import RawAma
from tests.support.waiting import poll_until

SESSIONS_PER_PROCESS = 5
PROCESSES = 10  # 50 sessions, 10 kills


def configure(ama: Ama, url: str, extra: str = "") -> None:
    ama.config.write_text(local_config(url, key_env="LOCAL_KEY", top=f'mode = "full_access"\n{extra}'))


def more_requests_than(llm: LLMServer, n: int) -> Callable[[], bool]:
    return lambda: len(llm.requests) > n


def busy_replies(n: int) -> list[dict[str, Any]]:
    """Turns that keep ama busy in every state: streaming, a command running, between a call and its result."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 3 == 2:
            out.append({"text": "thinking out loud " * 20, "chunk_size": 4, "delay": 0.002})
        else:
            out.append(
                {
                    "text": "Running it.",
                    "delay": 0.003,
                    "tool_calls": [
                        {"id": f"call_{i}", "name": "run_command", "arguments": {"command": "sleep 0.2; echo ran"}},
                        {"id": f"read_{i}", "name": "read_file", "arguments": {"path": "f.txt"}},
                    ],
                }
            )
    return out


def test_sigkill_at_random_points_then_every_session_loads_and_prompts_again(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "f.txt").write_text("hello\n")
    # A command's private temp folder (the sandbox's) is removed when the command ends; a SIGKILL of ama in the
    # middle leaves it where TMPDIR says: here, the test's own folder (the next process sweeps the dead ones).
    (tmp_path / "cmdtmp").mkdir()
    env = {"LOCAL_KEY": "local-test-key-123", "TMPDIR": str(tmp_path / "cmdtmp")}
    seed = int(os.environ.get("AMA_KILL_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    sids: list[str] = []
    started = time.monotonic()
    with LLMServer() as llm:
        llm.enqueue(*busy_replies(PROCESSES * SESSIONS_PER_PROCESS * 12))
        configure(ama, llm.openai_url)
        for p in range(PROCESSES):
            raw = RawAma(ama, env=env, process=True)  # SIGKILLed: no clean-up of ama's may run
            raw.validate = False  # the stream is cut by the kill; the load phase validates
            raw.request(1, "initialize", {"protocolVersion": 1})
            mine = []
            for s in range(SESSIONS_PER_PROCESS):
                res = raw.request(10 + s, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
                mine.append(res["result"]["sessionId"])
            before = len(llm.requests)
            for s, sid in enumerate(mine):
                prompt = [{"type": "text", "text": f"work {p}.{s}"}]
                raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 100 + s,
                        "method": "session/prompt",
                        "params": {"sessionId": sid, "prompt": prompt},
                    }
                )
            poll_until(more_requests_than(llm, before), 10, "the first model request")
            time.sleep(rng.uniform(0.0, 1.2))  # the random kill point is the test, not a wait
            os.kill(raw.proc.pid, signal.SIGKILL)
            raw.proc.wait(10)
            sids += mine
        kill_phase = time.monotonic() - started
    assert kill_phase < 60, f"the kill phase took {kill_phase:.0f} s"

    log_before = ama.log_text()
    with LLMServer() as llm:  # a fresh server: the replies of the load phase only
        llm.enqueue(*({"text": f"Back on track {i}."} for i in range(len(sids))))
        configure(ama, llm.openai_url)
        raw = RawAma(ama, env=env)
        raw.request(1, "initialize", {"protocolVersion": 1})
        for i, sid in enumerate(sids):
            loaded = raw.request(
                1000 + i, "session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []}
            )
            assert "result" in loaded, (seed, sid, loaded)
            answer = raw.request(
                2000 + i, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go on"}]}
            )
            assert answer.get("result", {}).get("stopReason") == "end_turn", (seed, sid, answer)
        assert raw.close() == 0
        assert llm.rejections == [], (seed, llm.rejections[:3])
        assert len(llm.requests) == len(sids)  # one request a session, each accepted
    repaired = ama.log_text()[len(log_before) :].count("repaired its context")
    assert repaired >= 1, f"seed {seed}: no kill landed between a tool call and its result"
    # Every file now pairs every call with a result on disk too (the repair was written back).
    for sid in sids:
        lines = (ama.data / "sessions" / f"{sid}.jsonl").read_text().splitlines()
        calls, results = set(), set()
        for line in lines[1:]:
            entry = json.loads(line)
            if entry.get("t") != "msg":
                continue
            m = entry["message"]
            calls |= {
                c["id"] for c in m.get("content", []) if m["type"] == "assistant" and c.get("type") == "tool_call"
            }
            if m["type"] == "tool_result":
                results.add(m["tool_call_id"])
        assert calls <= results, (seed, sid, calls - results)


def _walk_files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def test_no_secret_reaches_any_file_the_log_stderr_or_a_command(tmp_path):
    ama = Ama(tmp_path)
    secrets = {
        "GITHUB_TOKEN_RW": "ghp_rwSECRETvalue0001",
        "DB_PASS": "dbpassSECRETvalue0002",
        "TOKEN": "plainSECRETtoken0003",
        "APIKEY": "apikeySECRETvalue0004",
        "AWS_SESSION_TOKEN": "awsSECRETsession0005",
        "LOCAL_KEY": "localSECRETkey0006",  # the configured api_key_env: secret by configuration, not by name
    }
    env = {**secrets, "PLAIN_SETTING": "visible-setting-0007"}
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(
            {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "env"}}]},
            {"text": "Here is your environment."},
            {"status": 401, "message": "Incorrect API key provided: localSECRETkey0006"},  # a provider echoing the key
        )
        raw = RawAma(ama, env=env, process=True)  # everything the process writes to fd 2, not only its log
        raw.request(1, "initialize", {"protocolVersion": 1})
        sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
        seen: list[dict[str, Any]] = []
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "print env"}]},
            }
        )
        deadline = time.monotonic() + 20
        while True:
            msg = raw.recv(max(0.1, deadline - time.monotonic()))
            seen.append(msg)
            if msg.get("id") == 3 and "method" not in msg:
                break
        assert msg["result"]["stopReason"] == "end_turn"
        answer = raw.request(4, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]})
        assert answer["result"]["stopReason"] == "end_turn"
        assert raw.close() == 0
        # The command ran and printed its environment: the ordinary setting is there, no secret is.
        printed = json.dumps([m for m in seen if m.get("method") == "session/update"])
        assert "visible-setting-0007" in printed
        # The model was sent the command's output: also without secrets (the request bodies).
        sent = json.dumps([r.body for r in llm.requests])
        assert "visible-setting-0007" in sent
    for name, value in secrets.items():
        assert value not in printed, name
        assert value not in sent, name
    stderr = ama.stderr.read_text(errors="replace")
    files = _walk_files(ama.data, ama.workspace)
    assert any(p.suffix == ".jsonl" for p in files) and any(p.name == "ama.log" for p in files)
    for path in files:
        data = path.read_bytes()
        for name, value in secrets.items():
            assert value.encode() not in data, f"{name} found in {path}"
    for name, value in secrets.items():
        assert value not in stderr, f"{name} found on stderr"
