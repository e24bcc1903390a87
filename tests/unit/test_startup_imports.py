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
