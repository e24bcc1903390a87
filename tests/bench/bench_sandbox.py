"""The sandbox's cost per command (a script, not a test): python tests/bench/bench_sandbox.py

`LocalWorkspace.run_command("true")` with the sandbox (the Landlock launcher, its private TMPDIR made and removed)
and without, interleaved in the same process so that load on the shared machine hits both alike. Goal (issue 38):
the median added cost under 10 ms. Prints the medians and the difference; exits 1 past the goal, 0 with a note
where the kernel has no Landlock (nothing to measure).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import Sandbox, sandbox_state
from ama_acp.tools.workspace import LocalWorkspace

RUNS = 40
GOAL_MS = 10.0


async def timed(ws: LocalWorkspace, cwd: str) -> float:
    start = time.perf_counter()
    result = await ws.run_command("true", cwd, 30.0, 1000)
    took = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    return took * 1000


async def main() -> int:
    state = sandbox_state(SandboxConfig())
    if not state.active:
        print(f"no sandbox here ({state.summary()}): nothing to measure")
        return 0
    with tempfile.TemporaryDirectory() as cwd:
        plain = LocalWorkspace()
        boxed = LocalWorkspace(sandbox=Sandbox(state, [cwd]))
        for ws in (plain, boxed):  # warm: the first process start pays for the page cache
            await timed(ws, cwd)
        bare: list[float] = []
        confined: list[float] = []
        for _ in range(RUNS):
            bare.append(await timed(plain, cwd))
            confined.append(await timed(boxed, cwd))
    b, c = statistics.median(bare), statistics.median(confined)
    print(f"sandbox: {state.summary()}")
    print(f"run_command('true'), median of {RUNS}: unsandboxed {b:.1f} ms, sandboxed {c:.1f} ms")
    print(f"added per command: {c - b:.1f} ms (goal < {GOAL_MS:.0f} ms)")
    return 0 if c - b < GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
