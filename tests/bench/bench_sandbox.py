"""The sandbox's cost per command (a script, not a test): python tests/bench/bench_sandbox.py

`LocalWorkspace.run_command("true")` unconfined and sandboxed each way this machine offers, interleaved in the same
process so that load on the shared machine hits all alike:

- Landlock, cold: every command starts its own launcher (`python -I -S`), as when none is ready;
- Landlock, warm: the launcher kept ready (sandbox/warm.py) takes the command — the usual case, since a model's turn
  always leaves time between two commands; before each round the benchmark waits until the launcher says it is
  ready (polled, as a test would), and so before every other run too, so that all run after the same pause;
- bubblewrap, where `bwrap` is installed and can start here (on a kernel with Landlock too: the bench forces it).

Each sandboxed run includes its private TMPDIR made and removed. The warm one does not include the start of the next
launcher: that begins in the background once run_command has returned, and the wait before the next round is for it.
Goal (issue 38): the median added cost of the sandbox in use (warm Landlock, else bubblewrap) under 10 ms. Prints
the medians and the differences; exits 1 past the goal, 0 with a note where nothing can confine.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import Sandbox, SandboxState, bwrap, sandbox_state
from ama_acp.tools.workspace import LocalWorkspace

RUNS = 40
GOAL_MS = 10.0


async def timed(ws: LocalWorkspace, cwd: str) -> float:
    start = time.perf_counter()
    result = await ws.run_command("true", cwd, 30.0, 1000)
    took = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    return took * 1000


async def until_ready(box: Sandbox) -> None:
    deadline = time.monotonic() + 10
    while not box.warm_ready():
        assert time.monotonic() < deadline, "the warm launcher never became ready"
        await anyio.sleep(0.002)


def bubblewrap_state(state: SandboxState, cwd: str) -> SandboxState | None:
    program = bwrap.find(os.environ.get("PATH", os.defpath), [cwd])
    if program is None or bwrap.trial(program):
        return None
    return SandboxState(state.mode, state.network, 0, "forced by the benchmark", program)


async def main() -> int:
    with tempfile.TemporaryDirectory() as cwd:
        state = sandbox_state(SandboxConfig(), [cwd])
        wrapped = bubblewrap_state(state, cwd)
        ways: dict[str, LocalWorkspace] = {"unsandboxed": LocalWorkspace()}
        warm: Sandbox | None = None
        if state.mechanism == "landlock":
            ways["Landlock, cold"] = LocalWorkspace(sandbox=Sandbox(state, [cwd], warm=False))
            warm = Sandbox(state, [cwd], warm=True)
            ways["Landlock, warm"] = LocalWorkspace(sandbox=warm)
        if wrapped is not None:
            ways["bubblewrap"] = LocalWorkspace(sandbox=Sandbox(wrapped, [cwd]))
        if len(ways) == 1:
            print(f"no sandbox here ({state.summary()}): nothing to measure")
            return 0
        try:
            times: dict[str, list[float]] = {name: [] for name in ways}
            for first in (True, *(False for _ in range(RUNS))):  # a first round warms the page cache, untimed
                for name, ws in ways.items():
                    # Every run after the same pause: the next launcher's start overlaps none, and each pays
                    # what a command after a model's turn pays (a CPU woken from idle) — not only the first.
                    if warm is not None and not first:  # the first command starts the first launcher
                        await until_ready(warm)
                    took = await timed(ws, cwd)
                    if not first:
                        times[name].append(took)
        finally:
            if warm is not None:
                await warm.aclose()
    medians = {name: statistics.median(t) for name, t in times.items()}
    bare = medians["unsandboxed"]
    print(f"sandbox: {state.summary()}")
    print(f"run_command('true'), median of {RUNS}:")
    for name, ms in medians.items():
        more = "" if name == "unsandboxed" else f"  added {ms - bare:5.1f} ms  ({ms / bare:.1f}x)"
        print(f"  {name:<15} {ms:5.1f} ms{more}")
    used = "Landlock, warm" if "Landlock, warm" in medians else "bubblewrap"
    added = medians[used] - bare
    print(f"added per command by the sandbox in use ({used}): {added:.1f} ms (goal < {GOAL_MS:.0f} ms)")
    return 0 if added < GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
