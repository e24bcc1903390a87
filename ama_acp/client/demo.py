"""`ama demo [--model ID] [--keep]`: a complete ACP conversation through the real stdio path.

It writes a tiny Python project with a bug into a throwaway folder, starts `python -m ama_acp --mode acp`
as an editor would, asks it to fix the bug and run the tests (approving every permission request, and
saying so), and prints what an editor would show — including the context meter after every update and
the session stats at the end. It works with any model; with none configured the agent uses the bundled
offline demo script, and the demo says so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import anyio

import ama_acp
from ama_acp.client.connection import AgentProcess, ClientOptions
from ama_acp.client.display.ansi import BOLD
from ama_acp.client.display.content import compact_diff
from ama_acp.client.display.render import Renderer, Writer
from ama_acp.client.handlers import METHOD_NOT_FOUND, RpcError
from ama_acp.client.terminal.turn import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    describe_failure,
    report_violations,
    run_turn,
    settle_session_open,
)
from ama_acp.errors import ProtocolError
from ama_acp.rpc.dispatch import JSONObject
from ama_acp.textsafe import one_line, visible

DEMO_MODEL = "scripted/demo"
PROMPT = "The tests in this project fail. Find the bug in calc.py, fix it, and run the tests."

# The project the demo model knows: add() subtracts. The tests run under unittest and pytest alike.
PROJECT = {
    "calc.py": '''"""A tiny calculator."""


def add(a, b):
    """Return the sum of a and b."""
    return a - b


def multiply(a, b):
    """Return the product of a and b."""
    return a * b
''',
    "test_calc.py": '''"""Tests for calc.py. Run: python -m pytest -q, python -m unittest -q test_calc, or python test_calc.py."""

import unittest

from calc import add, multiply


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
        self.assertEqual(add(-1, 1), 0)

    def test_multiply(self):
        self.assertEqual(multiply(4, 5), 20)


if __name__ == "__main__":
    unittest.main()
''',
    "README.md": "# calc\n\nA tiny calculator with tests (`python -m pytest -q`).\n",
    # The project's instructions for coding agents (docs/context.md "Project instructions"): ama puts them in the
    # system prompt of every request. The bundled script cannot read them, so the demo shows that they were loaded.
    "AGENTS.md": """# calc: notes for coding agents

