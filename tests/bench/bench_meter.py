"""Context meter update cost (a script, not a test): python tests/bench/bench_meter.py

Goal (docs/rules.md U5): the cost of one update — append a message, read the figures, build and offer the
`usage_update` payload — must not grow with the session. It is measured with 10 and with 100,000 messages already
in the history; the ratio 100,000 / 10 should stay <= 1.5. The same new messages are used in both runs, so the
estimator's work per message is identical and only the history differs. A quarter of the new assistant replies
report no usage (they join the trailing estimate, U8) and one in twenty is untrustworthy (U11), so the paths
that keep the anchor are measured too.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_acp.context.billing import Billing
from ama_acp.context.meter import ContextMeter
from ama_acp.context.reporter import UsageReporter
from ama_acp.conversation.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tests.bench import _texts

UPDATES = 2000
ROUNDS = 7
GOAL = 1.5
HISTORY = 100_000


def conversation(n: int, start_tokens: int = 5000, unmeasured: bool = False) -> list[Message]:
    """A plausible history: user turns, tool calls with results, assistant answers with usage (with `unmeasured`,
    some answers without usage or with untrustworthy usage)."""
    code = _texts.python_code(200_000)
    zh = _texts.chinese(20_000)
    msgs: list[Message] = []
    tokens = start_tokens
    i = 0
    while len(msgs) < n:
        k = len(msgs) % 4
        if k == 0:
            msgs.append(UserMessage(content=[TextPart(zh[(i * 37) % 19_000 :][:80] + f" step {i}")]))
        elif k == 1:
            call = ToolCallPart(id=f"c{i}", name="read", arguments=f'{{"path": "ama_acp/mod{i}.py"}}')
            tokens += 60
            msgs.append(AssistantMessage(content=[call], stop="tool_use", usage=Usage(input=tokens, output=30)))
        elif k == 2:
            off = (i * 997) % 190_000
            msgs.append(
                ToolResultMessage(tool_call_id=f"c{i}", name="read", content=[TextPart(code[off : off + 1500])])
            )
        else:
            tokens += 400
            usage: Usage | None = Usage(input=tokens, output=120)
            if unmeasured and i % 20 == 3:
                usage = Usage(input=-1, output=120)  # untrustworthy (U11)
            elif unmeasured and i % 4 == 3:
                usage = None  # no reading: joins the trailing estimate (U8)
            msgs.append(AssistantMessage(content=[TextPart("Done. " * 20)], usage=usage))
        i += 1
    return msgs


def run(history: list[Message], updates: list[Message]) -> float:
    """Seconds per update (append + figures + reporter) with `history` already in the meter."""
    meter = ContextMeter(window=1_000_000_000)  # large enough that no usage is "absurd" (U11)
    meter.set_prefix("system prompt " * 300, '{"tools": []}' * 100)
    billing = Billing()
    reporter = UsageReporter()
    for m in history:
        meter.append(m)
    gc.collect()
    t0 = time.perf_counter()
    for m in updates:
        meter.append(m)
        reporter.update(meter.figures(), billing.cost)
    return (time.perf_counter() - t0) / len(updates)


def main() -> int:
    _texts.say(f"bench_meter — {_texts.machine()}")
    big = conversation(HISTORY)
    small = big[:10]
    # Fresh message objects for every round: the estimate cache is per meter, so each round estimates them once.
    samples: dict[str, list[float]] = {"10": [], "big": []}
    for r in range(ROUNDS):
        updates = conversation(UPDATES + 20, start_tokens=10_000_000, unmeasured=True)[20:]
        order = [("10", small), ("big", big)] if r % 2 == 0 else [("big", big), ("10", small)]
        for name, hist in order:
            samples[name].append(run(hist, updates))
    t10, tbig = statistics.median(samples["10"]), statistics.median(samples["big"])
    ratio = tbig / t10
    _texts.say(f"update cost (append + figures + usage_update), median of {ROUNDS} rounds of {UPDATES} updates:")
    _texts.say(f"  history       10 messages: {t10 * 1e6:8.2f} µs/update")
    _texts.say(f"  history {HISTORY:>8,} messages: {tbig * 1e6:8.2f} µs/update")
    _texts.say(f"  ratio {HISTORY:,} / 10: {ratio:.2f}  (goal <= {GOAL})  {'PASS' if ratio <= GOAL else 'FAIL'}")

    # For scale: the O(n) operations, on demand only.
    meter = ContextMeter(window=1_000_000)
    for m in big:
        meter.append(m)
    t0 = time.perf_counter()
    meter.breakdown()
    t_breakdown = time.perf_counter() - t0
    t0 = time.perf_counter()
    meter.replace(big[-200:])
    t_replace = time.perf_counter() - t0
    _texts.say(
        f"  (on demand, {HISTORY:,} messages: breakdown {t_breakdown * 1e3:.2f} ms, "
        f"replace keeping 200 {t_replace * 1e3:.2f} ms)"
    )
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
