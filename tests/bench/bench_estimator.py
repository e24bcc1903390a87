"""Heuristic estimator throughput (a script, not a test): python tests/bench/bench_estimator.py

Goals (docs/rules.md U5 — every appended message is estimated once, so the estimator must be cheap):
>= 50 MB/s on ASCII text and >= 20 MB/s on mixed Chinese/English, MB being UTF-8 bytes. Each text is measured
whole and cut into 2 KB "messages" (per-call overhead), against two baselines measured in the same run:
`len(s)` (O(1) for a Python str, so it shows what "free" costs) and `s.encode("utf-8")` (one linear pass over
the text: the cost of merely touching every byte once).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ama_acp.context.estimate import heuristic_text_tokens
from tests.bench import _texts

GOALS = {"ASCII prose": 50.0, "English prose": 50.0, "Python code": 50.0, "mixed Chinese/English": 20.0}


def best(fn: Callable[..., object], repeat: int = 7) -> float:
    """The fastest of `repeat` calls of `fn` with no arguments (`...`: the lambdas below bind the loop's values
    as their parameters' defaults)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def chunks(s: str, size: int = 2048) -> list[str]:
    return [s[i : i + size] for i in range(0, len(s), size)]


def main() -> int:
    prose = _texts.english_prose(2_000_000)
    texts = {
        # Pure ASCII takes the isascii() path; real prose and code carry a few non-ASCII characters (dashes,
        # quotes, arrows) and take the regular-expression path.
        "ASCII prose": prose.encode("ascii", "ignore").decode("ascii"),
        "English prose": prose,
        "Python code": _texts.python_code(2_000_000),
        "mixed Chinese/English": _texts.mixed(1_000_000),
        "Chinese": _texts.chinese(700_000),
    }
    _texts.say(f"bench_estimator — {_texts.machine()}")
    _texts.say(
        f"{'text':24} {'MB':>6} {'whole MB/s':>11} {'x len()':>9} {'x encode':>9} "
        f"{'2KB-msg MB/s':>13} {'x encode':>9}  goal"
    )
    failed = False
    for name, text in texts.items():
        mb = len(text.encode("utf-8")) / 1e6
        parts = chunks(text)
        t_est = best(lambda t=text: heuristic_text_tokens(t))
        t_len = best(lambda t=text: len(t))
        t_enc = best(lambda t=text: t.encode("utf-8"))
        t_est_parts = best(lambda p=parts: [heuristic_text_tokens(x) for x in p])
        t_enc_parts = best(lambda p=parts: [x.encode("utf-8") for x in p])
        whole = mb / t_est
        per_msg = mb / t_est_parts
        goal = GOALS.get(name)
        verdict = ""
        if goal is not None:
            ok = min(whole, per_msg) >= goal
            failed |= not ok
            verdict = f">= {goal:.0f} MB/s {'PASS' if ok else 'FAIL'}"
        _texts.say(
            f"{name:24} {mb:6.2f} {whole:11.1f} {t_est / t_len:9.0f} {t_est / t_enc:9.2f} "
            f"{per_msg:13.1f} {t_est_parts / t_enc_parts:9.2f}  {verdict}"
        )
    _texts.say(
        "x len(): estimator time / len() time (len is O(1) on str); x encode: estimator time / one UTF-8 encode pass"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
