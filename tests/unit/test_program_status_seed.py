"""OSC 7501 equal to the seed's to the byte (issue 29, point 2).

- The committed table (tests/data/program_status_seed.json, written by tests/tools/program_status_table.py from
  the seed's own code) is checked in every run, node or not.
- Where node and the seed's file are here (AMA_SEED_PROGRAM_STATUS, default /work/shared/seeds/program-status.mjs),
  hypothesis-made reports and emitter scripts on a fake clock run through both, and the table is checked to be
  the seed's current answers. One node process serves the whole module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_profiles import examples
from tests.support.program_status_seed import TABLE, Seed, run_ama, unavailable
from tests.tools.program_status_table import cases, dump

ROWS: list[dict[str, Any]] = json.loads(TABLE.read_text(encoding="utf-8"))["rows"]


@pytest.mark.parametrize("row", ROWS, ids=[f"row{i}" for i in range(len(ROWS))])
def test_ama_answers_every_case_of_the_table_as_the_seed_did(row: dict[str, Any]) -> None:
    assert run_ama(row["case"]) == row["seed"]


def test_the_table_covers_the_listed_cases() -> None:
    assert [row["case"] for row in ROWS] == cases()


needs_seed = pytest.mark.skipif(unavailable() is not None, reason=f"seed not runnable: {unavailable()}")


@pytest.fixture(scope="module")
def seed() -> Iterator[Seed]:
    runner = Seed()
    yield runner
    runner.close()


# Text that hits every rule of the cleaning and the cut: controls (C0, DEL, C1), whitespace as JavaScript and
# Python differ on it, zero-width and format characters, combining marks, wide and astral characters, surrogate
# halves, and plain text to make it long.
SPECIAL = st.sampled_from(
    list("\x00\x07\t\n\v\f\r\x1b\x1c\x1f \x7f\x85\x9b\x9f\u00a0\u1680\u2000\u200a\u200b\u200c\u200d\u200e")
    + list("\u2028\u2029\u202e\u202f\u205f\u2066\u3000\ufeff\u0301\u0300漢字é…\U0001f600\U0001f469\ud800\udc00")
)
PIECE = st.one_of(SPECIAL, st.text(max_size=8), st.text(alphabet="ab ", max_size=40))
TEXT = st.one_of(
    st.lists(PIECE, max_size=30).map("".join),
    st.builds(lambda n, tail: "x" * n + tail, st.integers(150, 200), st.lists(PIECE, max_size=6).map("".join)),
    st.builds(lambda n, c: c * n, st.integers(0, 800), st.sampled_from(["é", "漢", "\U0001f600", "a ", "\x07", " "])),
)
SEGMENT = st.text(alphabet="abAZ09_.+-", min_size=1, max_size=33)
ID = st.one_of(
    st.none(),
    st.lists(SEGMENT, min_size=1, max_size=9).map("/".join),
    st.sampled_from(["", "/", "a//b", "a/", "é", "a b", "x" * 130]),
)
STATE = st.sampled_from(["idle", "working", "done", "blocked", "error", "clear", "Working", "nope"])
KIND = st.one_of(st.none(), st.sampled_from(["permission", "question", "auth", "lunch", ""]))
APP = st.one_of(st.none(), st.sampled_from(["ama", "", "bad app", "x" * 33]), SEGMENT)


def _report(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


REPORT = st.builds(
    _report,
    state=STATE,
    id=ID,
    kind=KIND,
    progress=st.one_of(st.none(), st.integers(-3, 103), st.sampled_from([2**53, -(2**40)])),
    app=APP,
    title=st.one_of(st.none(), TEXT),
    msg=st.one_of(st.none(), TEXT, st.builds(lambda n: "m" * n, st.integers(2000, 2100))),
)


@needs_seed
@settings(max_examples=examples(200), deadline=None)
@given(REPORT)
def test_any_report_encodes_as_the_seed_encodes_it(seed: Seed, report: dict[str, Any]) -> None:
    case = {"encode": report}
    assert run_ama(case) == seed.ask(case)


# Emitter scripts: a few ids, states and texts so that repeats, throttled changes and clears meet often.
SMALL_REPORT = st.builds(
    _report,
    state=st.sampled_from(["idle", "working", "working", "blocked", "done", "error", "clear", "nope"]),
    id=st.one_of(st.none(), st.none(), st.sampled_from(["a", "a/b", "ab", "a/b/c", ""])),
    kind=st.one_of(st.none(), st.sampled_from(["permission", "question"])),
    progress=st.one_of(st.none(), st.integers(0, 3)),
    title=st.one_of(st.none(), st.sampled_from(["t", "u", "\x07"])),
    msg=st.one_of(st.none(), st.sampled_from(["m", "n", ""])),
)
STEP = st.tuples(st.integers(0, 700), st.one_of(SMALL_REPORT, SMALL_REPORT, st.none()))


@st.composite
def scripts(draw: st.DrawFn) -> dict[str, Any]:
    t, steps = 0, []
    for gap, report in draw(st.lists(STEP, min_size=1, max_size=25)):
        t += gap
        steps.append({"t": t} if report is None else {"t": t, "report": report})
    steps.append({"t": t + 5000})  # let every held report go
    options: dict[str, Any] = {}
    app = draw(st.sampled_from([None, "ama", "bad app"]))
    if app is not None:
        options["app"] = app
    if draw(st.booleans()):
        options["tmux"] = True
    throttle = draw(st.sampled_from([None, None, 0, 1, 250]))
    if throttle is not None:
        options["throttleMs"] = throttle
    return {"emit": options, "steps": steps}


@needs_seed
@settings(max_examples=examples(200), deadline=None)
@given(scripts())
def test_any_emitter_script_writes_what_the_seed_writes_when_it_does(seed: Seed, case: dict[str, Any]) -> None:
    assert run_ama(case) == seed.ask(case)


@needs_seed
def test_the_committed_table_is_the_seeds_current_answer(seed: Seed) -> None:
    current = [{"case": c, "seed": seed.ask(c)} for c in cases()]
    assert dump(current) == TABLE.read_text(encoding="utf-8"), "regenerate: python -m tests.tools.program_status_table"
