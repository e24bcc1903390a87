"""Load tiers at the exact token, the `mid` notice, and estimated figures that say so — over real pipes
(issue 22 point 8; docs/context.md "Load tiers" and "Notices").

ama runs as a subprocess against the local HTTP model server, whose scripted usage puts the fill exactly on
either side of the `mid` cap of a 10,000-token window: 4,999 tokens read 50.0 % once rounded but are still
`healthy` (no notice); 5,000 are `mid`, told once with the counts. A model switch then makes the figure an
estimate, and the notice and `/context` say so. Every line ama writes is validated against the pinned schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, kinds, run_ama, usage_updates
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
SMALL, LARGE = 10_000, 40_000  # local/big has the small window: scripted usage fills it; local/wide is larger


def configure(ama: Ama, llm: LLMServer) -> None:
    # Automatic compaction off: 5,000 of 10,000 tokens is its threshold, and a compaction would end the script.
    ama.config.write_text(f"""
model = "local/big"
[providers.local]
kind = "openai"
base_url = "{llm.openai_url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 0

[[models]]
id = "local/big"
context_window = {SMALL}

[[models]]
id = "local/wide"
context_window = {LARGE}

[compaction]
enabled = false
""")


def meta(update: dict[str, Any]) -> dict[str, Any]:
    ama: dict[str, Any] = update["_meta"]["ama"]
    return ama


async def context_text(conn: AgentProcess, sid: str) -> str:
    start = len(conn.updates_for(sid, "agent_message_chunk"))
    await conn.prompt(sid, "/context", timeout=10)
    return "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")[start:])


async def test_mid_at_the_exact_token_told_once_with_the_counts_and_estimated_after_a_model_switch(tmp_path):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue(*({"text": f"reply {n}", "usage": {"input": n, "output": 0}} for n in (4_999, 5_000, 1_000)))
        async with run_ama(ama, env=ENV, options=ClientOptions(notices=True)) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            prefix = usage_updates(conn, sid)[0]["used"]
            assert prefix * 2 < SMALL, "the test needs a session that opens healthy"

            # 4,999 of 10,000: 49.99 %, shown as 50.0, but the cap is not reached.
            await conn.prompt(sid, "one", timeout=15)
            last = usage_updates(conn, sid)[-1]
            assert (last["used"], meta(last)["percent"], meta(last)["tier"]) == (4_999, 50.0, "healthy")
            assert conn.updates_for(sid, "notice") == []

            # 5,000 of 10,000: mid, told once, with the counts and what to do; a measured figure has no ≈.
            await conn.prompt(sid, "two", timeout=15)
            last = usage_updates(conn, sid)[-1]
            assert (last["used"], meta(last)["source"], meta(last)["tier"]) == (5_000, "usage", "mid")
            (mid,) = conn.updates_for(sid, "notice")
            assert (mid["severity"], mid["title"]) == ("info", "Context mid")
            assert mid["description"].startswith("50.0 % (5,000 of 10,000 tokens) used.")
            assert "Finish the current piece of work soon; start new work in a fresh session." in mid["description"]
            # The fill is measured: no ≈. The boot cost that follows (the session's first notice) is ama's own
            # estimate of the prefix, and says so (issue 29: the expectation moved from the whole text to the fill).
            fill, boot = mid["description"].split(" Boot cost: ")
            assert "≈" not in fill and "estimated" not in fill
            assert boot.startswith("≈ ") and "system prompt" in boot, mid
            assert meta(mid) == {
                "tier": "mid",
                "tierCaps": {"mid": 50, "high": 60, "warning": 70, "danger": 74},
                "bootTokens": prefix,
            }, mid  # the figure at session/new: the prefix alone
            assert "Tiers: mid 50 % · high 60 % · warning 70 % · danger 74 %." in fill

            # A fall to 1,000 measured tokens, with a long prompt that the next model's estimate will count:
            # padded so that the whole context, estimated, is about 55 % of the wide window.
            pad = "word " * ((LARGE * 55 // 100 - prefix) * 4 // 5)
            await conn.prompt(sid, "three " + pad, timeout=15)
            last = usage_updates(conn, sid)[-1]
            assert (last["used"], meta(last)["tier"]) == (1_000, "healthy")
            assert len(conn.updates_for(sid, "notice")) == 1

            # A model switch: the figure is an estimate of the whole context (U9), mid again in the wide window
            # after the fall — told again, and every number of the notice says it is estimated.
            await conn.request(
                "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/wide"}
            )
            await conn.wait_for(lambda: len(conn.updates_for(sid, "notice")) == 2)
            switched = usage_updates(conn, sid)[-1]
            assert switched["size"] == LARGE and meta(switched)["source"] == "estimate"
            assert meta(switched)["tier"] == "mid" and meta(switched)["tierKind"] == "stale", (
                switched
            )  # seed row 002-22
            again = conn.updates_for(sid, "notice")[1]
            assert (again["severity"], again["title"]) == ("info", "Context mid (stale)")
            assert "The tier is stale: estimated since a model switch" in again["description"]
            assert "Boot cost" in again["description"] and meta(again)["bootTokens"] == meta(switched)["bootTokens"]
            assert meta(again)["tierCaps"] == meta(mid)["tierCaps"] == meta(switched)["tierCaps"]
            pct = meta(switched)["percent"]
            assert again["description"].startswith(
                f"≈ {pct:.1f} % (≈ {switched['used']:,} of {LARGE:,} tokens, estimated) used."
            ), again

            # /context says the figure is estimated, and why.
            text = await context_text(conn, sid)
            assert f"**Context:** ≈ {switched['used']:,} of {LARGE:,} tokens (≈ {pct:.1f} %, estimated)" in text
            assert "ama's estimate, not a provider's count" in text and "a model switch" in text
