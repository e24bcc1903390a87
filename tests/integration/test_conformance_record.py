"""`python -m ama_conformance.record` over a launch file of stand-ins for the public agents (none is installed
here): two fixture agents (one conforming, one that echoes any protocol version), one that is not installed and
one the file skips. It rewrites the table of a temp copy of docs/conformance.md from those runs only — rows from
anywhere else go — with each agent's version, its untested count and, for each failure, what was seen; a second
run over the same installs writes the same table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ama_conformance import record
from ama_conformance.launch_file import load
from tests.support.acp_fixtures import agent_command

pytestmark = pytest.mark.slow  # four short suite runs (-k versions), each of fresh agent processes

ROOT = Path(__file__).resolve().parents[2]


def _launch_file(tmp: Path) -> Path:
    def entry(name: str, command: list[str], extra: str = "") -> str:
        return f'[[agent]]\nname = "{name}"\ncommand = {json.dumps(command)}\nargs = ["-k", "versions"]\n{extra}\n'

    path = tmp / "agents.toml"
    path.write_text(
        entry("fixture", agent_command())
        + entry("echoes", agent_command("echo-version"), 'install = "pip install nothing"\n')
        + entry("ghost-agent", ["acp-no-such-agent-installed-x7"])
        + entry("example", ["python", "examples/agent.py"], 'skip = "a file of a repository, in no package"\n'),
        encoding="utf-8",
    )
    return path


def test_the_record_rewrites_the_table_from_runs_only_and_again_the_same(tmp_path, capsys):
    doc = tmp_path / "conformance.md"
    shutil.copy(record.DOC, doc)
    before = doc.read_text(encoding="utf-8")
    launch = _launch_file(tmp_path)
    argv = ["--launch", str(launch), "--doc", str(doc)]

    assert record.main(argv) == 0
    notes = capsys.readouterr().out
    text = doc.read_text(encoding="utf-8")
    start, end = text.index(record.BEGIN), text.index(record.END)
    assert text[:start] == before[: before.index(record.BEGIN)]  # only the table changed
    assert text[end:] == before[before.index(record.END) :]
    rows = record.read_rows(text)
    assert [record._name(line) for line in rows] == ["fixture", "echoes", "ghost-agent", "example"]
    fixture, echoes, ghost, example = rows
    assert "| CONFORMANT | 0 | — |" in fixture and "| 1.0.0 |" in fixture  # the version from agentInfo
    assert "| NOT CONFORMANT |" in echoes and "| R37 (`" in echoes  # the failure, with what was seen
    assert "| not run |" in ghost and "was not installed where the table was written" in ghost
    assert "| not run |" in example and "a file of a repository, in no package" in example
    assert all(record._source(line).startswith(record.SOURCE) for line in rows)
    assert "ghost-agent: skipped" in notes and "example: skipped, a file of a repository" in notes

    assert record.main(argv) == 0  # the same installs again: the same table
    assert doc.read_text(encoding="utf-8") == text


def test_the_launch_file_has_every_public_agent_with_how_to_install_it():
    agents = load()
    names = [a.name for a in agents]
    assert {"ama", "fast-agent", "mistral-vibe", "kimi-cli", "claude-agent-acp", "claude-code-acp"} <= set(names)
    assert {"gemini-cli", "opencode", "SDK example agent"} <= set(names)
    assert all(a.install for a in agents)
    assert all(a.model_env or a.model_note or a.skip for a in agents)  # its model: the suite's, or why not
    by_name = {a.name: a for a in agents}
    assert "--model" in by_name["fast-agent"].command  # it does not start without one
    assert by_name["kimi-cli"].command == ("kimi", "acp")  # `kimi --acp` is deprecated and refuses initialize
    assert by_name["SDK example agent"].skip  # no package installs a command for it
    # Every agent the docs tell how to install; the published table holds a row for each, and only from runs.
    text = record.DOC.read_text(encoding="utf-8")
    assert all(a.install.split("   #")[0] in text for a in agents)
    table = record.read_rows(text)
    assert [record._name(line) for line in table] == names
    assert all(record._source(line).startswith(record.SOURCE) for line in table)
    assert all(len(record._cells(line)) == len(record.HEADER[1].split("|")) - 2 for line in table)
