"""Streaming a long answer (issue 15): ama against a plain client reading the same SSE stream, same run.

    .venv/bin/python tests/bench/bench_streaming.py [--reps N] [--sizes 100000,400000] [--check-goals]
    .venv/bin/python -m tests.bench.bench_streaming      # the same; AMA_BENCH_REPS=N sets the repetitions

The tests' model server (tests/support/llm_server.py) runs in a process of its own and streams, in the OpenAI
dialect and with no delay, an English-prose answer of each size in 4-character `content` deltas (100,000
characters: 25,000 deltas), one SSE event per chunked write. The events are rendered once per size, before any
timing, so the server's per-request work is writing them (its pace is the same for every reader).

For each size and repetition, interleaved:

- direct read (the baseline): a fresh Python subprocess with httpx (sync `Client.stream` + `iter_lines`) that
  reads the stream, json-decodes each `data:` payload and concatenates the delta text; wall time from the
  request to the last byte, timed inside that process (its start and `import httpx` are not counted). The same
  with `httpx.AsyncClient` + `aiter_lines` on asyncio is printed beside it for reference.
- ama: a fresh `ama --mode acp` with a config pointing one model at the server, over raw pipes (this process
  writes JSON lines and reads stdout with `os.read`, splitting lines and keeping `agent_message_chunk` lines
  undecoded until the timing is over, so what is measured is the agent, not a client). `initialize`,
  `session/new`, wait (polling, with a deadline) until the preload is logged and the session's opening
  `usage_update` arrived, then time `session/prompt` written → its response read.

Reported per size (median of the repetitions; the ratio is the median of each repetition's ratio): the ratio
ama / direct read; the `agent_message_chunk` lines; the characters they carry (asserted equal to the answer, or
the run fails); the first-chunk latency (prompt written → first chunk line read); ama's CPU (user + sys from
/proc/<pid>/stat, all its threads) during the prompt divided by the number of deltas. Beside them, for reading
the figures: the same CPU counted from the first chunk on (without the first prompt's one-time work), and the
first-chunk latency of a small answer in a second session of the same, now warm, process. Goals (issue 15):
ratio ≤ 1.5×, ≤ 10 µs CPU per delta, first chunk ≤ 40 ms. A missed goal is reported, not fatal (pass
--check-goals to exit 1 on one); a wrong or missing answer always exits non-zero (2).

Three processes share the machine during an ama run (model server, ama, this reader) and two during a direct
read; on a 2-core machine the figures are noisy: trust the ratios of one run more than absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHUNK = 4  # characters per SSE delta
SIZES = (100_000, 400_000)
WARM = 4_000  # the small answer of the second prompt, in a warm process
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
DEADLINE = 300.0  # seconds for any one step; far above the slowest expected (a hung ama fails, never waits on)
GOAL_RATIO, GOAL_CPU_US, GOAL_FIRST_MS = 1.5, 10.0, 40.0
CHUNK_MARK = b'"agent_message_chunk"'


class BenchFailure(Exception):
    """ama (or the baseline) gave a wrong or missing answer: the run is void."""


def answer(size: int) -> str:
    """The streamed answer: deterministic English prose (newlines and punctuation included, so ama's JSON
    escaping is exercised)."""
    from tests.bench._texts import english_prose

    return english_prose(size)


# --- the model server, in a process of its own (so its thread does not share an interpreter with a reader) ----


def serve(sizes: list[int]) -> None:
    """`--serve`: print the server's OpenAI base URL, then queue one reply of N characters per line "N" read
    from stdin, answering "queued"; stop at EOF."""
    from ama_conformance.servers.model_dialects import render_openai
    from tests.support.llm_server import LLMServer

    usage = {"input": 20, "output": 0}
    events: dict[int, list[str]] = {}
    for n in sizes:
        reply = {"text": answer(n), "chunk_size": CHUNK, "usage": {**usage, "output": n // 4}}
        # Rendered once: as strings, `events` are sent verbatim (no json.dumps per request).
        events[n] = [data for _, data in render_openai(reply, "local-m", True)]
    with LLMServer() as server:
        sys.stdout.write(server.openai_url + "\n")
        sys.stdout.flush()
        for line in sys.stdin:
            server.enqueue({"events": events[int(line)]})
            sys.stdout.write("queued\n")
            sys.stdout.flush()


class Server:
    def __init__(self, sizes: list[int]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", ",".join(map(str, sizes))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdin and self.proc.stdout
        self.url = self._line()

    def _line(self) -> str:
        assert self.proc.stdout
        ready, _, _ = select.select([self.proc.stdout], [], [], DEADLINE)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line:
            raise BenchFailure(f"the model server did not answer (exit status {self.proc.poll()})")
        return line

    def queue(self, size: int) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(f"{size}\n")
        self.proc.stdin.flush()
        if self._line() != "queued":
            raise BenchFailure("the model server did not queue the reply")

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- the direct read (baseline), in a subprocess ---------------------------------------------------------------


_BODY = {
    "model": "local-m",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "write"}],
}


def _delta(payload: str) -> str:
    obj = json.loads(payload)
    choices = obj.get("choices") or []
    return (choices[0].get("delta") or {}).get("content") or "" if choices else ""


def direct(url: str, size: int, flavour: str) -> None:
    """`--direct`: one streamed request; print {"wall", "first", "cpu", "chars", "ok"} as JSON."""
    import httpx

    parts: list[str] = []
    first: list[float] = []

    def line(text: str, t0: float) -> None:
        if text.startswith("data:"):
            payload = text[5:].strip()
            if payload != "[DONE]":
                piece = _delta(payload)
                if piece:
                    if not first:
                        first.append(time.perf_counter() - t0)
                    parts.append(piece)

    headers = {"authorization": "Bearer " + ENV["LOCAL_TEST_KEY"]}
    if flavour == "sync":
        with httpx.Client(timeout=DEADLINE) as client:
            c0, t0 = time.process_time(), time.perf_counter()
            with client.stream("POST", url + "/chat/completions", json=_BODY, headers=headers) as resp:
                resp.raise_for_status()
                for text in resp.iter_lines():
                    line(text, t0)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    else:
        import asyncio

        async def run() -> tuple[float, float]:
            async with httpx.AsyncClient(timeout=DEADLINE) as client:
                c0, t0 = time.process_time(), time.perf_counter()
                async with client.stream("POST", url + "/chat/completions", json=_BODY, headers=headers) as resp:
                    resp.raise_for_status()
                    async for text in resp.aiter_lines():
                        line(text, t0)
                return time.perf_counter() - t0, time.process_time() - c0

        wall, cpu = asyncio.run(run())
    text = "".join(parts)
    result = {"wall": wall, "first": first[0] if first else None, "cpu": cpu, "chars": len(text)}
    result["ok"] = text == answer(size)
    sys.stdout.write(json.dumps(result) + "\n")


def direct_read(url: str, size: int, flavour: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--direct", url, str(size), flavour],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=DEADLINE,
    )
    if out.returncode != 0:
        raise BenchFailure(f"the direct read ({flavour}) failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    if not result["ok"]:
        raise BenchFailure(f"the direct read ({flavour}) got {result['chars']} characters, not the {size} sent")
    return result


# --- ama over raw pipes ----------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (all its threads) so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RawAgent:
    """`ama --mode acp` over raw pipes. stdout is read with os.read into lines; `agent_message_chunk` lines are
    only counted and kept as bytes (decoded after the timing), every other line is decoded. Each line is stamped
    with the time the read that completed it returned."""

    def __init__(self, cmd: list[str], cwd: str, env: dict[str, str], stderr: Path) -> None:
        self._stderr_path = stderr
        self._stderr = stderr.open("ab")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, cwd=cwd, env=env, bufsize=0
        )
        assert self.proc.stdin and self.proc.stdout
        self._fd = self.proc.stdout.fileno()
        self._rest = b""
        self.eof = False
        self.chunks: list[bytes] = []
        self.first_chunk: float | None = None
        self.first_chunk_cpu: float | None = None
        self.messages: list[dict[str, Any]] = []  # every decoded line, in order
        self.responses: dict[Any, tuple[float, dict[str, Any]]] = {}

    def forget_chunks(self) -> None:
        """Start counting a new prompt's chunks."""
        self.chunks = []
        self.first_chunk = self.first_chunk_cpu = None

    def send(self, msg: dict[str, Any]) -> float:
        assert self.proc.stdin
        data = json.dumps(msg).encode() + b"\n"
        stamp = time.perf_counter()
        try:
            self.proc.stdin.write(data)
        except BrokenPipeError as exc:
            raise BenchFailure(f"ama closed its stdin (exit status {self.proc.poll()}){self._tail()}") from exc
        return stamp

    def request(self, rid: int, method: str, params: dict[str, Any]) -> float:
        return self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def _read(self, timeout: float) -> None:
        if self.eof:
            raise BenchFailure(f"ama exited (status {self.proc.poll()}) before answering{self._tail()}")
        ready, _, _ = select.select([self._fd], [], [], timeout)
        if not ready:
            return
        data = os.read(self._fd, 1 << 20)
        now = time.perf_counter()
        if not data:
            self.eof = True
            return
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            if CHUNK_MARK in line:
                if self.first_chunk is None:
                    self.first_chunk = now
                    self.first_chunk_cpu = cpu_seconds(self.proc.pid)  # the rest is the streaming proper
                self.chunks.append(line)
            elif line.strip():
                self._message(line, now)

    def _message(self, line: bytes, now: float) -> None:
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise BenchFailure(f"ama wrote a line that is not JSON: {line[:200]!r}") from exc
        if not isinstance(msg, dict):
            raise BenchFailure(f"ama wrote a JSON line that is not an object: {line[:200]!r}")
        self.messages.append(msg)
        if "method" in msg and "id" in msg:  # a request to the client: none is expected for a plain answer
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not in this bench"}})
        elif "id" in msg:
            self.responses[msg["id"]] = (now, msg)

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchFailure(f"timed out after {timeout:g} s waiting for {what}{self._tail()}")
            self._read(min(left, 0.05))

    def response(self, rid: int, what: str) -> tuple[float, dict[str, Any]]:
        stamp, msg = self.wait(lambda: self.responses.get(rid), what)
        if "error" in msg or "result" not in msg:
            raise BenchFailure(f"{what}: ama answered {json.dumps(msg)[:500]}")
        return stamp, msg

    def close(self) -> None:
        assert self.proc.stdin
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + 10
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                self._read(0.05)  # keep draining stdout so ama never blocks on a full pipe while it exits
            except BenchFailure:
                break
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._stderr.close()

    def _tail(self) -> str:
        try:
            text = self._stderr_path.read_text(errors="replace")[-1500:]
        except OSError:
            return ""
        return f"\nama's stderr ends:\n{text}" if text.strip() else ""


