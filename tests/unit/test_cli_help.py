"""`ama --help` names every subcommand with one line each (issue 25 point 8): the error messages tell people
to run `ama setup`, so the help must say it exists. Run through the real command (a subprocess)."""

from __future__ import annotations

import subprocess
import sys

from ama_acp.cli import SUBCOMMAND_HELP, SUBCOMMANDS

EVERY = ("setup", "doctor", "acp-client", "sessions", "stats", "models", "conformance", "demo")


def _help() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ama_acp", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_help_lists_every_subcommand_with_one_line() -> None:
    out = _help()
    for name in EVERY:
        lines = [line for line in out.splitlines() if line.strip().startswith(f"ama {name} ")]
        assert len(lines) == 1, (name, out)
        assert len(lines[0].split(None, 2)) == 3, lines[0]  # `ama NAME description`


def test_the_table_is_what_dispatches() -> None:
    assert set(SUBCOMMANDS) == set(EVERY) == set(SUBCOMMAND_HELP)


def test_help_imports_no_subcommand_module() -> None:
    code = (
        "import sys\n"
        "from ama_acp.cli import main_parser\n"
        "main_parser().format_help()\n"
        "bad = [m for m in sys.modules if m.startswith(('ama_acp.client', 'ama_acp.setup', 'ama_acp.doctor',"
        " 'ama_acp.session', 'conformance'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
