"""What an ama process does not import to start: httpx's command-line tool (cli.skip_httpx_cli) and the whole
ACP client with `ama_acp.client.process_group` (the package's names are imported on first use)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ama_acp.client
from ama_acp.client import connection, errors

ROOT = Path(__file__).resolve().parents[2]


def test_a_fresh_process_skips_httpx_s_cli_and_the_client_until_used() -> None:
    code = (
        "import sys, json\n"
        "from ama_acp.cli import skip_httpx_cli\n"
        "skip_httpx_cli()\n"
        "import ama_acp.client.process_group\n"
        "client_built = 'ama_acp.client.connection' in sys.modules\n"
        "import httpx\n"
        "httpx.AsyncClient(verify=False)\n"
        "cli = [m for m in sys.modules if m.split('.')[0] in ('click', 'pygments', 'rich') and sys.modules[m]]\n"
        "from ama_acp.client import AgentProcess\n"
        "print(json.dumps([client_built, cli, sys.modules['httpx._main'] is None, callable(httpx.main),\n"
        "                  AgentProcess.__module__]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    assert json.loads(out.stdout) == [False, [], True, True, "ama_acp.client.connection"]


def test_the_client_package_still_offers_every_name_it_lists() -> None:
    for name in ama_acp.client.__all__:
        home = errors if name == "RpcError" else connection
        assert getattr(ama_acp.client, name) is getattr(home, name)
    from ama_acp.client import CAPTURE, AgentProcess, RpcError

    assert (CAPTURE, AgentProcess, RpcError) == (connection.CAPTURE, connection.AgentProcess, errors.RpcError)
    with pytest.raises(AttributeError, match="no_such_name"):
        ama_acp.client.no_such_name  # noqa: B018


# What a first answer in text never needs (issue 41: each costs milliseconds of a fresh ama's first answer, which an
# editor's person waits on): PyYAML (a command file's or skill's front matter), the exact estimator, the MCP SDK
# (a session's MCP servers), the conformance suite's validator, the HTML converter (a fetched page), httpx's
# command-line tool, and ama's permissions, `task` machinery, lifecycle, hooks, the git state a compaction reads
# and /rewind (a tool call, a task, a load, a `[[hooks]]` entry, a compaction, a rewind), and the tools' modules
# with the regular expression engine and the file walker they use (a tool's first call: tools/declared.py
# declares them before).
NOT_FOR_A_FIRST_ANSWER = (
    "yaml",
    "tiktoken",
    "mcp",
    "jsonschema",
    "html_to_markdown",
    "click",
    "ama_acp.session.editor.approval",
    "ama_acp.session.rules.book",
    "ama_acp.session.tasks.loop_worker",
    "ama_acp.session.tasks.external.agent",
    "ama_acp.session.lifecycle",
    "ama_acp.shaping.hook_points",
    "ama_acp.tools.git_state",
    "ama_acp.session.history.rewind",
    "ama_acp.session.tasks.runner",
    "ama_acp.tools.read",
    "ama_acp.tools.write",
    "ama_acp.tools.edit",
    "ama_acp.tools.ls",
    "ama_acp.tools.search.glob",
    "ama_acp.tools.search.grep",
    "ama_acp.tools.search.filewalk",
    "ama_acp.tools.shell",
    "ama_acp.tools.todo",
    "ama_acp.tools.web.fetch",
    "re2",
    # httpx's client layer (a model request goes straight over httpcore: providers/exchange.py), and the standard
    # modules a first answer used to import for a tool call, a miss, a retry or a log rollover only
    "httpx",
    "http.cookiejar",
    "logging.handlers",
    "hashlib",
    "fractions",
    "difflib",
    "shlex",
    "ama_acp.mcp.scrub",
)


def test_a_first_answer_in_text_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    """A whole first prompt in a fresh process (`ama -p`: the same session and agent loop as `--mode acp`, without
    the preload thread that imports the rest afterwards) against a model server on 127.0.0.1, in a workspace
    without command files or skills."""
    from tests.support.harness import clean_env, local_config
    from tests.support.llm_server import LLMServer

    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "config.toml"
    code = (
        "import json, sys\n"
        "from ama_acp.cli import main\n"
        f"status = main(['-p', 'hi', '--config', {str(config)!r}, '--data-dir', {str(tmp_path / 'data')!r},\n"
        f"               '--cwd', {str(ws)!r}])\n"
        f"sys.stderr.write(json.dumps([status, sorted(m for m in {NOT_FOR_A_FIRST_ANSWER!r} if m in sys.modules)]))\n"
    )
    with LLMServer() as server:
        config.write_text(local_config(server.openai_url), encoding="utf-8")
        server.enqueue({"text": "hello there"})
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ws,
            timeout=60,
            env=clean_env(tmp_path, {"LOCAL_TEST_KEY": "test-key-abcdefgh"}),
        )
    assert "hello there" in out.stdout, out.stderr
    assert json.loads(out.stderr.splitlines()[-1]) == [0, []]