def open_session(agent: RawAgent, rid: int, cwd: str) -> str:
    agent.request(rid, "session/new", {"cwd": cwd, "mcpServers": []})
    sid: str = agent.response(rid, "the session/new response")[1]["result"]["sessionId"]

    def opened() -> bool:  # the session's opening updates end with its usage_update: then it is idle
        return any(
            m.get("params", {}).get("sessionId") == sid
            and m["params"].get("update", {}).get("sessionUpdate") == "usage_update"
            for m in agent.messages
        )

    agent.wait(opened, "the new session's usage_update")
    return sid


def prompt(agent: RawAgent, server: Server, rid: int, sid: str, size: int) -> dict[str, Any]:
    """One timed prompt whose answer is `size` characters; its chunks checked against the answer."""
    server.queue(size)
    agent.forget_chunks()
    cpu0 = cpu_seconds(agent.proc.pid)
    sent = agent.request(rid, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]})
    done, msg = agent.response(rid, "the session/prompt response")
    cpu1 = cpu_seconds(agent.proc.pid)
    stop = msg["result"].get("stopReason")
    if stop != "end_turn":
        raise BenchFailure(f"session/prompt ended with stopReason {stop!r}, not 'end_turn'{agent._tail()}")
    text = check_chunks(agent.chunks, sid, answer(size))
    assert agent.first_chunk is not None and agent.first_chunk_cpu is not None  # check_chunks saw one
    return {
        "wall": done - sent,
        "first": agent.first_chunk - sent,
        "cpu": cpu1 - cpu0,
        "cpu_streaming": cpu1 - agent.first_chunk_cpu,
        "chunks": len(agent.chunks),
        "chars": len(text),
    }


