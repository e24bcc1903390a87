"""Regenerate tests/data/program_status_seed.json: the seed's answers (program-status.mjs, issue 29) to a fixed
list of OSC 7501 cases, which tests/unit/test_program_status_seed.py checks ama against in every run, with or
without node.

    .venv/bin/python -m tests.tools.program_status_table            # rewrite the table from the seed
    .venv/bin/python -m tests.tools.program_status_table --check    # exit 1 when the table is not the seed's

Needs `node` and the seed's file (AMA_SEED_PROGRAM_STATUS, default /work/shared/seeds/program-status.mjs).
The cases are listed here; the answers are only ever the seed's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.support.program_status_seed import TABLE, Seed, unavailable

R = dict[str, Any]
LONG_WIDE = "漢" * 70  # 210 bytes: over the title's 192
MIXED = "a" * 188 + " " + "é" * 3  # 194 bytes: the cut falls right after the space


def _encode_cases() -> list[R]:
    reports: list[R] = [
        {"state": "idle"},
        {"state": "idle", "app": "ama"},
        {"state": "sleeping"},
        {"state": "working", "id": "ama/s1", "progress": 34, "app": "ama", "title": "fixing tests"},
        {"state": "working", "id": ""},
        {"state": "working", "id": "a//b"},
        {"state": "working", "id": "/".join(["a"] * 8)},
        {"state": "working", "id": "/".join(["a"] * 9)},
        {"state": "working", "id": "/".join(["b" * 32] * 4)},
        {"state": "working", "id": "x" * 33},
        {"state": "working", "id": "é"},
        {"state": "working", "kind": "permission", "progress": 101, "app": "bad app"},
        {"state": "blocked", "kind": "permission", "progress": 0},
        {"state": "blocked", "kind": "lunch", "progress": 100},
        {"state": "blocked", "kind": "question", "progress": -1},
        {"state": "blocked", "kind": "auth"},
        {"state": "done", "progress": 50, "kind": "permission"},
        {"state": "error", "msg": "the agent exited (code 1)"},
        {"state": "clear"},
        {"state": "clear", "app": "ama", "title": "a title", "msg": "a message", "progress": 5},
        {"state": "clear", "id": "ama/s1"},
        {"state": "idle", "title": "bell\x07here"},
        {"state": "idle", "title": "tab\there\nnew\r\nline"},
        {"state": "idle", "title": "esc\x1b[31mred\x1b[0m"},
        {"state": "idle", "title": "c1\x85\x9bhere\x7fdel"},
        {"state": "idle", "title": "zero\u200bwidth\u200cjoin\u200dx\ufeffbom"},
        {"state": "idle", "title": "nbsp\u00a0and\u2003em\u3000ideo\u2028ls\u2029ps"},
        {"state": "idle", "title": "\x1c\x1d\x1e\x1f fs gs rs us"},
        {"state": "idle", "title": "  \t padded \n "},
        {"state": "idle", "title": "\u200b"},
        {"state": "idle", "title": " \x00 "},
        {"state": "idle", "title": ""},
        {"state": "idle", "title": "e\u0301 combining \U0001f600 emoji \U0001f469\u200d\U0001f4bb zwj"},
        {"state": "idle", "title": "rtl\u202eoverride\u2066isolate"},
        {"state": "idle", "title": LONG_WIDE},
        {"state": "idle", "title": "x" * 192},
        {"state": "idle", "title": "x" * 193},
        {"state": "idle", "title": MIXED},
        {"state": "idle", "title": "y" * 188 + "\U0001f600z"},
        {"state": "working", "msg": "m" * 10_000, "title": "t" * 1_000, "id": "/".join(["c" * 15] * 8)},
        {"state": "working", "msg": "é" * 1025},
        {"state": "working", "msg": "word " * 500},
        {"state": "blocked", "kind": "permission", "msg": "run: rm -rf build", "app": "ama", "id": "ama"},
    ]
    return [{"encode": r} for r in reports]


def _emit(steps: list[tuple[int, R | None]], **options: Any) -> R:
    return {"emit": options, "steps": [{"t": t, "report": r} if r is not None else {"t": t} for t, r in steps]}


def _emit_cases() -> list[R]:
    w = {"state": "working"}
    return [
        # the same report twice: once
        _emit([(0, w), (10, w), (1000, w)], app="ama"),
        # a msg change within the throttle waits; the newest one goes at 500 ms
        _emit([(0, {**w, "msg": "one"}), (100, {**w, "msg": "two"}), (200, {**w, "msg": "three"}), (2000, None)]),
        # a progress change too (same state and kind)
        _emit([(0, {**w, "progress": 1}), (100, {**w, "progress": 2}), (499, {**w, "progress": 3}), (2000, None)]),
        # a held change that goes back to what was sent: nothing more
        _emit([(0, {**w, "msg": "a"}), (100, {**w, "msg": "b"}), (200, {**w, "msg": "a"}), (2000, None)]),
        # a change of state goes at once and drops the held one
        _emit([(0, {**w, "msg": "a"}), (100, {**w, "msg": "b"}), (200, {"state": "done"}), (2000, None)]),
        # a change of kind is a change of head
        _emit(
            [
                (0, {"state": "blocked", "kind": "permission"}),
                (50, {"state": "blocked", "kind": "question"}),
                (60, {"state": "blocked", "kind": "question", "msg": "q"}),
                (2000, None),
            ]
        ),
        # exactly at 500 ms: sent; at 499: held
        _emit([(0, {**w, "msg": "a"}), (500, {**w, "msg": "b"}), (999, {**w, "msg": "c"}), (2000, None)]),
        # the final clear carries the app, and forgets everything
        _emit([(0, {"state": "idle"}), (100, {"state": "clear"}), (150, {"state": "idle"})], app="ama"),
        # a clear during a held change: the held one never goes
        _emit(
            [(0, {**w, "title": "a"}), (100, {**w, "title": "b"}), (200, {"state": "clear"}), (2000, None)], app="ama"
        ),
        # clear twice: twice
        _emit([(0, {"state": "clear"}), (1, {"state": "clear"})], app="ama"),
        # ids: a clear of one id forgets it and those below, not a sibling with the same prefix
        _emit(
            [
                (0, {**w, "id": "ama"}),
                (0, {**w, "id": "ama/s1"}),
                (0, {**w, "id": "amanda"}),
                (10, {"state": "clear", "id": "ama"}),
                (20, {**w, "id": "ama/s1"}),
                (30, {**w, "id": "amanda"}),
                (40, {"state": "clear"}),
                (50, {**w, "id": "amanda"}),
            ]
        ),
        # a clear with an empty id: no sequence (the id is invalid) but every record is forgotten
        _emit([(0, {**w, "id": "a"}), (10, {"state": "clear", "id": ""}), (20, {**w, "id": "a"})]),
        # an invalid report replaces a held one: the held one never goes
        _emit([(0, {**w, "msg": "a"}), (100, {**w, "msg": "b"}), (200, {"state": "nope"}), (2000, None)]),
        # a change nobody sees (kind on working) is the same body: nothing; but kind counts in the head
        _emit(
            [(0, w), (100, {**w, "kind": "permission"}), (200, {**w, "kind": "permission", "msg": "x"}), (2000, None)]
        ),
        # tmux passthrough, and an app that is not a segment (dropped)
        _emit([(0, {"state": "idle", "title": "t"}), (5, {"state": "clear"})], app="ama", tmux=True),
        _emit([(0, {"state": "idle"}), (5, {"state": "clear"})], app="not an app"),
        # the report's own app is replaced by the emitter's
        _emit([(0, {"state": "idle", "app": "other"})], app="ama"),
        # a turn as ama's client drives it
        _emit(
            [
                (0, {"state": "idle"}),
                (1000, {"state": "working"}),
                (1200, {"state": "working", "progress": 20}),
                (1300, {"state": "blocked", "kind": "permission", "progress": 20, "msg": "run: ls -la"}),
                (1400, {"state": "blocked", "kind": "permission", "progress": 21, "msg": "run: ls -la"}),
                (3000, {"state": "working", "progress": 21}),
                (3100, {"state": "working", "progress": 30, "title": "Fix the test"}),
                (3150, {"state": "done", "title": "Fix the test"}),
                (5000, {"state": "clear"}),
            ],
            app="ama",
        ),
        # another throttle
        _emit([(0, {**w, "msg": "a"}), (100, {**w, "msg": "b"}), (2000, None)], throttleMs=50),
    ]


def cases() -> list[R]:
    return [{"probe": True}, *_encode_cases(), *_emit_cases()]


def table() -> list[R]:
    seed = Seed()
    try:
        return [{"case": c, "seed": seed.ask(c)} for c in cases()]
    finally:
        seed.close()


def dump(rows: list[R]) -> str:
    return json.dumps({"generated_by": "tests/tools/program_status_table.py", "rows": rows}, indent=1) + "\n"


def main(argv: list[str]) -> int:
    why = unavailable()
    if why:
        sys.stderr.write(f"cannot run the seed: {why}\n")
        return 2
    text = dump(table())
    if "--check" in argv:
        same = TABLE.is_file() and TABLE.read_text(encoding="utf-8") == text
        sys.stdout.write(
            "the table is the seed's\n" if same else f"{TABLE} differs from the seed's answers: regenerate it\n"
        )
        return 0 if same else 1
    TABLE.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {TABLE} ({len(cases())} cases)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
