"""The conformance runner (conformance/run.py) passes against ama itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.harness import Ama, clean_env

ROOT = Path(__file__).resolve().parents[2]


def test_conformance_suite_passes_against_ama(tmp_path):
    ama = Ama(tmp_path)
    out = subprocess.run(
        [sys.executable, str(ROOT / "conformance" / "run.py"), "--cwd", str(ama.workspace), "--", *ama.command()],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 failed" in out.stdout and out.stdout.count("PASS") >= 15