def through_ama(tmp: Path, server: Server, size: int) -> dict[str, Any]:
    """A fresh ama: its first prompt (the figures), then a small prompt in a second session of the same, now
    warm, process (its first-chunk latency without the first prompt's one-time costs)."""
    from tests.bench._ama import preloads, wait_preloaded
    from tests.support.harness import Ama, clean_env, local_config

    ama = Ama(tmp)
    # A window far above the answer: at the helper's default (100k tokens) a 400k-character answer overflows it
    # and ama rightly appends a warning to the text.
    ama.config.write_text(local_config(server.url, timeout=DEADLINE, window=10_000_000), encoding="utf-8")
    before = preloads(ama.data)
    agent = RawAgent(ama.command(), str(ama.workspace), clean_env(tmp, ENV), ama.stderr)
    try:
        agent.request(1, "initialize", {"protocolVersion": 1})
        agent.response(1, "the initialize response")
        sid = open_session(agent, 2, str(ama.workspace))
        wait_preloaded(ama.data, before, timeout=DEADLINE)  # as it is by the time a person types a prompt
        if agent.chunks:
            raise BenchFailure("ama sent agent_message_chunk updates before any prompt")
        result = prompt(agent, server, 3, sid, size)
        warm = prompt(agent, server, 5, open_session(agent, 4, str(ama.workspace)), WARM)
    finally:
        agent.close()
    result["first_warm"] = warm["first"]
    return result


