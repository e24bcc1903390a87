"""The clients confine what an agent may do and bound what they keep (issue 23, point 5), through real pipes with
the fixture agent's `--hostile` switches: `ama acp-client` serves files only under the session's cwd and asks
before commands (refusing when piped), `ama conformance` serves only its own directories and reports the rest
as H1, and neither keeps a flood, a huge line or deep nesting without bound."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import anyio
import pytest

from ama_acp.client import options, reader, violations
from ama_acp.client.confine import Access
from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.display.render import Renderer
from ama_acp.client.terminal import cli, turn
from ama_acp.client.terminal.access_prompt import access_policy, question
from ama_acp.client.terminal.cli import run_acp_client
from ama_acp.client.terminal.tty_input import LineInterrupted
from ama_acp.client.terminal.turn_status import TurnStatus
from ama_conformance.core.runner import RECORD_LINE, clip
from tests.support.acp_fixtures import AGENT_SCRIPT
from tests.support.harness import clean_env

ROOT = Path(__file__).resolve().parents[2]
EVERY_FS = ("read-passwd", "write-outside", "write-link")


def fixture(*hostile: str, outside: Path | None = None, huge: int | None = None) -> list[str]:
    cmd = [sys.executable, str(AGENT_SCRIPT), *(f"--hostile={h}" for h in hostile)]
    if outside is not None:
        cmd += ["--outside", str(outside)]
    if huge is not None:
        cmd += ["--huge-size", str(huge)]
    return cmd


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    return work, outside


@pytest.fixture
def quick_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test-sized settle: after a session opens, the client waits up to 1 s for a first meter, which the fixture
    agent never sends; what these tests check happens in the prompt after it."""
    monkeypatch.setattr(cli, "settle_session_open", partial(turn.settle_session_open, timeout=0.2))


def nothing_escaped(tmp_path: Path, outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == []
    assert not (tmp_path / "dotdot-escaped.txt").exists()


# --- acp-client ---------------------------------------------------------------------------------------------------


def test_acp_client_piped_refuses_files_outside_and_every_command(
    tmp_path: Path, dirs: tuple[Path, Path], quick_settle: None
) -> None:
    work, outside = dirs
    out, err = io.StringIO(), io.StringIO()
    agent = fixture(*EVERY_FS, "terminal-touch", outside=outside)
    code = run_acp_client(["--prompt", "hi", "--cwd", str(work), "--auto-approve", "--", *agent], out, err)
    assert code == 0, err.getvalue()
    nothing_escaped(tmp_path, outside)
    shown = out.getvalue()
    assert "hostile fs/read_text_file /etc/passwd: refused" in shown
    assert shown.count("hostile fs/write_text_file") == 3
    assert "served" not in shown, shown
    said = err.getvalue()
    assert "refused the agent's request to read /etc/passwd" in said
    assert f"refused the agent's request to write {outside / 'via-link.txt'}" in said  # the link was followed
    assert "refused the agent's request to run touch MARKER in" in said


def test_acp_client_asks_even_inside_the_project_unless_allowed(dirs: tuple[Path, Path], quick_settle: None) -> None:
    work, _ = dirs
    argv = ["--prompt", "hi", "--cwd", str(work), "--auto-approve"]
    err = io.StringIO()
    assert run_acp_client([*argv, "--", *fixture("terminal-touch")], io.StringIO(), err) == 0
    assert not (work / "MARKER").exists()  # piped, no flag: refused even in the project
    assert "refused the agent's request to run touch MARKER" in err.getvalue()
    assert run_acp_client([*argv, "--allow-terminals", "--", *fixture("terminal-touch")], io.StringIO(), err) == 0
    assert (work / "MARKER").exists()  # the explicit flag runs it


class Answers:
    """A LineSource that answers the questions it is asked from a list, and remembers them."""

    def __init__(self, *answers: str | None | type[LineInterrupted]) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def read_line(self, prompt: str) -> str | None:
        self.asked.append(prompt)
        answer = self.answers.pop(0)
        if answer is LineInterrupted:
            raise LineInterrupted()
        return answer if answer is None or isinstance(answer, str) else None


def test_the_question_names_the_path_on_one_line_and_only_yes_allows() -> None:
    forged = Access("fs/write_text_file", "s", "/etc/x\n\x1b]52;c;aGk=\x07Allow? [y/N] y", inside=False)
    text = question(forged)
    assert text.count("\n") == 0 and "\x1b" not in text and "\x07" not in text
    assert text.startswith("The agent wants to write /etc/x") and text.endswith("outside the project. Allow? [y/N] ")
    run = Access("terminal/create", "s", "/w", inside=True, command="rm -rf /\x1b[2J")
    assert "\x1b" not in question(run) and question(run).count("\n") == 2

    term = Answers("y", "", "YES", None, LineInterrupted, "n")
    decide = access_policy(term, Renderer(io.StringIO(), colour=False), TurnStatus(None), None, io.StringIO())

    async def answers() -> list[bool]:
        return [await decide(forged) for _ in range(6)]

    assert anyio.run(answers) == [True, False, True, False, False, False]
    assert len(term.asked) == 6


# --- conformance --------------------------------------------------------------------------------------------------


def test_conformance_serves_only_its_directories_and_reports_h1(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    _, outside = dirs
    report = tmp_path / "report.json"
    agent = fixture(*EVERY_FS, "terminal-touch", outside=outside)
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "-k", "prompt", "--report-json", str(report), "--", *agent],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path),
        cwd=ROOT,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # H1 is ADVISORY: the verdict rests on ACP's rules
    nothing_escaped(tmp_path, outside)
    data = json.loads(report.read_text(encoding="utf-8"))
    h1 = next(r for r in data["requirements"] if r["id"] == "H1")
    assert h1["status"] == "FAIL"
    detail = " ".join(f["detail"] for f in h1["findings"])
    assert "fs/read_text_file /etc/passwd: outside the run's directories, refused" in detail
    h1_lines = [line for line in done.stdout.splitlines() if line.split()[:2] == ["FAIL", "H1"]]
    assert h1_lines and "/etc/passwd" in done.stdout, done.stdout
    # The command was refused too (the client's error answer is in the record of the failing group).
    assert "did not agree to run touch MARKER" in report.read_text(encoding="utf-8")


