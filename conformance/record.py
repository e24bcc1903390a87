"""`python -m ama_conformance.record`: rerun the suite against the public ACP agents installed here and write the
published record, the table between the markers in docs/conformance.md.

Each agent of `PUBLIC_AGENTS` is looked up on PATH by its command; one that is not installed is skipped with a
note, and its row (from an earlier run) is kept as it was. Each installed agent gets one whole suite run (a
subprocess: `python -m ama_conformance --env-clean --report-json … -- COMMAND`) and its row is replaced by what the
run found: the version the agent names in `agentInfo`, the date, the verdict, and the failures by id (the
deciding ones, then the advisory ones apart). The source column says which run a row comes from.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "conformance.md"
BEGIN = "<!-- conformance-record:begin (python -m ama_conformance.record rewrites this table) -->"
END = "<!-- conformance-record:end -->"
HEADER = (
    "| agent | version | date | verdict | failures (MANDATORY, CAPABILITY) | advisory findings | source |",
    "|---|---|---|---|---|---|---|",
)
RUN_TIMEOUT = 1800.0  # seconds for one agent's whole run (a hung agent is cut off by the suite long before)


@dataclass(frozen=True)
class PublicAgent:
    name: str  # the table's first column, and what --only names
    command: tuple[str, ...]  # how an editor starts it speaking ACP on stdio; command[0] is looked up on PATH
    suite_args: tuple[str, ...] = ()  # more options for its run (its model, -k, timeouts)


# The public agents the suite has been run against. Each runs with its own model (configured as its own docs say,
# in the environment --env-clean keeps: HOME's config files); add `--model-env …` to suite_args to drive it with
# the suite's scripted model instead. `ama` is the agent of this repository, driven by the scripted model.
PUBLIC_AGENTS: tuple[PublicAgent, ...] = (
    PublicAgent(
        "ama",
        ("ama", "--mode", "acp"),
        (
            "--model-env",
            "OPENAI_BASE_URL={openai}",
            "--model-env",
            "OPENAI_API_KEY=sk-acp-conformance",
            "--model-env",
            "AMA_MODEL=openai/gpt-4.1",
        ),
    ),
    PublicAgent("SDK example agent", ("acp-example-agent",)),
    PublicAgent("fast-agent", ("fast-agent-acp",)),
    PublicAgent("mistral-vibe", ("vibe-acp",)),
    PublicAgent("kimi-cli", ("kimi", "--acp")),
    PublicAgent("claude-agent-acp", ("claude-agent-acp",)),
    PublicAgent("claude-code-acp", ("claude-code-acp",)),
    PublicAgent("gemini-cli", ("gemini", "--experimental-acp")),
    PublicAgent("opencode", ("opencode", "acp")),
)


@dataclass(frozen=True)
class Row:
    agent: str
    version: str
    date: str
    verdict: str
    failures: str
    advisory: str
    source: str

    def line(self) -> str:
        cells = [self.agent, self.version, self.date, self.verdict, self.failures, self.advisory, self.source]
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


def _ids(report: dict[str, Any], tiers: set[str]) -> list[str]:
    return [
        r["id"]
        for r in report.get("requirements", [])
        if r.get("status") == "FAIL" and r.get("tier") in tiers and r.get("profile") == "acp"
    ]


def row_of(agent: PublicAgent, code: int, report: dict[str, Any], today: str) -> Row:
    """The table row of one run."""
    source = f"`python -m ama_conformance.record`, {today}"
    if not report:
        why = "timed out" if code == -1 else f"exit {code}, no report"
        return Row(agent.name, "unknown", today, f"not run ({why})", "—", "—", source)
    info = (report.get("agent") or {}).get("agentInfo") or {}
    version = str(info.get("version") or "unknown")
    verdict = _verdict(code, report)
    deciding = _ids(report, {"MANDATORY", "CAPABILITY"})
    advisory = _ids(report, {"ADVISORY"})
    return Row(agent.name, version, today, verdict, ", ".join(deciding) or "—", ", ".join(advisory) or "—", source)


def _verdict(code: int, report: dict[str, Any]) -> str:
    """The ACP verdict of a run, as its report and exit status give it."""
    acp: dict[str, Any] = next((v for v in report.get("verdicts", []) if v.get("profile") == "acp"), {})
    if code == 2:  # the agent could not be started (or the suite failed): no verdict to publish
        return "could not start"
    return str(acp.get("verdict") or ("CONFORMANT" if acp.get("conformant") else "NOT CONFORMANT"))


def read_rows(doc: str) -> list[str]:
    """The table's rows now (between the markers, header excluded)."""
    start, end = doc.index(BEGIN), doc.index(END)
    lines = doc[start + len(BEGIN) : end].strip().splitlines()
    return [line for line in lines if line.startswith("| ") and line not in HEADER]


def _name(line: str) -> str:
    return line.split("|")[1].strip()


def write_rows(doc: str, rows: list[str]) -> str:
    start, end = doc.index(BEGIN), doc.index(END)
    table = "\n".join((*HEADER, *rows))
    return doc[: start + len(BEGIN)] + "\n" + table + "\n" + doc[end:]


def record(
    agents: Sequence[PublicAgent],
    doc_path: Path = DOC,
    *,
    today: str | None = None,
    runner: Runner = run_suite,
    dry_run: bool = False,
    out: Callable[[str], None] = print,
) -> list[Row]:
    """Run every installed agent of `agents` and put its row in the table at `doc_path` (an agent's old row is
    replaced; rows of agents not run are kept as they were). Returns the rows measured."""
    today = today or datetime.date.today().isoformat()
    doc = doc_path.read_text(encoding="utf-8")
    rows = read_rows(doc)
    measured = []
    # PATH, and the directory of this interpreter (a virtual environment's scripts, ama among them)
    search = os.pathsep.join((os.environ.get("PATH", ""), str(Path(sys.executable).parent)))
    for agent in agents:
        found = shutil.which(agent.command[0], path=search)
        if found is None:
            kept = any(_name(line) == agent.name for line in rows)
            out(
                f"{agent.name}: skipped, {agent.command[0]!r} is not installed here"
                + (" (its row is kept)" if kept else "")
            )
            continue
        out(f"{agent.name}: running the suite on {' '.join(agent.command)} …")
        code, report = runner(["--env-clean", *agent.suite_args, "--", found, *agent.command[1:]], RUN_TIMEOUT)
        row = row_of(agent, code, report, today)
        out(f"{agent.name}: {row.verdict} {row.failures}")
        measured.append(row)
        line = row.line()
        at = next((i for i, old in enumerate(rows) if _name(old) == agent.name), None)
        if at is None:
            rows.append(line)
        else:
            rows[at] = line
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
    args = p.parse_args(argv)
    agents = [a for a in PUBLIC_AGENTS if not args.only or a.name in args.only]
    unknown = set(args.only or ()) - {a.name for a in PUBLIC_AGENTS}
    if unknown:
        sys.stderr.write(f"unknown agent(s) {sorted(unknown)}; the table has {[a.name for a in PUBLIC_AGENTS]}\n")
        return 2
    try:
        record(agents, args.doc, dry_run=args.dry_run)
    except ValueError as exc:  # the markers are missing: the page is not the one we write to
        sys.stderr.write(f"{args.doc}: no record table between {BEGIN!r} and {END!r} ({exc})\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
