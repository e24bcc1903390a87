"""The seed's OSC 7501 code against ama's (issue 29): the cases both run, ama's side of them, and the seed's side
through one long-lived node process (tests/support/program_status_seed.mjs).

A case is a JSON object: `{"encode": REPORT}`, `{"probe": true}` (what detection writes), or `{"emit": OPTIONS, "steps": [{"t": MS, "report"?: REPORT}]}`
for an emitter on a fake clock (each step moves the clock to `t`, firing every timer due by then at its own time,
then reports). The answer is `{"seq": str | null}` or `{"writes": [{"t": MS, "seq": str}]}`, the same from both.

The seed's file is found by the environment variable AMA_SEED_PROGRAM_STATUS, by default
/work/shared/seeds/program-status.mjs; without it or without `node` the seed's side is unavailable (the tests that
need it are skipped; the committed table in tests/data/ is checked everywhere).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ama_acp.client.terminal.program_status import Emitter, Report, encode

SEED_ENV = "AMA_SEED_PROGRAM_STATUS"
SEED_DEFAULT = "/work/shared/seeds/program-status.mjs"
DRIVER = Path(__file__).with_name("program_status_seed.mjs")
TABLE = Path(__file__).resolve().parents[1] / "data" / "program_status_seed.json"
FIELDS = ("state", "id", "kind", "progress", "app", "title", "msg")


def seed_file() -> Path | None:
    path = Path(os.environ.get(SEED_ENV) or SEED_DEFAULT)
    return path if path.is_file() else None


def unavailable() -> str | None:
    """Why the seed cannot be run here (None when it can)."""
    if shutil.which("node") is None:
        return "node is not installed"
    if seed_file() is None:
        return f"the seed's program-status.mjs is not at ${SEED_ENV} or {SEED_DEFAULT}"
    return None


def report_json(report: Report) -> dict[str, Any]:
    return {k: getattr(report, k) for k in FIELDS if getattr(report, k) is not None}


def report_of(data: dict[str, Any]) -> Report:
    return Report(**{k: data[k] for k in FIELDS if k in data})


class _Timer:
    def __init__(self, clock: FakeClock, due: float, order: int, callback: Callable[[], None]) -> None:
        self.clock, self.due, self.order, self.callback = clock, due, order, callback

    def cancel(self) -> None:
        self.clock.pending.discard(self)


class FakeClock:
    """Milliseconds that move only when told; timers fire in order of due time (then of setting), each at its
    own time — what the node driver does for the seed."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self.pending: set[_Timer] = set()
        self._order = 0

    def now(self) -> float:
        return self.t

    def call_later(self, delay_ms: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(self, self.t + delay_ms, self._order, callback)
        self._order += 1
        self.pending.add(timer)
        return timer

    def move_to(self, t: float) -> None:
        while True:
            due = [x for x in self.pending if x.due <= t]
            if not due:
                break
            timer = min(due, key=lambda x: (x.due, x.order))
            self.pending.discard(timer)
            self.t = max(self.t, timer.due)
            timer.callback()
        self.t = max(self.t, t)

    def advance(self, ms: float) -> None:
        self.move_to(self.t + ms)


def run_ama(case: dict[str, Any]) -> dict[str, Any]:
    """ama's answer to a case."""
    if "encode" in case:
        return {"seq": encode(report_of(case["encode"])) or None}
    if "probe" in case:
        from ama_acp.client.terminal.tty_input import PROBE

        return {"seq": PROBE}
    options = case["emit"]
    clock = FakeClock()
    writes: list[dict[str, Any]] = []
    emitter = Emitter(
        lambda seq: writes.append({"t": clock.now(), "seq": seq}),
        tmux=bool(options.get("tmux")),
        app=options.get("app"),
        clock=clock,
        throttle_ms=options.get("throttleMs", 500),
    )
    for step in case["steps"]:
        clock.move_to(step["t"])
        if "report" in step:
            emitter.report(report_of(step["report"]))
    emitter.dispose()
    return {"writes": writes}


class Seed:
    """One node process running the seed's code; `ask()` one case at a time."""

    def __init__(self) -> None:
        path = seed_file()
        node = shutil.which("node")
        assert path is not None and node is not None, unavailable()
        self._proc = subprocess.Popen(
            [node, str(DRIVER), str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def ask(self, case: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(case, ensure_ascii=True).encode("ascii") + b"\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            err = self._proc.stderr.read().decode("utf-8", "replace") if self._proc.stderr else ""
            raise RuntimeError(f"the seed's node driver ended: {err}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the seed's node driver failed on {case!r}: {answer['error']}")
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for stream in (self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()
