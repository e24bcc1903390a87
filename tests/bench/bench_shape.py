"""Session open with a shaped workspace (issue 40): 50 command files and 20 skills against none, in the same run.

    .venv/bin/python tests/bench/bench_shape.py [--runs 15] [--check-goals]

One `ama --mode acp` process (the scripted demo model, no network), over raw pipes: after one warm-up session of
each, `session/new` alternately in a workspace holding 50 commands (`.ama/commands/`, ten of them in a subfolder,
a third in Claude's and Gemini's formats) and 20 skills (`.ama/skills/NAME/SKILL.md`), and in an empty one. For
each: `session/new` written → its response read, → its `available_commands_update` read, → its `usage_update`
read (the end of the opening updates). The process parses each file once (a later session in the same project
parses only the files whose stat changed), so these are the warm figures. Then, in this process, what the session
does with the files itself: a process's first load of all of them (at the open, after the response), another
session's load in the same project, and the stat-only check at the start of each prompt.

Goal (issue 40): session/new as fast with the files as without (the files are not read before its answer). A
missed goal is reported, not fatal (--check-goals: exit 1 on one). On a 2-core machine the figures are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.bench_streaming import BenchFailure, RawAgent, compile_ama  # noqa: E402
from tests.support.harness import Ama, clean_env  # noqa: E402

RUNS = 15
COMMANDS = 50
SKILLS = 20
TOLERANCE = 1.25  # the shaped median may be this much of the empty one (noise on a shared 2-core machine)


def shape(ws: Path) -> None:
    """50 commands (ama's, Claude's and Gemini's formats, ten in a subfolder) and 20 skills."""
    for n in range(COMMANDS):
        kind = n % 3
        sub = "team/" if n % 5 == 0 else ""
        if kind == 2:
            path = ws / ".gemini" / "commands" / f"{sub}g{n}.toml"
            text = f'description = "Gemini command {n}"\nprompt = """\nDo task {n} with {{{{args}}}}.\n"""\n'
        else:
            folder = ".ama" if kind == 0 else ".claude"
            path = ws / folder / "commands" / f"{sub}c{n}.md"
            text = (
                f"---\ndescription: Command number {n}, which does a thing\nargument-hint: [target] [depth]\n"
                f"allowed-tools: Bash(git status:*)\n---\nDo task {n} on $1 to depth $2.\n" + "Step.\n" * 40
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for n in range(SKILLS):
        skill = ws / ".ama" / "skills" / f"skill-{n}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            f"---\nname: skill-{n}\ndescription: Skill {n}: when to use it\n---\n# Skill {n}\n" + "Do this.\n" * 60,
            encoding="utf-8",
        )


def opened(agent: RawAgent, rid: int, cwd: Path) -> dict[str, float]:
    sent = agent.request(rid, "session/new", {"cwd": str(cwd), "mcpServers": []})
    answered, msg = agent.response(rid, "the session/new response")
    sid = msg["result"]["sessionId"] if isinstance(msg.get("result"), dict) else None
    if not sid:
        raise BenchFailure(f"session/new answered without a sessionId: {msg}")

    def seen(kind: str) -> bool:
        return any(_update(m, sid) == kind for m in agent.messages)

    agent.wait(lambda: seen("available_commands_update"), "the available_commands_update")
    commands = time.perf_counter()
    agent.wait(lambda: seen("usage_update"), "the usage_update")
    return {"answer": answered - sent, "commands": commands - sent, "opened": time.perf_counter() - sent}


def _update(msg: dict[str, Any], sid: str) -> object:
    params = msg.get("params")
    if not isinstance(params, dict) or params.get("sessionId") != sid:
        return None
    update = params.get("update")
    return update.get("sessionUpdate") if isinstance(update, dict) else None


def in_process(ws: Path, rounds: int = 50) -> tuple[float, float, float]:
    """(a process's first load of every file, another session's load in the same project, the stat-only check at
    each prompt), in ms."""
    from ama_acp.session.file_commands import FileCommands
    from ama_acp.shaping import command_files

    firsts: list[float] = []
    agains: list[float] = []
    checks: list[float] = []
    for _ in range(rounds):
        command_files._PARSED.clear()  # as in a fresh process
        for loads in (firsts, agains):
            files = FileCommands(str(ws), None)
            start = time.perf_counter()
            files.refresh({"context"})
            loads.append(time.perf_counter() - start)
        start = time.perf_counter()
        files.refresh({"context"})
        checks.append(time.perf_counter() - start)
    if len(files.available()) != COMMANDS + 1:
        raise BenchFailure(f"expected {COMMANDS} commands and /init, got {len(files.available())}")
    first, again, check = (statistics.median(x) * 1000 for x in (firsts, agains, checks))
    return first, again, check


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="sessions of each workspace")
    parser.add_argument("--check-goals", action="store_true", help="exit 1 when the goal is missed")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    from tests.bench._texts import machine

    compile_ama()
    results: dict[str, list[dict[str, float]]] = {"none": [], "50 commands, 20 skills": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ama = Ama(Path(tmp))
            shaped = Path(tmp) / "shaped"
            shaped.mkdir()
            shape(shaped)
            places = {"none": ama.workspace, "50 commands, 20 skills": shaped}
            agent = RawAgent(ama.command(), str(ama.workspace), clean_env(Path(tmp)), ama.stderr)
            try:
                agent.request(1, "initialize", {"protocolVersion": 1})
                agent.response(1, "the initialize response")
                rid = 2
                for name in places:  # warm-up: the session modules imported, the files in the page cache
                    opened(agent, rid, places[name])
                    rid += 1
                for _ in range(args.runs):
                    for name, cwd in places.items():
                        results[name].append(opened(agent, rid, cwd))
                        rid += 1
            finally:
                agent.close()
            first_ms, again_ms, check_ms = in_process(shaped)
    except BenchFailure as exc:
        sys.stderr.write(f"bench_shape: FAILED: {exc}\n")
        return 2

    print(f"bench_shape — {machine()}")
    print(f"one ama --mode acp (scripted demo model), median of {args.runs} sessions each, alternating")
    print()
    medians: dict[str, dict[str, float]] = {}
    for name, runs in results.items():
        medians[name] = {k: statistics.median(r[k] for r in runs) * 1000 for k in ("answer", "commands", "opened")}
        m = medians[name]
        print(
            f"{name:<24} session/new {m['answer']:6.2f} ms   → available_commands_update {m['commands']:6.2f} ms"
            f"   → usage_update {m['opened']:6.2f} ms"
        )
    none, shaped_m = medians["none"]["answer"], medians["50 commands, 20 skills"]["answer"]
    passed = shaped_m <= none * TOLERANCE + 0.2
    print(
        f"session/new with the files / without: {shaped_m / none:.2f}×  goal ≤ {TOLERANCE:g}×  {'PASS' if passed else 'FAIL'}"
    )
    print(
        f"in process: a process's first load of the 50 files {first_ms:.2f} ms, another session's in the same project "
        f"{again_ms:.2f} ms; the check at each prompt {check_ms:.3f} ms"
    )
    return 1 if args.check_goals and not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
