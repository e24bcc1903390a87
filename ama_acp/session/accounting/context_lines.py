"""The lines of `/context` that read the figure for a person (S3): the headline — the fill, the tier (`stale`
while it rests on an estimate since a switch or a compaction), the source, the boot cost and the number of the
last compaction, the readouts' parts (seed 002's strain) — and what a person must know to read it."""

from __future__ import annotations

from collections.abc import Sequence

from ama_acp.context.meter import ESTIMATE, PREFIX, USAGE, ContextFigures, reported
from ama_acp.context.tiers import Readout
from ama_acp.conversation.messages import AssistantMessage, Message


def estimated(f: ContextFigures) -> bool:
    """Whether the figure is ama's estimate (sources `prefix` and `estimate`) rather than a provider's count."""
    return f.source in (PREFIX, ESTIMATE)


def estimate_reason(f: ContextFigures, messages: Sequence[Message]) -> str:
    """Why the figure is an estimate, as far as the meter's state tells: the source, whether the latest reading
    was untrustworthy, and whether the newest response in the context reported usage. The meter does not record
    which edit ended its anchor, so when that response did report usage, the possible causes are named."""
    if f.source == PREFIX:
        return (
            "no model response yet; it counts what the first request will carry (the system prompt, the tool "
            "declarations and the messages so far)."
        )
    if f.untrusted:
        return "the last response's usage was not trustworthy, so ama counts the context itself."
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    if last is not None and not reported(last.usage):
        return "the last response reported no usage, so ama counts the context itself."
    return (
        "the context or the model changed since the last response that reported usage (a model switch, a "
        "compaction or pruning, or a changed system prompt or tool set); the next response measures it again."
    )


def figure_lines(f: ContextFigures, messages: Sequence[Message], boot: str, readout: Readout) -> list[str]:
    """/context's figure, and what a person must know to read it (an estimate, a lower bound). `boot`: the boot
    cost (`tiers.boot_text`), which the headline quotes, with the readout's stale tier and compaction number."""
    size = f"{f.window:,}" if f.window else "unknown"
    tail = f"tier {readout.tier_words(f.tier)} · source {f.source} · {boot}"
    tail += f" · compaction #{readout.compaction}" if readout.compaction else ""
    if estimated(f):  # every number that rests on an estimate says so (≈, "estimated"), and why
        pct = f" (≈ {f.percent:.1f} %, estimated)" if f.percent is not None else " (estimated)"
        lines = [
            f"**Context:** ≈ {f.used:,} of {size} tokens{pct} · {tail}",
            f"The figure is ama's estimate, not a provider's count: {estimate_reason(f, messages)}",
        ]
    else:
        pct = f" ({f.percent:.1f} %)" if f.percent is not None else ""
        lines = [f"**Context:** {f.used:,} of {size} tokens{pct} · {tail}"]
    if f.source == USAGE:
        lines.append(f"(last reported usage {f.usage_tokens:,} + estimate of what came after {f.trailing_tokens:,})")
    if f.untrusted:
        lines.append(
            "The last response's usage was not trustworthy (missing, negative or impossible figures): the tier "
            "stays unmeasured until a trustworthy reading returns."
        )
    if f.over_window and f.window is not None:
        lines.append(
            f"The figure is above the model's known window of {f.window:,} tokens: it is a lower bound, and "
            "the window in the catalog or the config (context_window) is likely wrong."
        )
    return lines
