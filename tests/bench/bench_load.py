"""session/load of a 10,000-message session through the real server: time to the load response (replay
included, read over the pipe), the server's memory against the file size, and a baseline in the same run
(spawn → initialize → session/new, i.e. everything but the load itself).

    python tests/bench/bench_load.py

Goals (issue 5): under 1 s to the load response; memory under 3× the file size.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_acp.session.store.session_store import SessionStore
from tests.bench._ama import preloads, wait_preloaded
from tests.bench.bench_store import build_session


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(cmd: list[str], cwd: str, sid: str | None, data_dir: str) -> tuple[float, float, int, float]:
    preloaded = preloads(data_dir)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
    stdin, stdout = p.stdin, p.stdout
    assert stdin and stdout

    def send(i: int, method: str, params: dict[str, object]) -> None:
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
        stdin.flush()

    def wait(i: int) -> int:
        n = 0
        while True:
            msg = json.loads(stdout.readline())
            n += 1
            if msg.get("id") == i and "method" not in msg:
                return n

    send(1, "initialize", {"protocolVersion": 1})
    wait(1)
    wait_preloaded(data_dir, preloaded)
    before = rss_mb(p.pid)
    start = time.perf_counter()
    if sid is None:
        send(2, "session/new", {"cwd": cwd, "mcpServers": []})
    else:
        send(2, "session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    lines = wait(2)
    elapsed = time.perf_counter() - start
    peak = rss_mb(p.pid, "VmHWM")
    stdin.close()
    p.wait()
    return elapsed, peak - before, lines, before


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        ws = Path(tmp) / "ws"
        ws.mkdir()
        sid = build_session(SessionStore(data), 10_000, cwd=str(ws))
        size = (data / "sessions" / f"{sid}.jsonl").stat().st_size / 1e6
        cmd = [sys.executable, "-m", "ama_acp", "--mode", "acp", "--data-dir", str(data), "--model", "scripted/demo"]
        base = [run(cmd, str(ws), None, str(data)) for _ in range(3)]
        loads = [run(cmd, str(ws), sid, str(data)) for _ in range(3)]
    t = statistics.median(x[0] for x in loads)
    grow = statistics.median(x[1] for x in loads)
    print(f"session file: 10,000 messages, {size:.2f} MB; replayed updates: {loads[0][2] - 1:,}")
    print(f"baseline session/new response:          {statistics.median(x[0] for x in base) * 1000:8.1f} ms")
    print(f"session/load response (replay incl.):   {t * 1000:8.1f} ms   goal < 1000 ms")
    print(f"server memory growth during the load:   {grow:8.1f} MB   = {grow / size:.2f}x the file (goal < 3x)")
    print(f"server RSS before the load:             {loads[0][3]:8.1f} MB")


if __name__ == "__main__":
    main()
