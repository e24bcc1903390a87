"""`python -m ama_conformance.record`: rerun the suite against the public ACP agents installed here and write the
published record, the table between the markers in docs/conformance.md.

The agents and how each is started — its command, its environment, how its model is pointed at the suite's
scripted model or why it cannot be — are the launch file's (conformance/agents.toml, `--launch` for another).
Each is looked up on PATH by its command; one that is not installed is skipped with a note, and its row from an
earlier run of this script is kept as it was (a row from anywhere else is not: the table holds runs only). Each
installed agent gets one whole suite run (a subprocess: `python -m ama_conformance --env-clean --report-json …`
with its launch options) and its row says what the run found: the version the agent names in `agentInfo` (else
what its `version_command` prints), the date, the verdict, how many deciding requirements went untested, the
failures by id with a short excerpt of what was seen on the wire, the advisory ones apart, and its model. Rows
follow the launch file's order and hold no timing, so two runs over the same installs write the same table.

    python -m ama_conformance.record                  # every installed agent; rewrites the table
    python -m ama_conformance.record --only opencode  # one agent
    python -m ama_conformance.record --dry-run        # print the rows, write nothing
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ama_acp.textsafe import one_line
from ama_conformance.launch_file import LAUNCH_FILE, LaunchFileError, PublicAgent, load

__all__ = ["PublicAgent", "Row", "main", "record", "row_of"]

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "conformance.md"
BEGIN = "<!-- conformance-record:begin (python -m ama_conformance.record rewrites this table) -->"
END = "<!-- conformance-record:end -->"
HEADER = (
    "| agent | version | date | verdict | untested | failures (MANDATORY, CAPABILITY): what was seen "
    "| advisory findings | model | source |",
    "|---|---|---|---|---|---|---|---|---|",
)
SOURCE = "`python -m ama_conformance.record`"  # how a row from a run of this script begins its source cell
RUN_TIMEOUT = 1800.0  # seconds for one agent's whole run (a hung agent is cut off by the suite long before)
EXCERPT = 100  # characters of what was seen, per failure
VERSION_TIMEOUT = 20.0  # seconds for a version_command


@dataclass(frozen=True)
class Row:
    agent: str
    version: str
    date: str
    verdict: str
    untested: str
    failures: str
    advisory: str
    model: str
    source: str

    def line(self) -> str:
        cells = [
            self.agent,
            self.version,
            self.date,
            self.verdict,
            self.untested,
            self.failures,
            self.advisory,
            self.model,
            self.source,
        ]
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


Runner = Callable[[Sequence[str], float], tuple[int, dict[str, Any]]]


def run_suite(argv: Sequence[str], timeout: float) -> tuple[int, dict[str, Any]]:
    """One suite run as a subprocess (its own interpreter: a crash of the run cannot take the record down)."""
    with tempfile.TemporaryDirectory(prefix="acp-record-") as tmp:
        report = Path(tmp) / "report.json"
        args = [sys.executable, "-m", "conformance", *argv]
        cut = args.index("--")
        args[cut:cut] = ["--report-json", str(report)]
        try:
            code = subprocess.run(args, cwd=ROOT, timeout=timeout, stdout=subprocess.DEVNULL, check=False).returncode
        except subprocess.TimeoutExpired:
            return -1, {}
        if not report.exists():
            return code, {}
        return code, json.loads(report.read_text(encoding="utf-8"))


def _failures(report: dict[str, Any], tiers: set[str], evidence: bool) -> list[str]:
    """The failed ACP requirements of these tiers, in the registry's order; with `evidence`, each with a short
    excerpt of the first failure's detail (what was seen on the wire)."""
    out = []
    for req in report.get("requirements", []):
        if req.get("status") != "FAIL" or req.get("tier") not in tiers or req.get("profile") != "acp":
            continue
        detail = next((str(f.get("detail") or "") for f in req.get("findings", []) if f.get("status") == "FAIL"), "")
        seen = one_line(" ".join(detail.split())).replace("`", "'")  # one line of a table cell, controls shown
        if evidence and seen:
            seen = seen if len(seen) <= EXCERPT else seen[: EXCERPT - 1] + "…"
            out.append(f"{req['id']} (`{seen}`)")
        else:
            out.append(str(req["id"]))
    return out


def row_of(agent: PublicAgent, code: int, report: dict[str, Any], today: str, version: str = "") -> Row:
    """The table row of one run (`version`: what its version_command printed, used when agentInfo names none)."""
    source = f"{SOURCE}, {today}"
    if not report:
        why = "timed out" if code == -1 else f"exit {code}, no report"
        return Row(agent.name, version or "unknown", today, f"not run ({why})", "—", "—", "—", agent.model, source)
    info = (report.get("agent") or {}).get("agentInfo") or {}
    named = str(info.get("version") or "") if isinstance(info, dict) else ""
    acp: dict[str, Any] = next((v for v in report.get("verdicts", []) if v.get("profile") == "acp"), {})
    untested = str(len(acp.get("notTested") or []))
    deciding = "; ".join(_failures(report, {"MANDATORY", "CAPABILITY"}, evidence=True)) or "—"
    advisory = ", ".join(_failures(report, {"ADVISORY"}, evidence=False)) or "—"
    verdict = _verdict(code, acp)
    return Row(
        agent.name, named or version or "unknown", today, verdict, untested, deciding, advisory, agent.model, source
    )


def _verdict(code: int, acp: dict[str, Any]) -> str:
    """The ACP verdict of a run, as its report and exit status give it."""
    if code == 2:  # the agent could not be started (or the suite failed): no verdict to publish
        return "could not start"
    return str(acp.get("verdict") or ("CONFORMANT" if acp.get("conformant") else "NOT CONFORMANT"))


