"""The conformance suite's command line (conformance/cli.py) and its -k selection (conformance/runner.selected):
which groups an expression picks, that a bad one is a usage error and never a crash, and the exit status of every
usage error, found before any agent process starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ama_conformance.groups.catalog  # noqa: F401  (registers every group in base.GROUPS)
from ama_conformance.cli import USAGE_ERROR, main
from ama_conformance.core.runner import selected
from ama_conformance.groups.base import GROUPS, Group, GroupContext
from ama_conformance.requirements.registry import REGISTRY
from tests.support.acp_fixtures import agent_command
from tests.support.hypothesis_profiles import examples

AGENT = [sys.executable, "-c", "pass"]  # a command that exists; no test here gets as far as starting it


def names(expr: str | None) -> list[str]:
    return [g.name for g in selected(GROUPS, expr)]


def holding(rid: str) -> list[str]:
    return [g.name for g in GROUPS if rid in g.ids]


# --- -k ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", [None, ""])
def test_no_expression_selects_every_group(expr: str | None) -> None:
    assert names(expr) == [g.name for g in GROUPS]


def test_a_name_matches_groups_containing_it_case_insensitively() -> None:
    assert names("initialize") == ["initialize"]
    assert names("INITIALIZE") == ["initialize"]
    assert names("tools") == [g.name for g in GROUPS if "tools" in g.name]
    assert set(names("tools")) == {"tools", "tools-unoffered"}
    assert names("no-such-group") == []


def test_an_id_matches_the_groups_that_declare_it_exactly() -> None:
    assert names("R110") == holding("R110") == ["cancel"]
    assert names("R17.1") == ["malformed"]
    assert names("R1") == holding("R1") == []  # a transcript id: no group declares it, and no prefix matching
    assert names("r110") == []  # ids are exact


def test_and_or_not_and_parentheses() -> None:
    everyone = [g.name for g in GROUPS]
    assert names("cancel or R131") == ["cancel", "permission-cancel", "tools-unoffered"]
    assert names("tools and not unoffered") == ["tools"]
    assert names("not initialize") == [n for n in everyone if n != "initialize"]
    assert names("(load or resume) and R66") == ["load"]
    assert names("not (load or resume or usage)") == [n for n in everyone if n not in ("load", "resume", "usage")]
    assert names("R36 and not R41") == []


def test_the_selection_keeps_run_order() -> None:
    assert names("usage or initialize") == ["initialize", "usage"]


@pytest.mark.parametrize("expr", ["and", "or", "not", "(", ")", "initialize and", "a b", "(a", "a)", "not not"])
def test_a_bad_expression_is_a_value_error(expr: str) -> None:
    with pytest.raises(ValueError, match="^-k"):
        selected(GROUPS, expr)


def test_the_expression_reaches_no_python() -> None:
    """The expression is parsed, never evaluated: a name of Python's is just a word that matches no group."""
    for word in ("__import__", "True", "None", "1", "exit", "lambda"):
        assert names(word) == []
    assert names("not __import__") == [g.name for g in GROUPS]


@pytest.mark.parametrize("expr", ["(initialize)(cancel)", "initialize (cancel)", "()", "( )", "not ()"])
def test_an_expression_that_is_not_boolean_is_a_value_error(expr: str) -> None:
    """Once evaluated as Python after the words became True/False: a bool was called (TypeError), and an empty
    tuple selected nothing without a word."""
    with pytest.raises(ValueError, match="^-k"):
        selected(GROUPS, expr)


WORDS = ["and", "or", "not", "(", ")", "initialize", "R36", "X999", "cancel", "tools", "x"]


def _select_or_value_error(groups: list[Group], expr: str) -> None:
    try:
        chosen = selected(groups, expr)
    except ValueError:
        return
    assert isinstance(chosen, list) and all(g in groups for g in chosen)


@given(st.lists(st.sampled_from(WORDS), max_size=10), st.sampled_from([" ", ""]))
@example(["(", "x", ")", "(", "x", ")"], " ")
@settings(max_examples=examples(300), deadline=None, derandomize=True)
def test_any_token_sequence_gives_a_list_or_value_error(tokens: list[str], sep: str) -> None:
    _select_or_value_error(GROUPS, sep.join(tokens))


@given(st.text(max_size=30))
@settings(max_examples=examples(300), deadline=None, derandomize=True)
def test_arbitrary_text_without_parentheses_gives_a_list_or_value_error(expr: str) -> None:
    _select_or_value_error(GROUPS, expr.replace("(", " ").replace(")", " "))