def check_chunks(lines: list[bytes], sid: str, expected: str) -> str:
    parts = []
    for raw in lines:
        msg = json.loads(raw)
        params = msg.get("params") or {}
        update = params.get("update") or {}
        content = update.get("content") or {}
        if (
            msg.get("method") != "session/update"
            or params.get("sessionId") != sid
            or update.get("sessionUpdate") != "agent_message_chunk"
            or content.get("type") != "text"
        ):
            raise BenchFailure(f"not an agent_message_chunk text update of the session: {raw[:300]!r}")
        parts.append(content["text"])
    text = "".join(parts)
    if text != expected:
        at = next(
            (i for i, (a, b) in enumerate(zip(text, expected, strict=False)) if a != b), min(len(text), len(expected))
        )
        raise BenchFailure(
            f"ama's chunks carry {len(text):,} characters in {len(lines):,} lines, the answer has {len(expected):,}; "
            f"they differ from character {at:,}: got {text[at : at + 40]!r}, expected {expected[at : at + 40]!r}"
        )
    return text


# --- the run -----------------------------------------------------------------------------------------------


def compile_ama() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (this project's machine) no ama process writes its compiled modules,
    so each fresh one would compile ~90 of them (the figures of a regular install, which ships them, are the
    ones wanted). Compile them once, as tests/conftest.py does; they are git-ignored."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        import compileall

        compileall.compile_dir(str(ROOT / "ama_acp"), quiet=2)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=int(os.environ.get("AMA_BENCH_REPS", "3")))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="answer sizes in characters")
    parser.add_argument("--check-goals", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.reps < 1 or any(n < CHUNK for n in sizes):
        parser.error("--reps must be at least 1 and every size at least 4 characters")

    from tests.bench._texts import machine

    compile_ama()
    server = Server([*sizes, WARM])
    rows: dict[int, dict[str, list[float]]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # Warm the file cache and the compiled modules: one of each, not counted.
            server.queue(WARM)
            direct_read(server.url, WARM, "sync")
            through_ama(Path(tmp) / "warm", server, WARM)
            for n in sizes:
                row: dict[str, list[float]] = {}
                for rep in range(args.reps):
                    server.queue(n)
                    d = direct_read(server.url, n, "sync")
                    server.queue(n)
                    a = direct_read(server.url, n, "async")
                    r = through_ama(Path(tmp) / f"{n}-{rep}", server, n)
                    deltas = -(-n // CHUNK)
                    for key, value in (
                        ("direct", d["wall"]),
                        ("direct_first", d["first"]),
                        ("direct_cpu_us", d["cpu"] / deltas * 1e6),
                        ("async", a["wall"]),
                        ("ama", r["wall"]),
                        ("ratio", r["wall"] / d["wall"]),
                        ("chunks", r["chunks"]),
                        ("chars", r["chars"]),
                        ("first", r["first"]),
                        ("cpu_us", r["cpu"] / deltas * 1e6),
                        ("cpu_stream_us", r["cpu_streaming"] / deltas * 1e6),
                        ("first_warm", r["first_warm"]),
                    ):
                        row.setdefault(key, []).append(value)
                rows[n] = row
    except BenchFailure as exc:
        sys.stderr.write(f"bench_streaming: FAILED: {exc}\n")
        return 2
    finally:
        server.close()
    return report(rows, args.reps, machine(), args.check_goals)


def report(rows: dict[int, dict[str, list[float]]], reps: int, where: str, check: bool) -> int:
    med = {n: {k: statistics.median(v) for k, v in row.items()} for n, row in rows.items()}
    print(f"bench_streaming — {where}")
    print(f"{CHUNK}-character SSE deltas, no delay; median of {reps} (fresh processes each); a noisy 2-core machine")
    print()
    head = (
        f"{'answer':>9} {'deltas':>7} │ {'direct':>9} {'(async)':>9} {'ama':>9} {'ratio':>6} │ {'chunks':>7} "
        f"{'chars':>8} │ {'1st chunk':>9} {'(warm)':>8} {'(direct)':>8} │ {'CPU/delta':>9} {'(after 1st)':>11} "
        f"{'(direct)':>8}"
    )
    print(head)
    print("─" * len(head))
    for n, m in med.items():
        print(
            f"{n:>9,} {-(-n // CHUNK):>7,} │ {m['direct'] * 1000:>6.0f} ms {m['async'] * 1000:>6.0f} ms "
            f"{m['ama'] * 1000:>6.0f} ms {m['ratio']:>5.2f}× │ {m['chunks']:>7,.0f} {m['chars']:>8,.0f} │ "
            f"{m['first'] * 1000:>6.1f} ms {m['first_warm'] * 1000:>5.1f} ms {m['direct_first'] * 1000:>5.1f} ms │ "
            f"{m['cpu_us']:>6.1f} µs {m['cpu_stream_us']:>8.1f} µs {m['direct_cpu_us']:>5.1f} µs"
        )
    print(
        "direct: a plain httpx client reading the same stream (async: httpx.AsyncClient); 1st chunk (warm): a "
        f"{WARM:,}-character answer in a second session of the same process; CPU/delta (after 1st): from the "
        "first chunk on, without the first prompt's one-time work"
    )
    ranges = "; ".join(f"{n:,}: {min(r['ratio']):.2f}–{max(r['ratio']):.2f}×" for n, r in rows.items())
    print(f"(ratio range over the repetitions: {ranges})")
    print()
    missed = False

    def goal(name: str, values: list[str], ok: bool, target: str) -> None:
        nonlocal missed
        missed |= not ok
        print(f"{name:<34} {'   '.join(values):<34} (goal {target})  {'PASS' if ok else 'FAIL'}")

    sizes = list(med)
    goal(
        "ratio ama / direct read",
        [f"{n / 1000:g}k {med[n]['ratio']:.2f}×" for n in sizes],
        all(med[n]["ratio"] <= GOAL_RATIO for n in sizes),
        f"≤ {GOAL_RATIO}×",
    )
    goal(
        "ama CPU per delta",
        [f"{n / 1000:g}k {med[n]['cpu_us']:.1f} µs" for n in sizes],
        all(med[n]["cpu_us"] <= GOAL_CPU_US for n in sizes),
        f"≤ {GOAL_CPU_US:g} µs",
    )
    goal(
        "first chunk (prompt → 1st chunk)",
        [f"{n / 1000:g}k {med[n]['first'] * 1000:.1f} ms" for n in sizes],
        all(med[n]["first"] * 1000 <= GOAL_FIRST_MS for n in sizes),
        f"≤ {GOAL_FIRST_MS:g} ms",
    )
    print(
        "agent_message_chunk lines          "
        + "   ".join(f"{n / 1000:g}k {med[n]['chunks']:,.0f} for {-(-n // CHUNK):,} deltas" for n in sizes)
        + "  (characters: all equal to the answer)"
    )
    return 1 if check and missed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve([int(s) for s in sys.argv[2].split(",")])
    elif sys.argv[1:2] == ["--direct"]:
        direct(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(main(sys.argv[1:]))