def version_of(agent: PublicAgent) -> str:
    """The first line `version_command` prints, or "" (none, or it failed)."""
    if not agent.version_command or shutil.which(agent.version_command[0]) is None:
        return ""
    try:
        out = subprocess.run(
            list(agent.version_command), capture_output=True, text=True, timeout=VERSION_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    return one_line(lines[-1])[:60] if lines else ""


def read_rows(doc: str) -> list[str]:
    """The table's rows now (between the markers, header excluded)."""
    start, end = doc.index(BEGIN), doc.index(END)
    lines = doc[start + len(BEGIN) : end].strip().splitlines()
    return [line for line in lines if line.startswith("| ") and line not in HEADER]


def _cells(line: str) -> list[str]:
    """A row's cells ("\\|" inside a cell is no border)."""
    return [c.strip() for c in line.replace("\\|", "\0").split("|")[1:-1]]


def _name(line: str) -> str:
    return _cells(line)[0].replace("\0", "|") if _cells(line) else ""


def _source(line: str) -> str:
    cells = _cells(line)
    return cells[-1].replace("\0", "|") if cells else ""


def write_rows(doc: str, rows: list[str]) -> str:
    start, end = doc.index(BEGIN), doc.index(END)
    table = "\n".join((*HEADER, *rows))
    return doc[: start + len(BEGIN)] + "\n" + table + "\n" + doc[end:]


def _not_run(agent: PublicAgent, why: str) -> Row:
    return Row(agent.name, "—", "—", "not run", "—", "—", "—", agent.model, f"{SOURCE}: {why}")


def _seeded(agent: PublicAgent, out: Callable[[str], None]) -> PublicAgent:
    """`agent` with only the home_copy paths this machine has (a sign-in it was never given is no error)."""
    home = Path.home()
    have = tuple(p for p in agent.home_copy if (home / p).exists() or (home / p).is_symlink())
    for missing in sorted(set(agent.home_copy) - set(have)):
        out(f"{agent.name}: ~/{missing} does not exist here; its fresh homes start without it")
    return replace(agent, home_copy=have)


def record(
    agents: Sequence[PublicAgent],
    doc_path: Path = DOC,
    *,
    today: str | None = None,
    runner: Runner = run_suite,
    dry_run: bool = False,
    out: Callable[[str], None] = print,
    table: Sequence[PublicAgent] | None = None,
) -> list[Row]:
    """Run every installed agent of `agents` and write the table at `doc_path`: a row for each agent of `table`
    (default: `agents`), in its order — the row of this run, else the row of an earlier run of this script, else
    one that says why it was not run. Rows from anywhere else are dropped. Returns the rows measured."""
    today = today or datetime.date.today().isoformat()
    doc = doc_path.read_text(encoding="utf-8")
    earlier = {_name(line): line for line in read_rows(doc) if _source(line).startswith(SOURCE)}
    now: dict[str, str] = {}
    measured = []
    # PATH, and the directory of this interpreter (a virtual environment's scripts, ama among them)
    search = os.pathsep.join((os.environ.get("PATH", ""), str(Path(sys.executable).parent)))
    for agent in agents:
        if agent.skip:
            out(f"{agent.name}: skipped, {agent.skip}")
            now[agent.name] = _not_run(agent, agent.skip).line()
            continue
        found = shutil.which(agent.command[0], path=search)
        if found is None:
            kept = agent.name in earlier and " | not run | " not in earlier[agent.name]
            out(
                f"{agent.name}: skipped, {agent.command[0]!r} is not installed here"
                + (" (its row is kept)" if kept else "")
            )
            if not kept:
                now[agent.name] = _not_run(
                    agent, f"{agent.command[0]!r} was not installed where the table was written"
                ).line()
            continue
        out(f"{agent.name}: running the suite on {' '.join(agent.command)} …")
        code, report = runner(_seeded(agent, out).suite_argv(found), RUN_TIMEOUT)
        row = row_of(agent, code, report, today, version_of(agent))
        out(f"{agent.name}: {row.verdict}, {row.untested} untested; failed: {row.failures}")
        measured.append(row)
        now[agent.name] = row.line()
    rows = []
    for agent in table if table is not None else agents:
        line = now.get(agent.name) or earlier.get(agent.name)
        rows.append(line or _not_run(agent, "not run yet").line())
    if not dry_run:
        doc_path.write_text(write_rows(doc, rows), encoding="utf-8")
    return measured


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ama_conformance.record", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", metavar="NAME", help="only this agent of the table (repeatable)")
    p.add_argument(
        "--doc", type=Path, default=DOC, help="the page whose table to rewrite (default docs/conformance.md)"
    )
    p.add_argument("--dry-run", action="store_true", help="run and print, write nothing")
    p.add_argument("--launch", type=Path, default=LAUNCH_FILE, help="the launch file (default conformance/agents.toml)")
    args = p.parse_args(argv)
    try:
        launch = load(args.launch)
    except LaunchFileError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    agents = [a for a in launch if not args.only or a.name in args.only]
    unknown = set(args.only or ()) - {a.name for a in launch}
    if unknown:
        sys.stderr.write(f"unknown agent(s) {sorted(unknown)}; the launch file has {[a.name for a in launch]}\n")
        return 2
    try:
        record(agents, args.doc, dry_run=args.dry_run, table=launch)
    except ValueError as exc:  # the markers are missing: the page is not the one we write to
        sys.stderr.write(f"{args.doc}: no record table between {BEGIN!r} and {END!r} ({exc})\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