# --- exit codes without an agent --------------------------------------------------------------------------------


def test_list_prints_every_id_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert listed == [r.id for r in REGISTRY]


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "AGENT CMD" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["--"], ["-k", "initialize"], ["-k", "initialize", "--"]])
def test_no_agent_command_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == USAGE_ERROR
    assert "give the agent's command after --" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["acp-conformance-no-such-agent", "/nonexistent/agent", "."])
def test_a_command_that_does_not_exist_is_a_usage_error(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--", command, "--acp"]) == USAGE_ERROR
    assert "cannot start" in capsys.readouterr().err


def test_a_file_that_is_not_executable_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o644)
    assert main(["--", str(script)]) == USAGE_ERROR
    assert "not found or not executable" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"), [("--env", "X"), ("--env", "=value"), ("--model-env", "OPENAI_BASE_URL"), ("--model-env", "=x")]
)
def test_a_pair_without_a_name_or_equals_is_a_usage_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([flag, value, "--", *AGENT]) == USAGE_ERROR
    assert "wants NAME=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--timeout", "--prompt-timeout", "--exit-timeout", "--group-timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "-inf"])
def test_a_timeout_that_is_not_positive_is_a_usage_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([f"{flag}={value}", "--", *AGENT]) == USAGE_ERROR
    assert f"{flag} must be a positive number" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-such-option"],
        ["--timeout", "soon"],
        ["--profile", "strict"],
        ["-k"],
        ["--report-json"],
        ["positional"],
    ],
)
def test_argparse_errors_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--", *AGENT]) == USAGE_ERROR
    assert "usage: ama conformance" in capsys.readouterr().err


def test_a_cwd_that_is_not_a_directory_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "file"
    afile.write_text("", encoding="utf-8")
    for cwd in (afile, tmp_path / "missing"):
        assert main(["--cwd", str(cwd), "--", *AGENT]) == USAGE_ERROR
        assert "not a directory" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--jobs", "0"], "--jobs must be between 1 and"),
        (["--jobs", "99"], "--jobs must be between 1 and"),
        (["--stall-timeout", "-1"], "--stall-timeout must be 0 (off)"),
        (["--home-copy", "no-such-dir-x7"], "does not exist"),
        (["--keep-home", "--home-copy", "."], "--keep-home turns off"),
    ],
)
def test_runner_options_out_of_range_are_usage_errors(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--", *AGENT]) == USAGE_ERROR
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("expr", ["((", "initialize and", "not"])
def test_a_bad_k_expression_is_a_usage_error_before_any_agent(expr: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-k", expr, "--", *AGENT]) == USAGE_ERROR
    assert "ama conformance: -k" in capsys.readouterr().err


# --- --model-env placeholders (the scripted model starts; the error comes before any agent) ----------------------


@pytest.mark.parametrize("template", ["{nope}/v1", "{0}", "{url[999]}", "{url.nope}", "{{ {"])
def test_an_unknown_model_env_placeholder_is_a_usage_error(template: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["-k", "initialize", "--model-env", f"OPENAI_BASE_URL={template}", "--", *agent_command()]
    assert main(argv) == USAGE_ERROR
    err = capsys.readouterr().err
    assert "--model-env OPENAI_BASE_URL=" in err and "known: ['anthropic', 'openai', 'port', 'url']" in err


# --- a bug of the suite itself ------------------------------------------------------------------------------------


def test_a_check_bound_to_an_undeclared_id_is_the_suites_error_not_a_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A group that reports an id it never declared (here one that starts no agent) ends the run with exit 2 and
    says the suite failed, instead of a FAIL blamed on the agent."""

    async def typo(ctx: GroupContext) -> None:
        with ctx.checks.at("R36"):
            ctx.checks.passed("X999", "a typo in the suite")

    fake = Group("acp-conformance-test-typo", ("R36",), typo)
    GROUPS.append(fake)
    try:
        # the conforming fixture: the run's start-up probe (runner.startup_probe) initializes it before any group
        assert main(["-k", fake.name, "--", *agent_command()]) == USAGE_ERROR
    finally:
        GROUPS.remove(fake)
    out, err = capsys.readouterr()
    assert "the suite itself failed" in err and "X999" in err
    assert not any(line.startswith("FAIL") and "R36" in line for line in out.splitlines())
