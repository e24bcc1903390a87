"""Session store benchmark (a script, not a test): python tests/bench/bench_store.py

Goals from the issue: loading a session of 10,000 messages (with tool calls, ~1 MB of tool output in all)
under 1 s, memory under 3x the file size, and appending as cheap at 10,000 messages as at 10. Baselines
are measured in the same run so the ratios mean something on any machine.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_acp.conversation.messages import (
    AssistantMessage,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.redact import Redactor
from ama_acp.session.store.entries import (
    Header,
    MessageEntry,
    TitleEntry,
    ToolCallEntry,
    TurnEntry,
    UsageEntry,
    clip_replay_text,
)
from ama_acp.session.store.session_store import SessionStore, new_session_id

MESSAGES = 10_000
TOOL_OUTPUT_TOTAL = 1_000_000
PROSE = "The quick brown fox jumps over the lazy dog while the build runs and the tests pass. "


def _text(n: int, seed: int) -> str:
    s = PROSE[seed % len(PROSE) :] + PROSE * (n // len(PROSE) + 1)
    return s[:n]


def _tool_sizes(count: int) -> list[int]:
    """Mostly small outputs, every 50th a big one, scaled so they add up to TOOL_OUTPUT_TOTAL."""
    raw = [6000 if i % 50 == 0 else 80 + (i * 37) % 300 for i in range(count)]
    scale = TOOL_OUTPUT_TOTAL / sum(raw)
    return [max(1, int(r * scale)) for r in raw]


def build_session(store: SessionStore, messages: int, cwd: str = "/work/proj") -> str:
    """Turns of 10 messages: the prompt, 4 rounds of tool call + result, the answer."""
    sid = new_session_id()
    turns = messages // 10
    sizes = iter(_tool_sizes(turns * 4))
    with store.create(Header(session_id=sid, cwd=cwd)) as w:
        for t in range(turns):
            w.append(MessageEntry(message=UserMessage(content=[TextPart(_text(150, t))])))
            for r in range(4):
                call_id = f"call_{t}_{r}"
                args = json.dumps({"path": f"src/module_{t % 40}.py", "offset": r * 100})
                w.append(
                    MessageEntry(
                        message=AssistantMessage(
                            content=[
                                ThinkingPart(_text(300, t + r)),
                                TextPart(_text(120, r)),
                                ToolCallPart(id=call_id, name="read", arguments=args),
                            ],
                            model="model-x",
                            stop="tool_use",
                            usage=Usage(input=20_000 + t, output=300, cache_read=18_000),
                        )
                    )
                )
                output = _text(next(sizes), t * 4 + r)
                w.append(
                    MessageEntry(
                        message=ToolResultMessage(tool_call_id=call_id, name="read", content=[TextPart(output)])
                    )
                )
                w.append(
                    ToolCallEntry(
                        wire_id=call_id,
                        provider_id=call_id,
                        name="read",
                        title=f"Read src/module_{t % 40}.py",
                        kind="read",
                        status="completed",
                        raw_input=json.loads(args),
                        content_text=clip_replay_text(output),
                    )
                )
                w.append(
                    UsageEntry(
                        model_id="model-x",
                        usage=Usage(input=20_000 + t, output=300, cache_read=18_000),
                        cost=0.0123,
                        meter={"used": 20_300 + t, "source": "reported"},
                    )
                )
            w.append(MessageEntry(message=AssistantMessage(content=[TextPart(_text(400, t))], model="model-x")))
            w.append(TurnEntry(stop_reason="end_turn"))
            if t == 0:
                w.append(TitleEntry(title="Benchmark session"))
    return sid


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def baseline_load(path: Path) -> list[Any]:
    data = path.read_bytes()
    return [json.loads(line) for line in data.splitlines()]


def append_cost(store: SessionStore, sid: str, n: int = 2000) -> float:
    entry = MessageEntry(message=UserMessage(content=[TextPart(_text(200, 1))]))
    with store.open_writer(sid) as w:
        start = time.perf_counter()
        for _ in range(n):
            w.append(entry)
        return (time.perf_counter() - start) / n


def main() -> None:
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(tmp, redactor=Redactor(), fsync="never")
        sid = build_session(store, MESSAGES)
        path = store.path(sid)
        size = path.stat().st_size
        loaded = store.read(sid)
        assert len(loaded.messages) == MESSAGES, len(loaded.messages)
        tool_bytes = sum(len(m.text) for m in loaded.messages if isinstance(m, ToolResultMessage))
        lines = len(loaded.entries) + 1
        del loaded

        t_read = timed(lambda: store.read(sid))
        t_base = timed(lambda: baseline_load(path))
        rows.append(
            ("load: store.read()", f"{t_read * 1000:.0f} ms", f"goal < 1000 ms; {t_read / t_base:.2f}x baseline")
        )
        rows.append(("baseline: bytes + json.loads/line", f"{t_base * 1000:.0f} ms", ""))

        gc.collect()
        tracemalloc.start()
        loaded = store.read(sid)
        _, peak = tracemalloc.get_traced_memory()
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del loaded
        rows.append(("load: peak memory", f"{peak / 1e6:.1f} MB", f"{peak / size:.2f}x file (goal < 3x)"))
        rows.append(("load: held after load", f"{held / 1e6:.1f} MB", f"{held / size:.2f}x file"))

        small = build_session(store, 10)
        per_small = min(append_cost(store, small) for _ in range(3))
        per_big = min(append_cost(store, sid) for _ in range(3))
        rows.append(("append at 10 messages", f"{per_small * 1e6:.1f} us", ""))
        rows.append(("append at 10,000 messages", f"{per_big * 1e6:.1f} us", f"{per_big / per_small:.2f}x (goal ~1x)"))

        synced = SessionStore(tmp, redactor=Redactor(), fsync="turn")
        with synced.open_writer(small) as w:
            t_turn = timed(lambda: w.append(TurnEntry(stop_reason="end_turn")), repeat=20)
        rows.append(("turn end (append + fsync)", f"{t_turn * 1e3:.2f} ms", "once per turn"))

        secrets = SessionStore(tmp, redactor=Redactor(["sk-bench-secret-value"]), fsync="never")
        per_redact = min(append_cost(secrets, small) for _ in range(3))
        rows.append(("append with 1 secret to check", f"{per_redact * 1e6:.1f} us", f"{per_redact / per_small:.2f}x"))

    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(tmp, redactor=Redactor(), fsync="never")
        for i in range(1000):
            s = build_session(store, 10)
            with store.open_writer(s) as w:
                w.append(TitleEntry(title=f"session {i}"))

        def cold_list() -> object:
            (store.sessions_dir / "index.json").unlink(missing_ok=True)
            return store.list()

        t_cold = timed(cold_list, repeat=3)
        t_warm = timed(lambda: store.list(), repeat=5)
        rows.append(("list 1,000 sessions, no index", f"{t_cold * 1000:.0f} ms", ""))
        rows.append(("list 1,000 sessions, with index", f"{t_warm * 1000:.1f} ms", ""))

        # session/list's held marks (docs/sessions.md "Sessions open elsewhere"): one read of /proc/locks per
        # page, and an lstat per listed session only when some file on that device is flocked.
        page = [s.session_id for s in store.list(page_size=50)[0]]
        t_free = timed(lambda: store.held_elsewhere(page), repeat=20)
        writers = [store.open_writer(sid) for sid in page]  # 50 flocks (this process's: the cost is the same)
        try:
            t_held = timed(lambda: store.held_elsewhere(page), repeat=20)
        finally:
            for w in writers:
                w.close()
        rows.append(("held marks of a 50-session page, none held", f"{t_free * 1e6:.0f} us", "per session/list"))
        rows.append(("held marks of a 50-session page, all held", f"{t_held * 1e6:.0f} us", "per session/list"))

    out = sys.stdout.write  # a script's output, not ama's (ruff bans print in the package)
    out(
        f"session: {MESSAGES:,} messages, {lines:,} lines, {size / 1e6:.2f} MB file, "
        f"{tool_bytes / 1e6:.2f} MB tool output; python {sys.version.split()[0]}, {os.cpu_count()} cpus\n"
    )
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        out(f"{name:<{width}}  {value:>10}  {note}\n")


if __name__ == "__main__":
    main()
