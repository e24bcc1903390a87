"""The first session of a fresh ama (issue 15): `session/new` sent the moment `initialize` is answered.

    .venv/bin/python tests/bench/bench_first_session.py [--runs 7] [--pause 0.5] [--check-goals]
    .venv/bin/python -m tests.bench.bench_first_session     # the same

Editors send `session/new` as soon as the `initialize` response arrives, while ama's preload thread may still be
importing the session modules. For each of 7 fresh `ama --mode acp` processes (the scripted demo model, no
network), over raw pipes: `initialize`, then immediately `session/new`; the latency is `session/new` written →
its response read. Interleaved with those, 7 more processes that wait 0.5 s between the two (the "after a
pause" figure: by then the preload has normally finished, so it is the baseline of the same run). Also printed:
spawn → `initialize` response; how many of the processes had logged the end of their preload before
`session/new` was written (from the timestamps in ama's log, millisecond resolution; a process closed before
its preload ended logs that it stopped instead); and `session/new` written → its `usage_update` read, the end
of the opening updates that follow the response (ama builds the session after answering: this is when it is
ready, for reading the figure beside the response's, no goal).

Goal (issue 15): session/new under 10 ms, right after initialize. A missed goal is reported, not fatal (pass
--check-goals to exit 1 on one); a missing or wrong answer always exits non-zero. On a 2-core machine the
figures are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ama_acp.server import PRELOAD_STOPPED, PRELOADED  # noqa: E402
from tests.bench.bench_streaming import BenchFailure, RawAgent, compile_ama  # noqa: E402
from tests.support.harness import Ama, clean_env  # noqa: E402

RUNS = 7
PAUSE = 0.5
GOAL_MS = 10.0


def preload_ends(log: Path, skip: int) -> list[tuple[float, bool]]:
    """(epoch time, finished) of each preload's end logged after the first `skip` of them (logging's local
    time, ms): PRELOADED when the preload finished, PRELOAD_STOPPED when the connection ended first (these
    processes close their input right after session/new)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    ends = [(line[:23], PRELOADED in line) for line in lines if PRELOADED in line or PRELOAD_STOPPED in line][skip:]
    return [(datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f").timestamp(), done) for s, done in ends]


def opening_done(msg: dict[str, Any], sid: str) -> bool:
    """The session's opening updates end with its usage_update (E4): then it is built and idle."""
    params = msg.get("params")
    if not isinstance(params, dict):
        return False
    update = params.get("update")
    return isinstance(update, dict) and params.get("sessionId") == sid and update.get("sessionUpdate") == "usage_update"


def one(ama: Ama, tmp: Path, pause: float) -> dict[str, float | bool]:
    log = ama.data / "logs" / "ama.log"
    before = len(preload_ends(log, 0))
    spawned = time.perf_counter()
    agent = RawAgent(ama.command(), str(ama.workspace), clean_env(tmp), ama.stderr)
    try:
        agent.request(1, "initialize", {"protocolVersion": 1})
        initialized, _ = agent.response(1, "the initialize response")
        if pause:
            time.sleep(pause)  # the condition measured (an editor that waits), not a wait for something
        wall = time.time()
        sent = agent.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})
        answered, msg = agent.response(2, "the session/new response")
        if not isinstance(msg["result"], dict) or not msg["result"].get("sessionId"):
            raise BenchFailure(f"session/new answered without a sessionId: {msg}")
        sid = msg["result"]["sessionId"]
        agent.wait(lambda: any(opening_done(m, sid) for m in agent.messages), "the new session's usage_update")
        opened = time.perf_counter()  # the read that brought it has just returned
    finally:
        agent.close()
    ends = preload_ends(log, before)  # close() waited for the process to exit: its log is complete
    if not ends:
        raise BenchFailure(f"ama logged neither {PRELOADED!r} nor {PRELOAD_STOPPED!r} in {log}")
    when, finished = ends[0]
    return {
        "initialize": initialized - spawned,
        "session_new": answered - sent,
        "opened": opened - sent,
        # The log stamps with milliseconds, truncated: a preload ended within the same millisecond counts.
        "preloaded_before": finished and when < wall,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="fresh processes for each of the two figures")
    parser.add_argument("--pause", type=float, default=PAUSE, help="seconds between the two in the paused runs")
    parser.add_argument("--check-goals", action="store_true", help="exit 1 when the goal is missed")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    from tests.bench._texts import machine

    compile_ama()
    runs: dict[str, list[dict[str, float | bool]]] = {"immediately": [], "after a pause": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ama = Ama(Path(tmp))  # one data directory for all, as an editor's ama has
            one(ama, Path(tmp), 0.0)  # warm the file cache; not counted
            for _ in range(args.runs):
                runs["immediately"].append(one(ama, Path(tmp), 0.0))
                runs["after a pause"].append(one(ama, Path(tmp), args.pause))
    except BenchFailure as exc:
        sys.stderr.write(f"bench_first_session: FAILED: {exc}\n")
        return 2

    print(f"bench_first_session — {machine()}")
    print(
        f"fresh ama --mode acp (scripted demo model), median of {args.runs} each, interleaved; a noisy 2-core machine"
    )
    print()
    ok = True
    for name, results in runs.items():
        new = [float(r["session_new"]) * 1000 for r in results]
        init = statistics.median(float(r["initialize"]) for r in results) * 1000
        done = sum(bool(r["preloaded_before"]) for r in results)
        passed = statistics.median(new) < GOAL_MS
        ok &= passed or name != "immediately"
        label = name if name == "immediately" else f"{name} of {args.pause:g} s"
        print(
            f"session/new {label:<22} {statistics.median(new):7.2f} ms  (range {min(new):.2f}–{max(new):.2f})  "
            f"goal < {GOAL_MS:g} ms  {'PASS' if passed else 'FAIL'}"
        )
        opened = statistics.median(float(r["opened"]) for r in results) * 1000
        print(f"    spawn → initialize response {init:.0f} ms; preload logged before session/new: {done} of {len(new)}")
        print(f"    session/new → its opening updates' end (usage_update) {opened:.1f} ms")
    immediate = statistics.median(float(r["session_new"]) for r in runs["immediately"])
    paused = statistics.median(float(r["session_new"]) for r in runs["after a pause"])
    print(f"ratio immediately / after a pause: {immediate / paused:.2f}×")
    return 1 if args.check_goals and not ok else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
