"""An unknown cost is said, not left out (issue 41 point 2; docs/rules.md U17, P1; docs/context.md "Cost and billed
totals"): after a cancel every `usage_update` carries `"cost": null` with what was measured in
`_meta.ama.costLowerBound`, after a load too; `/context` and the terminal client show `$? (≥ $…)`.

Through real pipes: a real `ama --mode acp` subprocess driven by ama's own client and by the official SDK
client; every line ama writes is validated against the pinned schema (tests/support/harness.py, the SDK
test's tee). The model is the local HTTP model server.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_acp_client_model_switch import meters_after
from tests.support.harness import Ama, agent_text, clean_env, kinds, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio
ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
FIRST = {"input": 500, "output": 5}  # at $1 / $2 per million: $0.00051
FIRST_COST = {"amount": 0.00051, "currency": "USD"}
SLOW = {"text": "z" * 400, "chunk_size": 2, "delay": 0.05, "usage": {"input": 700, "output": 200}}


def configure(ama: Ama, url: str) -> None:
    ama.config.write_text(
        'model = "local/a"\n'
        f'[providers.local]\nkind = "openai"\nbase_url = "{url}"\napi_key_env = "LOCAL_TEST_KEY"\nmax_retries = 0\n'
        '[[models]]\nid = "local/a"\ncontext_window = 100000\nprice = { input = 1.0, output = 2.0 }\n'
        '[[models]]\nid = "local/free"\ncontext_window = 100000\n'  # a window, no price: its requests are unpriced
    )


async def open_session(conn: Any, ama: Ama) -> str:
    await conn.initialize()
    sid: str = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


def unknown_with_bound(update: dict[str, Any]) -> bool:
    return "cost" in update and update["cost"] is None and update["_meta"]["ama"]["costLowerBound"] == FIRST_COST


async def test_after_a_cancel_every_usage_update_says_null_with_the_bound_and_so_does_a_load(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "first", "usage": FIRST}, SLOW, {"text": "third", "usage": {"input": 900, "output": 9}})
        async with run_ama(ama, env=ENV, process=True) as conn:
            sid = await open_session(conn, ama)
            await conn.prompt(sid, "one", timeout=15)
            assert usage_updates(conn, sid)[-1]["cost"] == FIRST_COST
            known = len(usage_updates(conn, sid))
            chunks = len(conn.updates_for(sid, "agent_message_chunk"))
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}
            )
            await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) > chunks)
            await conn.cancel(sid)
            assert as_object(await turn.wait(10))["stopReason"] == "cancelled"
            after_cancel = usage_updates(conn, sid)[known:]
            # The turn ends with the cost turning unknown: said once (D1), as null with what is known so far.
            assert after_cancel and all(unknown_with_bound(u) for u in after_cancel), after_cancel
            assert len(after_cancel) == 1, after_cancel
            await conn.prompt(sid, "three", timeout=15)  # a later priced request raises the bound, not the total
            last = usage_updates(conn, sid)[-1]
            assert last["cost"] is None
            assert last["_meta"]["ama"]["costLowerBound"] == {"amount": 0.001428, "currency": "USD"}
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert "cost" not in stats  # unknown; and what was spent at least, the same as the meter's
            assert stats["costLowerBound"] == {"amount": 0.001428, "currency": "USD"}
            await conn.prompt(sid, "/context", timeout=10)
            text = agent_text(conn, sid)
            assert "**Cost so far:** $? (≥ $0.0014), unknown: a request was cancelled or cut off" in text
        async with run_ama(ama, env=ENV, process=True) as conn:  # a load says the same
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            (loaded,) = usage_updates(conn, sid)
            assert loaded["cost"] is None
            assert loaded["_meta"]["ama"]["costLowerBound"] == {"amount": 0.001428, "currency": "USD"}


async def test_the_official_sdk_client_reads_the_null_cost_after_a_cancel(tmp_path: Path) -> None:
    from acp import text_block

    from tests.integration.test_official_sdk import open_session as sdk_open
    from tests.integration.test_official_sdk import sdk_ama, step, write_config

    ama = Ama(tmp_path)
    with LLMServer() as llm:
        write_config(ama, llm, "openai")  # $1 / $2 per million, as here
        llm.enqueue({"text": "first", "usage": FIRST}, SLOW)
        async with sdk_ama(ama, "cancel") as (conn, client, wire, _process):
            sid = await sdk_open(conn, client, ama)
            await step(conn.prompt(session_id=sid, prompt=[text_block("one")]), "the first prompt")
            chunks = len(client.of(sid, "agent_message_chunk"))
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("two")]))
            await client.wait_for(lambda: len(client.of(sid, "agent_message_chunk")) > chunks, "the slow reply")
            await conn.cancel(session_id=sid)
            assert (await step(prompt, "the cancelled prompt")).stop_reason == "cancelled"
            # The SDK parsed it (its model allows null) and hands it on; the raw line says null, not absent.
            await client.wait_for(lambda: len(client.of(sid, "usage_update")) >= 3, "the update after the cancel")
            sent = [
                m["params"]["update"]
                for m in wire.received()
                if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "usage_update"
            ]
            assert sent[1]["cost"] == FIRST_COST
            assert unknown_with_bound(sent[-1]), sent[-1]


def test_the_terminal_client_shows_an_unknown_cost_with_its_bound(tmp_path: Path) -> None:
    """A priced answer, then a model without a price: `ama acp-client` (a real process, ama a real process under
    it, the prompts piped in) shows `$? (≥ $0.0005)`, never the old figure."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "First answer.", "usage": FIRST}, {"text": "Second answer.", "usage": FIRST})
        argv = [sys.executable, "-m", "ama_acp", "acp-client", "--cwd", str(ama.workspace), "--"]
        done = subprocess.run(
            [*argv, *ama.command("--log-level", "warning")],
            input=b"first\n/model local/free\nsecond\n",
            capture_output=True,
            env=clean_env(tmp_path, ENV),
            cwd=ama.workspace,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    lines = done.stdout.decode().splitlines()
    assert " $0.0005 " in meters_after(lines, "» first", "» /model local/free")[-1]
    second = meters_after(lines, "» second")[-1]
    assert second.startswith("ctx ") and " $? (≥ $0.0005) " in second, second
