"""The person's PATH through the real `ama --mode acp` (issue 23, "The person's PATH"; docs/tools.md "What
runs"): with a relative PATH entry (`./node_modules/.bin`) or an empty one (a trailing `:`) and the project as
the working directory, a `git`, `rg` or `npx` the repository ships is never run, in read_only or otherwise;
find_files and search still answer correctly, and an MCP server given by such a bare name fails with a reason
that says where the program was found.

Each fake program creates a marker file outside the workspace when it runs: the marker is the proof.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, run_ama, write_script
from tests.support.json_values import as_object, session_id

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
HAS_GIT = shutil.which("git") is not None


def fake(path: Path, marker: Path, output: str = "") -> None:
    """A program that leaves `marker` behind when it runs (and prints `output`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A redirection, not `touch`: the shell's own, so it works whatever PATH the program is given.
    path.write_text(f"#!/bin/sh\n: > '{marker}'\nprintf '{output}'\n")
    path.chmod(0o755)


def project(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src/app.py").write_text("def f():\n    return 'needle'\n")
    (ws / "src/util.py").write_text("X = 1\n")
    (ws / "ignored.py").write_text("needle = 'ignored'\n")
    (ws / ".gitignore").write_text("ignored.py\n")


def finals(conn: AgentProcess, sid: str) -> dict[str, dict[str, Any]]:
    return {
        u["toolCallId"]: u
        for u in conn.updates_for(sid, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    }


@pytest.mark.parametrize(
    "layout",
    [
        # `./node_modules/.bin` first, the person's PATH, then a trailing `:`: the project's copies come first.
        pytest.param("node_modules", id="node_modules-bin-first"),
        # Nothing but a trailing `:` (the current directory, the project) where the helpers could be found.
        pytest.param("trailing", id="trailing-colon-only"),
    ],
)
async def test_find_files_and_search_in_read_only_never_run_the_projects_git_or_rg(tmp_path: Path, layout: str) -> None:
    ama = Ama(tmp_path)
    ws = ama.workspace
    project(ws)
    markers = {name: tmp_path / f"ran-{name}" for name in ("git", "rg")}
    if layout == "node_modules":
        if not HAS_GIT:
            pytest.skip("git not installed")
        bin_dir = ws / "node_modules/.bin"
        path = f"./node_modules/.bin{os.pathsep}{os.environ['PATH']}{os.pathsep}"
        await anyio.run_process(["git", "init", "-q", str(ws)])  # the real git lists the files
    else:
        bin_dir = ws
        empty = tmp_path / "no-programs"
        empty.mkdir()
        path = f"{empty}{os.pathsep}"
    # What the project's copies would answer: a listing and a match that do not exist.
    fake(bin_dir / "git", markers["git"], "true\\n")
    fake(bin_dir / "rg", markers["rg"])

    replies: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"id": "f", "name": "find_files", "arguments": {"pattern": "**/*.py"}},
                {"id": "s", "name": "search", "arguments": {"pattern": "needle"}},
            ]
        },
        {"text": "done"},
    ]
    script = write_script(tmp_path / "script.json", replies)
    env = {"AMA_SCRIPT": str(script), "PATH": path}
    async with run_ama(ama, "--model", "scripted/t", env=env, options=ClientOptions(fs=False, terminal=False)) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ws))
        await conn.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
        result = await conn.prompt(sid, "look around", timeout=30)
        assert result["stopReason"] == "end_turn"
        done = finals(conn, sid)

    ran = [name for name, marker in markers.items() if marker.exists()]
    assert not ran, f"the project's {ran} ran"
    found = done["f"]["content"][-1]["content"]["text"].splitlines()
    assert done["f"]["status"] == "completed" and sorted(found) == ["src/app.py", "src/util.py"], found
    searched = done["s"]["content"][-1]["content"]["text"].splitlines()
    assert done["s"]["status"] == "completed" and searched == ["1 match in 1 file:", "src/app.py:2:    return 'needle'"]
    assert "is skipped: a relative PATH entry" in ama.log_text() or "is skipped: an empty PATH entry" in ama.log_text()


# --- MCP servers given by a bare name ---------------------------------------------------------------------


def server_env(notes: Path) -> list[dict[str, str]]:
    return [{"name": "PYTHONPATH", "value": str(ROOT)}, {"name": "MCP_TEST_DIR", "value": str(notes)}]


def real_server(path: Path) -> None:
    """A wrapper that runs the tests' MCP server (the interpreter by absolute path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tests.support.mcp_servers.stdio_server "$@"\n')
    path.chmod(0o755)


async def server_tools(conn: AgentProcess, sid: str) -> dict[str, int]:
    stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}, timeout=10))
    return {s["name"]: s["tools"] for s in stats.get("mcpServers", [])}


async def test_an_mcp_server_found_only_in_the_projects_node_modules_is_not_started(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    ws = ama.workspace
    marker = tmp_path / "ran-npx"
    fake(ws / "node_modules/.bin/npx", marker)
    empty = tmp_path / "no-programs"
    empty.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    servers = [{"name": "docs", "command": "npx", "args": ["-y", "some-mcp-server"], "env": server_env(notes)}]
    env = {"PATH": f"./node_modules/.bin{os.pathsep}{empty}{os.pathsep}"}
    async with run_ama(ama, env=env, options=ClientOptions(notices=True)) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ws, servers, timeout=10))

        def told() -> list[str]:
            return [json.dumps(n) for n in conn.updates_for(sid, "notice") if "docs" in json.dumps(n)]

        await conn.wait_for(lambda: bool(told()), timeout=20)
        assert not marker.exists(), "the project's npx ran"
        notice = json.loads(told()[0])["description"]
        assert notice.startswith("MCP server 'docs' did not start: 'npx' was found only where ama does not run"), notice
        assert "./node_modules/.bin/npx (a relative PATH entry)" in notice
        assert "absolute path" in notice
    assert not marker.exists()


async def test_a_bare_name_runs_the_program_outside_and_a_configured_path_inside_is_honoured(
    tmp_path: Path,
) -> None:
    ama = Ama(tmp_path)
    ws = ama.workspace
    marker = tmp_path / "ran-project-copy"
    fake(ws / "node_modules/.bin/mcp-notes", marker)  # first on PATH, and never run
    outside = tmp_path / "bin"
    real_server(outside / "mcp-notes")
    real_server(ws / "scripts/local-server")  # inside the project, but the person named this exact file
    notes = tmp_path / "notes"
    notes.mkdir()
    servers = [
        {"name": "outside", "command": "mcp-notes", "args": [], "env": server_env(notes)},
        {"name": "configured", "command": str(ws / "scripts/local-server"), "args": [], "env": server_env(notes)},
    ]
    env = {"PATH": f"./node_modules/.bin{os.pathsep}{outside}{os.pathsep}{os.environ['PATH']}"}
    async with run_ama(ama, env=env, options=ClientOptions(notices=True)) as conn:
        await conn.initialize()
        sid = session_id(await conn.new_session(ws, servers, timeout=10))
        deadline = time.monotonic() + 30
        counted = await server_tools(conn, sid)
        while not (counted.get("outside") and counted.get("configured")):
            assert time.monotonic() < deadline, (
                f"servers not ready: {counted}, notices {conn.updates_for(sid, 'notice')}"
            )
            await anyio.sleep(0.05)  # polling the stats, with the deadline above
            counted = await server_tools(conn, sid)
    assert not marker.exists(), "the project's copy ran instead of the one outside"
