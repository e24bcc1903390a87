"""The wire facts docs/editors.md "What each editor shows of the meter" rests on, checked over real pipes:
what each editor reads of `usage_update` is there in the form it reads it, `/context` is offered to every
client and answers with the whole meter, and a failed load's sentence is in `data.details` (toad).

Neovim with CodeCompanion, Emacs with agent-shell, Zed and toad cannot be run here without downloading them, so
their side is the doc's reading of their sources; acpx is driven for real when its package is already in the
npm cache (`npx acpx@0.19.1` put it there): nothing is downloaded, and the test is skipped without it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Ama, write_script
from tests.support.raw import RawAma

WINDOW = 32_000


def _configure(ama: Ama, tmp_path: Path) -> Path:
    ama.config.write_text(
        'model = "scripted/meter"\n[[models]]\nid = "scripted/meter"\n'
        f"context_window = {WINDOW}\nprice = {{ input = 2.0, output = 8.0 }}\n",
        encoding="utf-8",
    )
    replies = [{"text": "hello there", "usage": {"input": 3000, "output": 20}}]
    return write_script(tmp_path / "meter.json", replies)


def _updates(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        update = m.get("params", {}).get("update", {})
        if m.get("method") == "session/update" and update.get("sessionUpdate") == kind:
            out.append(update)
    return out


def test_what_each_editor_reads_is_on_the_wire(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    script = _configure(ama, tmp_path)
    raw = RawAma(ama, env={"AMA_SCRIPT": str(script)})
    try:
        raw.request(1, "initialize", {"protocolVersion": 1})
        sid = raw.request(2, "session/new", {"cwd": str(ama.workspace), "mcpServers": []})["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt})
        seen = raw.until(3)
        meter = _updates(seen, "usage_update")[-1]
        # CodeCompanion: `used` alone, as "(N tokens)". agent-shell: used/size as "3k/32k (9%)", and the cost's
        # amount and currency in its tooltip. acpx: the cost, into its session record.
        assert isinstance(meter["used"], int) and meter["used"] > 0
        assert meter["size"] == WINDOW
        assert set(meter["cost"]) == {"amount", "currency"} and meter["cost"]["currency"] == "USD"
        assert isinstance(meter["cost"]["amount"], int | float)
        # `/context` (`\\context` in CodeCompanion) is offered to every client, and answers with the whole meter.
        commands = [c["name"] for u in _updates(seen, "available_commands_update") for c in u["availableCommands"]]
        assert "context" in commands
        ask = {"sessionId": sid, "prompt": [{"type": "text", "text": "/context"}]}
        raw.send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": ask})
        text = "".join(u["content"].get("text", "") for u in _updates(raw.until(4), "agent_message_chunk"))
        assert f"of {WINDOW:,} tokens" in text and "Cost so far" in text and "tier" in text
    finally:
        raw.close()


@functools.cache
def _acpx_cli() -> Path | None:
    """acpx 0.19.1's entry point in the npm cache, when it is there and node is on PATH (asked at the first
    acpx test, not at collection)."""
    if shutil.which("node") is None:
        return None
    try:
        cache = subprocess.run(
            ["npm", "config", "get", "cache"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        cache = str(Path.home() / ".npm")
    for package in sorted(Path(cache).glob("_npx/*/node_modules/acpx/package.json")):
        try:
            if json.loads(package.read_text(encoding="utf-8")).get("version") == "0.19.1":
                return package.parent / "dist" / "cli.js"
        except (OSError, ValueError):
            continue
    return None


@pytest.mark.parametrize(
    ("fmt", "prompt"), [("json", "hi"), ("text", "hi"), ("quiet", "/context")], ids=["json", "text", "context"]
)
def test_what_acpx_shows_of_the_meter(tmp_path: Path, fmt: str, prompt: str) -> None:
    cli = _acpx_cli()
    if cli is None:
        pytest.skip("acpx 0.19.1 is not in the npm cache (the test never downloads it)")
    ama = Ama(tmp_path)
    script = _configure(ama, tmp_path)
    agent = " ".join([sys.executable, "-m", "ama_acp", *ama.argv()])
    env = {**os.environ, "HOME": str(tmp_path), "AMA_SCRIPT": str(script), "npm_config_offline": "true"}
    done = subprocess.run(
        ["node", str(cli), "--cwd", str(ama.workspace), "--agent", agent, "--format", fmt, "exec", prompt],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    if fmt == "json":  # every message, the usage_update whole
        updates = [json.loads(line) for line in done.stdout.splitlines() if '"usage_update"' in line]
        assert updates and updates[-1]["params"]["update"]["size"] == WINDOW
    elif fmt == "text":  # the reply, and nothing of the meter
        assert "hello there" in done.stdout
        assert str(WINDOW) not in done.stdout and f"{WINDOW:,}" not in done.stdout
    else:  # /context: ama's whole meter as the reply
        assert f"of {WINDOW:,} tokens" in done.stdout and "Cost so far" in done.stdout
