"""A cold first answer (issue 41): spawn → `initialize` → `session/new` → prompt → the first text chunk.

    .venv/bin/python tests/bench/bench_cold_answer.py [--runs 7] [--stamps] [--compare PATH]
    .venv/bin/python -m tests.bench.bench_cold_answer     # the same

An editor opens a thread and the person types at once. For each of `--runs` fresh `ama --mode acp` processes,
driven over raw pipes as an editor drives it: `initialize` written at spawn, `session/new` the moment its answer is
read, `session/prompt` the moment session/new's answer is read; the figure is spawn → the first
`agent_message_chunk` line read. The model is an OpenAI-compatible server on 127.0.0.1 (tests/support/llm_server.py,
in a process of its own) that answers at once with a short streamed text. Interleaved with those runs, the floor:
`python -c "import anyio, msgspec, httpx"` spawned and waited for, the same interpreter (what any Python agent that
talks HTTP pays before it can do anything). Also printed: spawn → `initialize`'s answer (the headline figure of
bench_startup.py, which must not grow), session/new's and the prompt's own latency, and with `--stamps` where the
time went in each run (each step's end, from spawn).

`--compare PATH` runs another tree's `ama_acp` (an export of main, say) interleaved with this one, and prints its
figures beside the paired difference: the before/after of a change, on the same machine at the same moment.

Goal (issue 41): the median first chunk within 1.6× the median floor of the same run. Exit 1 when it is missed, 2
when ama gives a wrong or missing answer. On a 2-core machine the figures are noisy: the ratio of one run is the
figure to trust, and the CPU figures (ama's user + system time when its first chunk is read, all its threads,
from /proc in 10 ms ticks; the floor's from getrusage) beside it, which a loaded machine disturbs less.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.bench.bench_streaming import Server

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: the repository's `tests` package, imported below where used

RUNS = 7
SIZE = 200  # characters of the answer: a few chunks, the first of them the figure
GOAL_RATIO = 1.6
FLOOR = "import anyio, msgspec, httpx"


def floor() -> tuple[float, float]:
    """The floor's wall time and CPU (user + system) in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def one(tmp: Path, server: Server, other: str | None = None) -> dict[str, float]:
    """A fresh ama, its first answer; each step's end in seconds from spawn. `other`: a folder holding another
    tree's `ama_acp` package, run instead of this one (PYTHONPATH: ama runs in its workspace, not in this tree)."""
    from tests.bench.bench_streaming import ENV, BenchFailure, RawAgent, answer
    from tests.support.harness import Ama, clean_env, local_config

    ama = Ama(tmp)
    ama.config.write_text(local_config(server.url), encoding="utf-8")
    server.queue(SIZE)
    spawned = time.perf_counter()
    env = clean_env(tmp, ENV if other is None else {**ENV, "PYTHONPATH": other})
    agent = RawAgent(ama.command(), str(ama.workspace), env, ama.stderr)
    try:
        agent.request(1, "initialize", {"protocolVersion": 1})
        initialized, _ = agent.response(1, "the initialize response")
        new_sent = agent.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
        opened, msg = agent.response(2, "the session/new response")
        sid = msg["result"].get("sessionId") if isinstance(msg["result"], dict) else None
        if not isinstance(sid, str):
            raise BenchFailure(f"session/new answered without a sessionId: {msg}")
        prompted = agent.request(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        agent.wait(lambda: agent.first_chunk is not None, "the first agent_message_chunk")
        first, cpu = agent.first_chunk, agent.first_chunk_cpu
        assert first is not None and cpu is not None
        agent.response(3, "the session/prompt response")
    finally:
        agent.close()
    text = "".join(_chunk_texts(agent.chunks))
    if text != answer(SIZE):
        raise BenchFailure(f"ama streamed {text[:600]!r}, not the answer sent{agent._tail()}")
    return {
        "initialize": initialized - spawned,
        "session_new": opened - new_sent,
        "prompt_to_chunk": first - prompted,
        "first_chunk": first - spawned,
        "cpu": cpu,
        "stamp_new_answered": opened - spawned,
    }


def _compile(folder: str) -> None:
    """The other tree's modules compiled once (compile_ama does this tree's): PYTHONDONTWRITEBYTECODE, if set,
    would make each of its processes compile them again."""
    import compileall

    compileall.compile_dir(str(Path(folder) / "ama_acp"), quiet=2)


def _chunk_texts(lines: list[bytes]) -> list[str]:
    import json

    return [json.loads(raw)["params"]["update"]["content"]["text"] for raw in lines]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="fresh processes (and floors), interleaved")
    parser.add_argument("--stamps", action="store_true", help="print each run's steps from spawn")
    parser.add_argument(
        "--compare",
        metavar="PATH",
        help="also run the ama_acp package under PATH (e.g. `git archive main ama_acp | tar -x -C PATH`), "
        "interleaved with this tree's, and print its figures and the paired difference",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.compare and not (Path(args.compare) / "ama_acp" / "__init__.py").is_file():
        parser.error(f"--compare: no ama_acp package under {args.compare}")

    from tests.bench._texts import machine, say
    from tests.bench.bench_streaming import BenchFailure, Server, compile_ama

    compile_ama()
    server = Server([SIZE])
    runs: list[dict[str, float]] = []
    others: list[dict[str, float]] = []
    floors: list[tuple[float, float]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            one(Path(tmp) / "warm", server)  # warm the file cache; not counted
            if args.compare:
                _compile(args.compare)
                one(Path(tmp) / "warm-other", server, args.compare)
            floor()
            for i in range(args.runs):
                floors.append(floor())
                if args.compare and i % 2:  # which goes first alternates
                    others.append(one(Path(tmp) / f"other{i}", server, args.compare))
                runs.append(one(Path(tmp) / str(i), server))
                if args.compare and not i % 2:
                    others.append(one(Path(tmp) / f"other{i}", server, args.compare))
    except BenchFailure as exc:
        sys.stderr.write(f"bench_cold_answer: FAILED: {exc}\n")
        return 2
    finally:
        server.close()

    def ms(key: str) -> str:
        values = [r[key] * 1000 for r in runs]
        return f"{statistics.median(values):6.1f} ms  (range {min(values):.1f}–{max(values):.1f})"

    base = statistics.median(wall for wall, _ in floors)
    first = statistics.median(r["first_chunk"] for r in runs)
    ratio = first / base
    base_cpu = statistics.median(cpu for _, cpu in floors)
    walls = [wall * 1000 for wall, _ in floors]
    say(f"bench_cold_answer — {machine()}")
    say(f"fresh ama --mode acp, an OpenAI-compatible server on 127.0.0.1, median of {args.runs}, interleaved")
    say()
    say(f"floor  python -c '{FLOOR}'  {base * 1000:6.1f} ms  (range {min(walls):.1f}–{max(walls):.1f})")
    say(f"spawn → initialize answered          {ms('initialize')}")
    say(f"session/new written → answered       {ms('session_new')}")
    say(f"prompt written → first chunk         {ms('prompt_to_chunk')}")
    say(f"spawn → first chunk                  {ms('first_chunk')}")
    cpu = statistics.median(r["cpu"] for r in runs)
    say(
        f"CPU    floor {base_cpu * 1000:.0f} ms, ama at its first chunk {cpu * 1000:.0f} ms (10 ms ticks): {cpu / base_cpu:.2f}×"
    )
    passed = ratio <= GOAL_RATIO
    say(f"ratio  first chunk / floor  {ratio:.2f}×  goal ≤ {GOAL_RATIO}×  {'PASS' if passed else 'FAIL'}")
    if others:
        say()
        say(f"--compare {args.compare}:")
        for key, what in (("initialize", "spawn → initialize answered"), ("first_chunk", "spawn → first chunk")):
            theirs = statistics.median(r[key] for r in others)
            paired = statistics.median(a[key] - b[key] for a, b in zip(runs, others, strict=True))
            say(
                f"  {what:<28} {theirs * 1000:6.1f} ms ({theirs / base:.2f}×); this tree − it, paired: {paired * 1000:+.1f} ms"
            )
    if args.stamps:
        say()
        for r in runs:
            say("  " + "  ".join(f"{k} {r[k] * 1000:.0f}" for k in ("initialize", "stamp_new_answered", "first_chunk")))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
