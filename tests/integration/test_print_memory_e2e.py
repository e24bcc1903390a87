"""`ama -p` on a long reply (issue 39 item 13): the answer goes to stdout as it streams and is never held beside
copies of itself. The peak memory of the real process (its `ru_maxrss`, from `wait4`) grows by about twice the
reply — the conversation's message and its line in the session file — where it grew by four times (text output)
and eight (json) when the answer was also collected, joined and encoded whole.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import Ama, clean_env
from tests.support.llm_server import LLMServer
from tests.support.waiting import poll_until

MIB = 1024 * 1024
DELTA = 64 * 1024  # characters of text per streamed delta
KEY = {"LOCAL_TEST_KEY": "k" * 12}
# Growth of the peak over a one-delta reply, in reply sizes: measured ~2.0 (the message and its session line);
# a copy more, anywhere, is ~3.
GROWTH_BOUND = 2.6


def configure(ama: Ama, url: str) -> None:
    ama.config.write_text(
        f'model = "local/m"\n\n[providers.local]\nkind = "openai"\nbase_url = "{url}"\n'
        f'api_key_env = "LOCAL_TEST_KEY"\nmax_retries = 0\n\n[[models]]\nid = "local/m"\ncontext_window = 100000\n'
    )


def long_reply(deltas: int) -> dict[str, object]:
    """`deltas` deltas of DELTA characters, each ending a line (the server renders them once, as sent)."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def event(delta: dict[str, str], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({**base, 'choices': [choice]})}\n"  # the server ends the event's blank line

    text = ("0123456789" * (DELTA // 10 + 1))[: DELTA - 1] + "\n"
    lines = [event({"role": "assistant", "content": ""}), *[event({"content": text})] * deltas]
    return {"sse_lines": [*lines, event({}, "stop"), "data: [DONE]\n"]}


def peak_of_print(ama: Ama, llm: LLMServer, deltas: int, *extra: str) -> tuple[int, Path]:
    """Run `ama -p` on a reply of `deltas` deltas; its peak RSS in bytes, and the file holding its stdout."""
    llm.enqueue(long_reply(deltas))
    out = ama.tmp / f"stdout-{deltas}-{len(extra)}"
    with out.open("wb") as sink, (ama.tmp / "stderr").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ama_acp", "-p", "go", "--data-dir", str(ama.data), "--config", str(ama.config)]
            + list(extra),
            stdout=sink,
            stderr=err,
            cwd=ama.workspace,
            env=clean_env(ama.tmp, KEY),
        )
    try:
        # wait4: this process's own peak, not the largest of every child the test runner ever had.
        reaped = poll_until(lambda: _reaped(proc.pid), 120, "ama -p to finish")
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    assert reaped is not None
    _, status, usage = reaped
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, (ama.tmp / "stderr").read_text()
    return usage.ru_maxrss * 1024, out


def _reaped(pid: int) -> tuple[int, int, resource.struct_rusage] | None:
    reaped = os.wait4(pid, os.WNOHANG)
    return reaped if reaped[0] == pid else None


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_long_reply_streams_to_stdout_without_copies_of_it(tmp_path: Path, output: str) -> None:
    ama = Ama(tmp_path)
    extra = ("--output-format", "json") if output == "json" else ()
    deltas = 32 * MIB // DELTA
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        baseline, _ = peak_of_print(ama, llm, 1, *extra)
        peak, out = peak_of_print(ama, llm, deltas, *extra)
    size = deltas * DELTA
    growth = peak - baseline
    assert growth < GROWTH_BOUND * size, f"peak grew by {growth / MIB:.0f} MiB on a {size / MIB:.0f} MiB reply"
    if output == "json":
        document = json.loads(out.read_bytes())
        assert len(document["answer"]) >= size and document["stopReason"] == "end_turn"
    else:
        assert out.stat().st_size >= size
        with out.open("rb") as f:
            assert f.read(DELTA) == (b"0123456789" * (DELTA // 10 + 1))[: DELTA - 1] + b"\n"


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_reader_that_closes_stdout_early_stops_the_turn_quietly(tmp_path: Path, output: str) -> None:
    """`ama -p … | head -c 100`: the first write to the closed pipe cancels the turn (nobody reads the rest) and ama
    exits 141 (128 + SIGPIPE, as a shell command would) without a traceback; the session keeps what streamed."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(long_reply(400))  # 25 MiB: far more than the pipe holds once its reader is gone
        read_end, write_end = os.pipe()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ama_acp", "-p", "go", "--data-dir", str(ama.data), "--config", str(ama.config)]
            + ["--output-format", output],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ama.workspace,
            env=clean_env(ama.tmp, KEY),
        )
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            assert reader.read(100)  # the head of the answer, then the reader goes away
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 141, err.decode()
    assert b"Traceback" not in err and b"BrokenPipeError" not in err and b"Exception ignored" not in err
    [session_file] = (ama.data / "sessions").glob("*.jsonl")
    kept = session_file.read_text()
    assert '"type":"user"' in kept and '"stop_reason":"cancelled"' in kept
