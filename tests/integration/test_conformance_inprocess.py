"""The conformance suite's embedding seam (`ama_conformance.core.config.Launcher`) and the in-process run of the suite
against ama (tests/support/conformance_inprocess.py) that ama's own conformance tests use.

That a process run and an in-process run of the same selection give the same statuses is checked beside the
process run of the shipped command: tests/integration/test_conformance.py::test_ama_conformance_subcommand_…
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

import ama_conformance.core.agent
from ama_conformance.core.agent import Agent
from ama_conformance.core.config import RunConfig, Timeouts
from tests.support.conformance_inprocess import Launcher, run_conformance
from tests.support.harness import Ama, clean_env
from tests.support.json_values import as_object


def test_every_agent_is_launched_in_process_none_spawned_and_no_group_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spawned: list[object] = []
    ended: list[int] = []

    async def no_process(command: object, **kwargs: object) -> None:
        spawned.append(command)
        raise AssertionError(f"a process was spawned: {command}")

    async def end_group(pgid: int) -> None:
        ended.append(pgid)

    monkeypatch.setattr(anyio, "open_process", no_process)
    monkeypatch.setattr(ama_conformance.core.agent, "end_group", end_group)
    ama = Ama(tmp_path)
    report = tmp_path / "report.json"
    run = run_conformance(
        ["-k", "R53", "--report-json", str(report), "--", *ama.command()], clean_env(tmp_path), tmp_path / "agents"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert spawned == [] and ended == []
    assert run.launcher.launched == 2 and run.launcher.spawned == 0  # the start-up probe, then the group's agent
    assert run.launcher.commands == [ama.command()] * 2
    status = {r["id"]: r for r in run.report["requirements"]}
    assert status["R53"]["status"] == "PASS" and status["R7"]["status"] == "PASS"
    assert "PASS     R53 " in run.stdout and "a partial run" in run.stdout
    assert run.report["agent"]["agentInfo"]["name"] == "ama"
    # The agent's stderr reaches the suite as a spawned agent's would: R5 counts the bytes of its file.
    counted = [int(m) for f in status["R5"]["findings"] for m in re.findall(r"(\d+) bytes on stderr", f["detail"])]
    assert counted == [(tmp_path / "agents" / "agent-2.stderr").stat().st_size]


def test_an_agent_that_cannot_start_is_told_with_its_exit_code_and_stderr(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    ama.config.write_text("[[[ not toml\n", encoding="utf-8")
    run = run_conformance(["-k", "R53", "--", *ama.command()], clean_env(tmp_path), tmp_path / "agents")
    assert run.returncode == 2, run.stdout + run.stderr  # as for a command that cannot run
    assert run.launcher.launched == 1  # the start-up probe only
    assert "exited before answering initialize (exit code 2)" in run.stdout
    stderr = (tmp_path / "agents" / "agent-1.stderr").read_text(encoding="utf-8").strip().splitlines()
    assert stderr and f"  | {stderr[-1]}" in run.stdout


def test_a_second_live_agent_is_a_real_process_whose_group_is_ended(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    launcher = Launcher(tmp_path / "agents")
    launcher.scratch.mkdir()
    config = RunConfig(
        command=ama.command(),
        cwd=cwd,
        workspace=ama.workspace,
        scratch=tmp_path,
        env=clean_env(tmp_path),
        timeouts=Timeouts(request=20),
        launch=launcher,
    )

    async def main() -> None:
        first, second = Agent(config, config.env), Agent(config, config.env)
        try:
            await first.start()
            await second.start()
            assert (launcher.launched, launcher.spawned) == (1, 1)
            assert first._group is None  # in this process: no group of its own, none to end
            assert second._group == second.conn.pid  # a real process, leading its own group
            for agent in (first, second):
                assert as_object(await agent.initialize())["agentInfo"]["name"] == "ama"
        finally:
            await second.shutdown()
            await first.shutdown()
        assert first.conn.ended_by == second.conn.ended_by == "eof"
        assert first.conn.returncode == second.conn.returncode == 0

    anyio.run(main)
