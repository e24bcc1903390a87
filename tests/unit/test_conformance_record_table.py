"""`conformance/record.py` and its launch file (conformance/launch_file.py) without running anything: a report
becomes its row (the version, the untested count, each failure with what was seen), the table is rewritten
between its markers only, a launch file that cannot be used is refused, and the command line refuses what it
cannot do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_conformance import record
from ama_conformance.launch_file import KEYS, LaunchFileError, PublicAgent, parse
from ama_conformance.record import BEGIN, END, row_of
from tests.support.hypothesis_profiles import examples

AGENT = PublicAgent("some-agent", ("some-agent", "--acp"), model_note="no base URL to set")


def _report(verdict: str, fails: dict[str, str], version: str | None = "1.2.3") -> dict[str, Any]:
    return {
        "agent": {"agentInfo": {"name": "x", "version": version} if version else None},
        "verdicts": [
            {"profile": "acp", "verdict": verdict, "conformant": verdict == "CONFORMANT", "notTested": ["R54", "R60"]}
        ],
        "requirements": [
            {
                "id": rid,
                "tier": tier,
                "profile": "acp",
                "status": "FAIL",
                "findings": [{"status": "FAIL", "detail": f"seen for {rid}: " + "x|`\n" * 40}],
            }
            for rid, tier in fails.items()
        ]
        + [{"id": "E1", "tier": "MANDATORY", "profile": "usage", "status": "FAIL"}],  # another profile: left out
    }


def test_a_report_becomes_its_row() -> None:
    row = row_of(AGENT, 1, _report("NOT CONFORMANT", {"R7": "MANDATORY", "R74": "CAPABILITY", "R83": "ADVISORY"}), "D")
    assert (row.version, row.date, row.verdict, row.untested, row.advisory) == (
        "1.2.3",
        "D",
        "NOT CONFORMANT",
        "2",
        "R83",
    )
    assert row.failures.startswith("R7 (`seen for R7: x|' x|' ") and "; R74 (`seen for R74" in row.failures
    assert len(row.failures.split("; ")[0]) <= record.EXCERPT + len("R7 (``)")  # an excerpt, not the whole detail
    assert row.model == "its own"
    line = row.line()
    assert line.startswith("| some-agent | 1.2.3 | D | NOT CONFORMANT | 2 | R7 (`") and "\n" not in line
    assert record._cells(line)[5] == row.failures.replace("|", "\0")  # a | in a cell is escaped, no border
    clean = row_of(AGENT, 0, _report("NO VIOLATION FOUND", {}, version=None), "D", version="9.9 (npm)")
    assert (clean.version, clean.verdict, clean.failures, clean.advisory) == (
        "9.9 (npm)",
        "NO VIOLATION FOUND",
        "—",
        "—",
    )
    assert row_of(AGENT, 2, _report("NO VIOLATION FOUND", {}), "D").verdict == "could not start"
    assert row_of(AGENT, -1, {}, "D").verdict == "not run (timed out)"


def test_only_the_table_between_the_markers_is_rewritten() -> None:
    doc = f"intro | not a row\n{BEGIN}\n{record.HEADER[0]}\n{record.HEADER[1]}\n| a | 1 |\n{END}\n| b | after |\n"
    assert record.read_rows(doc) == ["| a | 1 |"]
    out = record.write_rows(doc, ["| a | 2 |", "| c | 3 |"])
    assert out.startswith("intro | not a row\n") and out.endswith(f"{END}\n| b | after |\n")
    assert record.read_rows(out) == ["| a | 2 |", "| c | 3 |"]


def test_a_launch_entry_becomes_the_suite_s_command_line() -> None:
    [agent] = parse(
        '[[agent]]\nname = "x"\ncommand = ["x-acp", "acp"]\nmodel_env = { B = "{openai}", A = "k" }\n'
        'env = { E = "1" }\nhome_copy = [".x"]\nargs = ["-k", "prompt"]\ninstall = "npm i -g x"\n'
    )
    assert agent.suite_argv("/bin/x-acp") == [
        "--env-clean", "--env", "E=1", "--model-env", "A=k", "--model-env", "B={openai}", "--home-copy", ".x",
        "-k", "prompt", "--", "/bin/x-acp", "acp",
    ]  # fmt: skip
    assert agent.model == "the suite's scripted model"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("nonsense = [", "agents.toml"),
        ("[[agent]]\nname = 'x'\n", "name and command are required"),
        ("[[agent]]\nname = 'x'\ncommand = ['x']\nmodel-env = {}\n", "unknown keys ['model-env']"),
        ("[[agent]]\nname = 'x'\ncommand = 'x'\n", "command must be a list of strings"),
        ("[[agent]]\nname = 'x'\ncommand = ['x']\nenv = { A = 1 }\n", "env must be a table of strings"),
        ("[[agent]]\nname = 'x'\ncommand = ['x']\n[[agent]]\nname = 'x'\ncommand = ['y']\n", "a second agent"),
        ("title = 'x'\n", "expected [[agent]] tables"),
    ],
)
def test_a_launch_file_that_cannot_be_used_is_refused(text: str, said: str) -> None:
    with pytest.raises(LaunchFileError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse(text)


def test_the_command_line_refuses_an_unknown_agent_a_bad_launch_file_and_a_page_without_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert record.main(["--only", "no-such-agent"]) == 2
    assert "no-such-agent" in capsys.readouterr().err
    bad = tmp_path / "agents.toml"
    bad.write_text("[[agent]]\n", encoding="utf-8")
    assert record.main(["--launch", str(bad)]) == 2
    assert "name and command are required" in capsys.readouterr().err
    page = tmp_path / "page.md"
    page.write_text("no table here\n", encoding="utf-8")
    # the page is read before any agent is looked up or started: nothing runs
    assert record.main(["--only", "opencode", "--doc", str(page), "--dry-run"]) == 2
    assert "no record table" in capsys.readouterr().err


_VALUES = st.one_of(
    st.just('"x"'), st.just("1"), st.just("[]"), st.just('["a", 2]'), st.just("{ A = 1 }"), st.just('{ A = "b" }')
)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.sampled_from([*sorted(KEYS), "other"]), _VALUES), max_size=6), max_size=3),
    st.text(max_size=40),
)
def test_any_launch_file_is_agents_or_a_launch_file_error(entries: list[list[tuple[str, str]]], noise: str) -> None:
    """Whatever a launch file holds, reading it gives agents whose fields have their types, or a LaunchFileError
    that says what is wrong — never another exception."""
    text = "".join("[[agent]]\n" + "".join(f"{k} = {v}\n" for k, v in dict(e).items()) for e in entries)
    for doc in (text, text + noise):
        try:
            agents = parse(doc)
        except LaunchFileError:
            continue
        for agent in agents:
            assert agent.name and agent.command and all(isinstance(c, str) for c in agent.command)
            assert all(isinstance(v, str) for _, v in (*agent.env, *agent.model_env))
