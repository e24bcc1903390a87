"""Compaction of a long session (a script, not a test): python tests/bench/bench_compaction.py

A real SessionManager (store, meter, tools) whose model is the tests' LLMServer on 127.0.0.1 (OpenAI dialect),
and a session of about 150,000 estimated tokens (person's requests, tool calls with results, answers) on a
200,000-token window. `/compact` is timed end to end: reading the stored history, building the inventory and the
handoff request, the model's reply (local HTTP, a 6 KB handoff), saving both files, rebuilding the context and
persisting the entry. The baseline is the same compaction of a 15,000-token session, measured in the same run;
the figure before and after is printed for both.
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

from ama_acp.agent.inventory import build_inventory
from ama_acp.config import CompactionConfig, Config, ModelEntry, Price, ProviderConfig
from ama_acp.context.estimate import HeuristicEstimator
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.session.manager import SessionManager
from tests.bench import _texts
from tests.support.inprocess import ScriptedPeer
from tests.support.llm_server import LLMServer

WINDOW = 200_000
EST = HeuristicEstimator()
ROUNDS = 5
HANDOFF = "## 1. Goal and current state\n" + "The work goes on; details follow.\n" * 180


def history(tokens: int) -> list[Message]:
    code = _texts.python_code(400_000)
    out: list[Message] = []
    i = total = 0
    while total < tokens - 2_000:  # estimated tokens of the messages; the prefix is about 2,000 more
        off = (i * 997) % 390_000
        call = ToolCallPart(f"c{i}", "read_file", f'{{"path": "src/mod{i % 50}.py"}}')
        turn: list[Message] = [
            UserMessage([TextPart(f"Step {i}: look at src/mod{i % 50}.py and fix what is wrong. " * 3)]),
            AssistantMessage([TextPart("Reading."), call], stop="tool_use", usage=Usage(input=1000, output=20)),
            ToolResultMessage(f"c{i}", "read_file", [TextPart(code[off : off + 2500])]),
            AssistantMessage([TextPart("Fixed it. " * 30)], usage=Usage(input=1000, output=200)),
        ]
        out += turn
        total += sum(EST.message(m) for m in turn)
        i += 1
    return out


def manager(data: Path, url: str) -> SessionManager:
    config = Config(
        model="local/m",
        data_dir=str(data),
        providers={"local": ProviderConfig(kind="openai", base_url=url, api_key_env="BENCH_KEY", max_retries=0)},
        models=[ModelEntry(id="local/m", context_window=WINDOW, price=Price(input=1.0, output=2.0))],
        compaction=CompactionConfig(),
    )
    return SessionManager(config, ScriptedPeer(), default_model="local/m")


async def one(tokens: int, llm: LLMServer, root: Path) -> tuple[float, float, int, int]:
    """(seconds of /compact, seconds of the inventory alone, figure before, figure after)."""
    m = manager(root / f"d{tokens}-{time.monotonic_ns()}", llm.openai_url)
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    session = m.new_session(str(ws), None, [])
    for message in history(tokens):
        await session.host.append(message)
    session.ctx.replace(session.conversation.messages)  # estimate the whole context (the stored usage is made up)
    before = session.ctx.figures().used
    t0 = time.perf_counter()
    messages, commands = session.compactor._history()
    build_inventory(messages, slash_commands=commands)
    inventory = time.perf_counter() - t0
    llm.enqueue({"text": HANDOFF, "usage": {"input": before, "output": 1500}})
    t0 = time.perf_counter()
    await session.compactor.compact(manual=True)
    elapsed = time.perf_counter() - t0
    after = session.ctx.figures().used
    assert session.conversation.compactions == 1, "the compaction did not happen"
    await m.close(session.id)
    return elapsed, inventory, before, after


def main() -> None:
    os.environ["BENCH_KEY"] = "bench-key-abcdefgh"
    with tempfile.TemporaryDirectory() as tmp, LLMServer() as llm:
        root = Path(tmp)
        results: dict[int, list[tuple[float, float, int, int]]] = {15_000: [], 150_000: []}
        for _ in range(ROUNDS):
            for tokens in results:
                results[tokens].append(anyio.run(one, tokens, llm, root))
    base = statistics.median(r[0] for r in results[15_000])
    for tokens, rs in results.items():
        total = statistics.median(r[0] for r in rs)
        inv = statistics.median(r[1] for r in rs)
        _, _, before, after = rs[-1]
        print(
            f"{tokens:>7,}-token session: /compact {total * 1000:7.1f} ms (×{total / base:4.2f} the 15k baseline), "
            f"inventory {inv * 1000:6.1f} ms; figure {before:,} → {after:,} of {WINDOW:,}"
        )


if __name__ == "__main__":
    main()