- Run the tests with `python -m pytest -q` after every change, and say whether they pass.
- Keep each function small, with a one-line docstring.
""",
}


def write_project(root: Path) -> None:
    for name, text in PROJECT.items():
        (root / name).write_text(text, encoding="utf-8")


def agent_command(data_dir: Path, model: str | None) -> list[str]:
    command = [sys.executable, "-m", "ama_acp", "--mode", "acp", "--data-dir", str(data_dir)]
    if model:
        command += ["--model", model]
    return command


def agent_env() -> dict[str, str]:
    """The agent must be this very ama, installed or not: put its package folder first on the path."""
    env = dict(os.environ)
    package_parent = str(Path(ama_acp.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def describe_model(model: str | None, chosen: bool = False) -> str:
    """The line that says which model answers; `chosen` when --model named it."""
    if model is None:
        return "model: not reported by the agent"
    if model == DEMO_MODEL:
        why = "" if chosen else ", used because no model is configured"
        return f"model: {model} — the bundled offline demo script (no network, no API key{why})"
    return f"model: {model}"


def _figure(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value):,}"
    return str(value)


def cache_line(stats: object) -> str:
    """One line on the prompt cache from the stats' `cache` section (docs/context.md "The prompt cache"): what
    was read and written, the hit rate and what it saved — only the figures the agent knows."""
    cache = stats.get("cache") if isinstance(stats, dict) else None
    if not isinstance(cache, dict):
        return "prompt cache: the agent reports no cache section"
    parts: list[str] = []
    if isinstance(cache.get("readTokens"), int):
        parts.append(f"{cache['readTokens']:,} tokens read")
    if isinstance(cache.get("writeTokens"), int):
        parts.append(f"{cache['writeTokens']:,} written")
    if isinstance(cache.get("cacheHitRate"), (int, float)):
        parts.append(f"hit rate {cache['cacheHitRate'] * 100:.1f} %")
    saved = cache.get("saved")
    if isinstance(saved, dict) and isinstance(saved.get("amount"), (int, float)):
        parts.append(f"saved ${saved['amount']:.4f}")
    figures = ", ".join(parts) if parts else "the model reported no cache figures"
    return f"prompt cache: {figures}; state {_figure(cache.get('state', 'unknown'))}"


def stats_lines(stats: object, indent: int = 2) -> list[str]:
    """The stats object as aligned `name  value` lines, nested objects indented, cost as `$0.0451`."""
    if not isinstance(stats, dict):
        return [" " * indent + _figure(stats)]
    width = max((len(str(k)) for k in stats), default=0)
    return [line for key, value in stats.items() for line in _stat_lines(key, value, width, indent)]


def _stat_lines(key: object, value: object, width: int, indent: int) -> list[str]:
    """One member of the stats: a `name  value` line, or its name and the lines of what it holds."""
    pad = " " * indent
    money = _money(value)
    if money is not None:
        return [f"{pad}{key:<{width}}  {money}"]
    if isinstance(value, dict):
        return [f"{pad}{key}:", *stats_lines(value, indent + 2)]
    if isinstance(value, list):
        return _list_lines(key, value, width, pad)
    return [f"{pad}{key:<{width}}  {_figure(value)}"]


def _list_lines(key: object, value: list[object], width: int, pad: str) -> list[str]:
    records = [v for v in value if isinstance(v, dict)]
    if records and len(records) == len(value):
        # one line each: `path AGENTS.md · scope workspace · tokens 40`
        return [f"{pad}{key}:", *(f"{pad}  " + " · ".join(f"{k} {_figure(x)}" for k, x in r.items()) for r in records)]
    shown = ", ".join(_figure(v) for v in value) if value else "none"  # an empty list: a word, not a blank
    return [f"{pad}{key:<{width}}  {shown}"]


def _money(value: object) -> str | None:
    """`$0.0451` for an object with an amount and a currency; None for anything else."""
    if not (isinstance(value, dict) and {"amount", "currency"} <= value.keys()):
        return None
    cur = value["currency"]
    return f"${value['amount']:.4f}" if cur == "USD" else f"{value['amount']:.4f} {cur}"


_SCOPES = {"workspace": "this project's", "global": "yours, for every project", "nested": "a folder's"}


async def instructions_line(conn: AgentProcess, session_id: str) -> str:
    """Which project instructions (AGENTS.md, …) the agent loaded, as its stats say (`instructions`): the demo's
    scripted model cannot read them, so the demo shows what every request carries. Only what the agent reports."""
    try:
        stats = await conn.request("_ama/session_stats", {"sessionId": session_id}, timeout=10)
    except RpcError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        return "project instructions: the agent does not offer _ama/session_stats"
    files = stats.get("instructions") if isinstance(stats, dict) else None
    if not isinstance(files, list) or not files:
        return "project instructions: none reported by the agent"
    shown = []
    for f in files:
        if isinstance(f, dict):
            where = _SCOPES.get(str(f.get("scope")), one_line(str(f.get("scope"))))
            tokens = f"≈ {f['tokens']:,} tokens" if isinstance(f.get("tokens"), int) else "size unknown"
            shown.append(f"{one_line(str(f.get('path')))} ({where}, {tokens})")
    return f"project instructions in the system prompt: {', '.join(shown)}"


def changes_lines(root: Path) -> list[str]:
    """What the agent changed in the project, as compact diffs against the files the demo wrote."""
    return [*_edited_lines(root), *_new_file_lines(root)] or ["  (no changes)"]


def _edited_lines(root: Path) -> list[str]:
    lines: list[str] = []
    for name, original in PROJECT.items():
        path = root / name
        now = path.read_text(encoding="utf-8") if path.exists() else None
        if now is None:
            lines.append(f"  {name} (deleted)")
        elif now != original:
            lines.append(f"  {name}")
            lines.extend("    " + d for d in compact_diff(name, original, now))
    return lines


def _new_file_lines(root: Path) -> list[str]:
    skip = {"__pycache__", ".pytest_cache"}
    lines: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and str(rel) not in PROJECT and not skip.intersection(rel.parts):
            lines.append(f"  {rel} (new)")
    return lines


async def _demo(args: argparse.Namespace, root: Path, out: Writer, err: Writer, command: list[str] | None) -> int:
    project, data_dir = root / "project", root / "data"
    project.mkdir()
    data_dir.mkdir()
    write_project(project)
    command = command or agent_command(data_dir, args.model or args.fallback_model)
    log_path = root / "agent-stderr.log"

    renderer = Renderer(out, colour=False if args.no_color else None, cwd=str(project))
    _show_setting(renderer, project, command)

    options = ClientOptions(fs=True, terminal=True, permission="allow_once")
    conn = AgentProcess(
        command,
        options,
        cwd=project,
        env=agent_env(),
        stderr=log_path,
        on_update=renderer.update,
        on_permission=renderer.permission,
    )
    renderer.terminal_output = conn.terminal_output
    step, code = "start", EXIT_OK
    try:
        async with conn:
            step = "initialize"
            _show_agent_info(renderer, await conn.initialize())
            step = "session/new"
            session_id = await _open_session(conn, renderer, project, chosen=args.model is not None)

            step = "session/prompt"
            renderer.line(renderer.style(BOLD, f"» {PROMPT}"))
            result = await run_turn(conn, renderer, session_id, PROMPT, err)
            if result.get("stopReason") == "cancelled":
                code = EXIT_INTERRUPTED

            step = "_ama/session_stats"
            await _show_stats(conn, renderer, session_id)
            _show_changes(renderer, project)
            step = "shutdown"
            await conn.close()
    except (Exception, KeyboardInterrupt) as exc:
        code = _report_failure(exc, step, renderer, err, log_path)
    if report_violations(conn, err) and code == EXIT_OK:
        code = EXIT_ERROR
    return code


def _show_setting(renderer: Renderer, project: Path, command: list[str]) -> None:
    renderer.line(renderer.style(BOLD, "ama demo — a complete ACP conversation over stdio"))
    renderer.line(f"workspace: {project} ({', '.join(PROJECT)}: add() has a bug)")
    renderer.line(f"agent: {' '.join(['python' if c == sys.executable else c for c in command])}")


def _show_agent_info(renderer: Renderer, init: JSONObject) -> None:
    info = given if isinstance(given := init.get("agentInfo"), dict) else {}
    name, version = one_line(str(info.get("name", "?"))), one_line(str(info.get("version", "")))
    renderer.line(f"agent info: {name} {version}, protocol {one_line(str(init.get('protocolVersion')))}")


async def _open_session(conn: AgentProcess, renderer: Renderer, project: Path, *, chosen: bool) -> str:
    """session/new, then the lines that say what answers: the model, the permissions, the instructions."""
    # Hold the updates that follow session/new so the model line comes first.
    renderer.hold()
    opened = await conn.new_session(project)
    session_id = opened["sessionId"]
    if not isinstance(session_id, str):
        raise ProtocolError(f"session/new answered a sessionId that is not a string: {session_id!r}")
    renderer.session_opened(session_id, opened, quiet=True)
    await settle_session_open(conn, session_id)
    model = renderer.current_model(session_id)
    for update in conn.updates_for(session_id, "config_option_update"):
        # A config_option_update that came with the session open is the newer word on the model.
        renderer.session_opened(session_id, {"configOptions": update.get("configOptions")}, quiet=True)
        model = renderer.current_model(session_id)
    renderer.line(describe_model(model, chosen=chosen))
    renderer.line("permissions: every request is approved (allow once), and shown below")
    renderer.line(await instructions_line(conn, session_id))
    renderer.line("")
    renderer.release()
    return session_id


async def _show_stats(conn: AgentProcess, renderer: Renderer, session_id: str) -> None:
    renderer.line("")
    try:
        stats = await conn.request("_ama/session_stats", {"sessionId": session_id}, timeout=10)
        renderer.line(renderer.style(BOLD, "session stats (_ama/session_stats):"))
        for line in stats_lines(stats):
            renderer.line(line)
        renderer.line(cache_line(stats))
    except RpcError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        renderer.line("session stats: the agent does not offer _ama/session_stats")


def _show_changes(renderer: Renderer, project: Path) -> None:
    renderer.line("")
    renderer.line(renderer.style(BOLD, "what changed in the workspace:"))
    for line in changes_lines(project):
        renderer.line(line)


def _report_failure(exc: BaseException, step: str, renderer: Renderer, err: Writer, log_path: Path) -> int:
    """Say what failed, and the agent's last words on stderr; the exit code."""
    renderer.end_stream()
    code, message = describe_failure(exc, step)
    err.write(f"ama demo: {one_line(message)}\n")
    tail = _tail(log_path)
    if tail:  # the agent's own words: shown, never obeyed by the terminal
        err.write(f"ama demo: the agent's last stderr lines ({log_path}):\n{visible(tail)}\n")
    return code or EXIT_ERROR


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.rstrip().splitlines()[-lines:])


def run_demo(
    argv: list[str],
    out: Writer | None = None,
    err: Writer | None = None,
    *,
    command: list[str] | None = None,
    model_configured: bool = True,
) -> int:
    """`ama demo …` (argv without the program and subcommand names); returns the exit code. `command`
    replaces the agent command (tests drive the demo against a stand-in agent). `model_configured` False: the
    agent would find no usable model, so the demo names its offline script (the agent never picks it itself)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    parser = argparse.ArgumentParser(
        prog="ama demo", description="A complete ACP conversation, shown as an editor would."
    )
    parser.add_argument("--model", default=None, help="model id (default: the configured one, else scripted/demo)")
    parser.add_argument("--keep", action="store_true", help="keep the throwaway workspace and print where it is")
    parser.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    args.fallback_model = None if model_configured else DEMO_MODEL
    root = Path(tempfile.mkdtemp(prefix="ama-demo-"))
    try:
        return anyio.run(_demo, args, root, out, err, command)
    except KeyboardInterrupt:
        err.write("ama demo: interrupted\n")
        return EXIT_INTERRUPTED
    finally:
        if args.keep:
            out.write(f"\nworkspace kept: {root}\n")
        else:
            shutil.rmtree(root, ignore_errors=True)
