"""`ama setup` for a server of one's own, and the context meter after it (issue 25, point 3).

vLLM, OpenRouter, LM Studio and llama.cpp's server state a model's context length in their model list. Setup,
run as a script does (a subprocess), reads it from the suite's model server serving `/v1/models` in vLLM's
shape, writes it as the model's `context_window`, and then an editor's session on that config (ama's own ACP
client over pipes) gets the meter: a `usage_update` whose `size` is that window. Where the server states none,
`--context-window N` sets it, and otherwise setup says in one sentence that the meter will be off."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.harness import Ama, clean_env, kinds, run_ama, usage_updates
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

OFF = "The context meter will be off for local/m"


def setup(ama: Ama, server: LLMServer, *flags: str) -> subprocess.CompletedProcess[str]:
    """`ama setup` as a script runs it, writing the config the test's ama then reads."""
    return subprocess.run(
        [sys.executable, "-m", "ama_acp", "setup", "--provider", "custom", "--base-url", server.openai_url,
         "--no-key", "--model", "m", "--config", str(ama.config), *flags],
        capture_output=True, text=True, timeout=60, cwd=ama.workspace, env=clean_env(ama.tmp),
    )  # fmt: skip


async def opening_size(ama: Ama) -> int | None:
    """The `size` of the first usage_update of a new session on the config, None when none is sent."""
    async with run_ama(ama) as conn:
        await conn.initialize()
        sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
        # The meter's usage_update follows these two at once when the window is known (configuration.md).
        await conn.wait_for(lambda: "config_option_update" in kinds(conn, sid))
        try:
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid), timeout=3)
        except TimeoutError:
            pass
        updates = usage_updates(conn, sid)
        return int(updates[0]["size"]) if updates else None


async def test_the_window_the_server_lists_is_written_and_the_meter_shows_it(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as server:
        server.models = [{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 32768}]
        out = setup(ama, server)
        assert out.returncode == 0, out.stderr
        assert "Context window of local/m: 32768 tokens" in out.stdout
        assert OFF not in out.stdout
        assert tomllib.loads(ama.config.read_text())["models"] == [{"id": "local/m", "context_window": 32768}]
        assert await opening_size(ama) == 32768


async def test_the_flag_sets_the_window_the_server_does_not_state(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as server:
        server.models = [{"id": "m", "object": "model"}]
        out = setup(ama, server, "--context-window", "65536")
        assert out.returncode == 0, out.stderr
        assert OFF not in out.stdout
        assert tomllib.loads(ama.config.read_text())["models"] == [{"id": "local/m", "context_window": 65536}]
        assert await opening_size(ama) == 65536


async def test_an_unknown_window_is_said_plainly_and_the_meter_is_off(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as server:
        server.models = [{"id": "m", "object": "model", "max_model_len": "lots"}]  # broken: not a window
        out = setup(ama, server)
        assert out.returncode == 0, out.stderr
        sentence = next(line for line in out.stdout.splitlines() if line.startswith(OFF))
        assert "--context-window N" in sentence and "context_window = N" in sentence and str(ama.config) in sentence
        assert tomllib.loads(ama.config.read_text())["models"] == [{"id": "local/m"}]
        assert await opening_size(ama) is None
