"""ama starts the MCP servers a `session/load` or `session/resume` names (R69, R75.1): the suite drives its own
stdio MCP server on both, against ama pointed at the suite's scripted model."""

from __future__ import annotations

import json

import pytest

from tests.support.conformance_inprocess import MODEL_ENV, run_conformance
from tests.support.harness import Ama, clean_env

pytestmark = pytest.mark.slow  # two whole groups on fresh in-process amas


def test_ama_connects_the_mcp_servers_of_a_load_and_a_resume(tmp_path):
    ama = Ama(tmp_path)
    report = tmp_path / "report.json"
    # In this process, ama launched in-process (tests/support/conformance_inprocess.py); the MCP server is the
    # suite's own stdio server, a real process that ama starts.
    out = run_conformance(
        ["-k", "mcp-reopen", *MODEL_ENV, "--report-json", str(report)] + ["--", *ama.command()],
        clean_env(tmp_path),
        tmp_path / "agents",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    status = {r["id"]: r for r in json.loads(report.read_text(encoding="utf-8"))["requirements"]}
    for rid in ("R69", "R75.1"):
        assert status[rid]["status"] == "PASS", status[rid]
        assert "'initialize'" in status[rid]["findings"][0]["detail"]  # the server's log: ama spoke MCP to it