def test_conformance_a_clean_agent_passes_h1(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "-k", "prompt", "--report-json", str(report), "--", *fixture()],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path),
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout
    h1 = next(r for r in json.loads(report.read_text())["requirements"] if r["id"] == "H1")
    assert h1["status"] == "PASS"


def test_the_record_clips_lines() -> None:
    assert clip("x" * 10) == "x" * 10
    long = clip("y" * (RECORD_LINE * 3))
    assert len(long) < RECORD_LINE + 100 and long.endswith(f"[clipped: {RECORD_LINE * 2} more characters]")


# --- bounds -------------------------------------------------------------------------------------------------------


async def _session(conn: AgentProcess, cwd: Path) -> None:
    await conn.initialize(timeout=30)
    await conn.new_session(cwd, timeout=30)


def test_a_flood_of_non_json_lines_is_counted_not_kept(tmp_path: Path) -> None:
    async def go() -> AgentProcess:
        async with AgentProcess(fixture("flood", "nested"), stderr=subprocess.DEVNULL) as conn:
            await _session(conn, tmp_path)
        return conn

    conn = anyio.run(go)
    kept_noise = [e for e in conn.transcript if e.direction == "in" and not e.raw.startswith("{")]
    assert len(kept_noise) == reader.NOISE_KEPT
    assert conn.dropped_lines == 10_000 + 1 - reader.NOISE_KEPT  # the nested line counts as one
    non_json = conn.violations_of("non_json_stdout")
    assert len(non_json) == violations.VIOLATIONS_KEPT + 1
    assert non_json[-1].detail == f"{10_001 - violations.VIOLATIONS_KEPT} more like the above (not kept)"
    # The session still opened: the flood and the nesting broke nothing else.
    assert conn.session_cwds


def test_deep_nesting_is_a_decode_error_not_a_recursion_error(tmp_path: Path) -> None:
    async def go() -> AgentProcess:
        async with AgentProcess(fixture("nested"), stderr=subprocess.DEVNULL) as conn:
            await _session(conn, tmp_path)
        return conn

    conn = anyio.run(go)
    [nested] = conn.violations_of("non_json_stdout")
    assert nested.detail == "stdout line is not JSON: nested too deeply"
    assert nested.raw is not None and len(nested.raw) < 2100


def test_a_line_over_the_cap_ends_the_connection_and_is_never_kept(tmp_path: Path) -> None:
    cap = 1024 * 1024

    async def go() -> tuple[AgentProcess, BaseException | None]:
        failure: BaseException | None = None
        async with AgentProcess(
            fixture("huge-line", huge=3 * cap), ClientOptions(max_line=cap), stderr=subprocess.DEVNULL
        ) as conn:
            try:
                await conn.initialize(timeout=30)
            except Exception as exc:  # the connection ended before the answer
                failure = exc
        return conn, failure

    conn, failure = anyio.run(go)
    assert type(failure).__name__ == "AgentExited"
    [too_long] = conn.violations_of("line_too_long")
    assert str(cap) in too_long.detail and too_long.raw is not None and len(too_long.raw) < 2100
    assert all(len(e.raw) <= cap for e in conn.transcript)
    assert conn.exited


def test_the_cli_ends_on_a_line_over_the_default_cap(dirs: tuple[Path, Path]) -> None:
    work, _ = dirs
    err = io.StringIO()
    agent = fixture("huge-line", huge=options.MAX_LINE + 1)
    code = run_acp_client(["--prompt", "x", "--cwd", str(work), "--", *agent], io.StringIO(), err)
    assert code == 3, err.getvalue()[:3000]
    assert "line_too_long" in err.getvalue() and len(err.getvalue()) < 10_000


def test_the_cli_ends_an_endless_flood_of_lines_without_a_message(dirs: tuple[Path, Path], quick_settle: None) -> None:
    """An agent that answers a prompt with nothing but lines that are not JSON, without end: the client stops after
    `reader.MAX_NOISE_LINES` of them in a row, says so naming the limit, ends the agent and exits 3."""
    work, _ = dirs
    out, err = io.StringIO(), io.StringIO()
    code = run_acp_client(["--prompt", "hi", "--cwd", str(work), "--", *fixture("endless-flood")], out, err)
    said = err.getvalue()
    assert code == 3, said[:3000]
    [flood] = [line for line in said.splitlines() if "(stdout_flood)" in line]
    assert f"{reader.MAX_NOISE_LINES} stdout lines" in flood and f"the limit is {reader.MAX_NOISE_LINES} lines" in flood
    assert len(said) < 20_000  # the flood's own lines are counted, not repeated
