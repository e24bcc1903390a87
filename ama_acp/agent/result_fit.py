"""Tool results sized to the window: what one result may add to the context, and the cut that keeps it there.

A result the model has not seen yet is never compacted or pruned away (agent/compaction.py keeps the newest
reply's calls and results whole), so it must fit beside what a compaction keeps: the results of one reply
together may take at most RESULT_SHARE_PERCENT of autoCompactAt (of the window when compaction is off), and
never more than the window still has room for. A 100,000-character file read on a 32K-window model is then cut
to what the model can hold, with a marker saying what was left out and how to read the rest, instead of
filling the window and being compacted away before the model ever saw it (docs/context.md "Tool results
sized to the window").
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ama_acp.tools.base import ToolResult

# The results of one reply together, as a share of autoCompactAt: a compaction keeps them (and the handoff
# still gets MARGIN_PERCENT's room under its limit; see agent/compaction.py).
RESULT_SHARE_PERCENT = 25
# Room always left for the model's answer, as a share of the window.
ANSWER_SHARE_PERCENT = 10
# Under this a result could not say anything useful; a result this small always goes through.
MIN_RESULT_TOKENS = 512
CHARS_PER_TOKEN = 4  # the heuristic's ASCII ratio (U1): a first cut in characters, checked with the estimator
MARKER_TOKENS = 80  # kept for the marker that says what was left out


def tool_chars(budget: int | None) -> int | None:
    """The characters a tool that cuts its own output (read_file) may use of `budget` tokens: room is left for
    its marker, so the session's check after it has nothing left to cut in ASCII text."""
    return None if budget is None else max(budget - MARKER_TOKENS, 1) * CHARS_PER_TOKEN


def result_budget(window: int | None, auto_compact_at: int | None, used: int, unseen: int) -> int | None:
    """Tokens the next tool result may take. `used`: the context now (the results of this reply so far
    included); `unseen`: the tokens of this reply's results already in it. None: no window, no bound."""
    if window is None or window <= 0:
        return None
    base = auto_compact_at if auto_compact_at is not None else window
    share = base * RESULT_SHARE_PERCENT // 100 - unseen
    room = window - used - window * ANSWER_SHARE_PERCENT // 100
    return max(MIN_RESULT_TOKENS, min(share, room))


def fit_result(result: ToolResult, budget: int | None, estimate_text: Callable[[str], int], window: int) -> ToolResult:
    """`result` with its text cut to `budget` tokens (at a line end where there is one), and a marker."""
    if budget is None:
        return result
    text = result.text
    tokens = estimate_text(text)
    if tokens <= budget:
        return result
    keep = max(budget - MARKER_TOKENS, 0)
    chars = len(text) * keep // tokens  # proportional: right for any mix of scripts, then checked
    cut = _at_line_end(text[:chars])
    while cut and estimate_text(cut) > keep:
        cut = _at_line_end(cut[: len(cut) * 9 // 10])
    left = len(text) - len(cut)
    marker = (
        f"\n\n[ama cut this result to fit the model's context window ({window:,} tokens): {len(cut):,} of "
        f"{len(text):,} characters are shown, the last {left:,} were left out. Ask for less at a time: for "
        "read_file a later `offset` or a smaller `limit`; for a search or a command, narrow it.]"
    )
    return msgspec.structs.replace(result, text=cut + marker)


def _at_line_end(text: str) -> str:
    """`text` up to its last line end, when that keeps at least half of it (a cut mid-line otherwise)."""
    end = text.rfind("\n")
    return text[:end] if end >= len(text) // 2 else text
