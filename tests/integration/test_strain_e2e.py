"""Seed 002's strain readouts over real pipes (issue 29 point 4; docs/context.md "Load tiers", "Notices"): the
tier caps in every `usage_update._meta.ama` (and in the notices and the stats), without an update of their own
(D1 still holds), and the boot cost — the prefix every request carries, as ama's estimator counts it — in every
readout too (issue 42: `usage_update._meta.ama.bootTokens`, every tier notice, `/context`'s headline, the stats);
after a compaction every readout names it ("compaction #N", seed row 002-41) and its tier is `stale` until a response
measures the context again (seed row 002-22). Every line ama writes is validated against the pinned schema by the
harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ama_acp.client.connection import ClientOptions
from tests.support.harness import Ama, agent_text, kinds, local_config, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
WINDOW = 10_000
CAPS = {"mid": 40, "high": 55.5, "warning": 70, "danger": 80}  # a cap with decimals stays one


def configure(ama: Ama, url: str) -> None:
    # Automatic compaction off: the scripted usage would reach its threshold and a compaction end the script.
    tail = "[tiers]\ncaps = [40, 55.5, 70, 80]\n[compaction]\nenabled = false\n"
    ama.config.write_text(local_config(url, window=WINDOW, tail=tail))


def meta(update: dict[str, Any]) -> dict[str, Any]:
    ama: dict[str, Any] = update["_meta"]["ama"]
    return ama


async def test_caps_and_the_boot_cost_ride_in_every_readout_without_an_update_of_their_own(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue(*({"text": f"reply {n}", "usage": {"input": n, "output": 0}} for n in (1_000, 1_000, 4_000, 5_600)))
        async with run_ama(ama, env=ENV, options=ClientOptions(notices=True)) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            boot = usage_updates(conn, sid)[0]["used"]  # the figure at session/new: the prefix alone

            # 1,000 measured, then 1,000 again: the second figure is the first one, caps and all, so D1 holds.
            await conn.prompt(sid, "one", timeout=15)
            await conn.prompt(sid, "two", timeout=15)
            updates = usage_updates(conn, sid)
            assert [u["used"] for u in updates] == [boot, 1_000], updates
            assert all(meta(u)["tierCaps"] == CAPS and meta(u)["bootTokens"] == boot for u in updates), updates

            # 4,000 of 10,000 reaches the 40 % cap: mid, told with the caps and the boot cost.
            await conn.prompt(sid, "three", timeout=15)
            assert meta(usage_updates(conn, sid)[-1])["tier"] == "mid"
            (mid,) = conn.updates_for(sid, "notice")
            assert mid["description"].startswith("40.0 % (4,000 of 10,000 tokens) used.")
            assert "Tiers: mid 40 % · high 55.5 % · warning 70 % · danger 80 %." in mid["description"]
            assert f"Boot cost: ≈ {boot:,} tokens (system prompt " in mid["description"], mid
            assert meta(mid) == {"tier": "mid", "tierCaps": CAPS, "bootTokens": boot}

            # 5,600 reaches high: the caps and the boot cost again (seed 002: in every readout, issue 42).
            await conn.prompt(sid, "four", timeout=15)
            high = conn.updates_for(sid, "notice")[1]
            assert high["title"] == "Context high" and "Tiers: mid 40 %" in high["description"]
            assert f"Boot cost: ≈ {boot:,} tokens (system prompt " in high["description"], high
            assert meta(high) == {"tier": "high", "tierCaps": CAPS, "bootTokens": boot}
            assert all(meta(u)["tierCaps"] == CAPS and meta(u)["bootTokens"] == boot for u in usage_updates(conn, sid))
            assert [u["used"] for u in usage_updates(conn, sid)] == [boot, 1_000, 4_000, 5_600]  # none of their own

            # /context's headline quotes the boot cost; the stats carry the caps.
            start = len(agent_text(conn, sid))
            await conn.prompt(sid, "/context", timeout=10)
            headline = agent_text(conn, sid)[start:].strip().splitlines()[0]
            assert headline.startswith("**Context:** 5,600 of 10,000 tokens (56.0 %) · tier high · source usage")
            assert f" · boot cost ≈ {boot:,} tokens (system prompt " in headline, headline
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert stats["context"]["tierCaps"] == CAPS and stats["context"]["bootTokens"] == boot


async def test_without_the_notices_capability_the_first_tier_message_carries_the_boot_cost(tmp_path: Path) -> None:
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm.openai_url)
        llm.enqueue({"text": "reply", "usage": {"input": 4_000, "output": 0}})
        async with run_ama(ama, env=ENV) as conn:  # no session.notices: an agent message instead
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            boot = usage_updates(conn, sid)[0]["used"]
            await conn.prompt(sid, "one", timeout=15)
            text = agent_text(conn, sid)
            assert "ℹ Context mid: 40.0 % (4,000 of 10,000 tokens) used." in text, text
            assert f"Boot cost: ≈ {boot:,} tokens (system prompt " in text
            assert conn.updates_for(sid, "notice") == []


async def test_after_a_compaction_every_readout_names_it_and_the_tier_is_stale_until_measured(tmp_path: Path) -> None:
    """Seed rows 002-41 and 002-22 (issue 42), over real pipes and a load: `_meta.ama.compaction`, `/context`'s
    headline and the stats name compaction #1; `tierKind: "stale"` (and "tier … (stale)") until a response
    measures, across a load too."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        tail = "[tiers]\ncaps = [40, 55.5, 70, 80]\n[compaction]\nkeep_tokens = 0\n"
        # 20,000: automatic compaction at 10,000 (the reserve is at most half the window), above the figures here.
        ama.config.write_text(local_config(llm.openai_url, window=20_000, tail=tail))
        llm.enqueue(
            {"text": "one", "usage": {"input": 6_000, "output": 5}},  # the prefix and the padding, measured
            {"text": "## Goal\nhandoff text"},  # the /compact handoff
            {"text": "two", "usage": {"input": 2_500, "output": 5}},
        )
        async with run_ama(ama, env=ENV, options=ClientOptions(notices=True)) as conn:
            await conn.initialize()
            sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            assert "compaction" not in meta(usage_updates(conn, sid)[-1])  # none yet
            await conn.prompt(sid, "first " + "padding " * 1_500, timeout=15)
            await conn.prompt(sid, "/compact", timeout=15)
            compacted = usage_updates(conn, sid)[-1]
            after = meta(compacted)
            assert (after["source"], after["compaction"], after["tierKind"]) == ("estimate", 1, "stale")
            start = len(agent_text(conn, sid))
            await conn.prompt(sid, "/context", timeout=10)
            headline = agent_text(conn, sid)[start:].strip().splitlines()[0]
            assert f"· tier {after['tier']} (stale) · source estimate" in headline and "· compaction #1" in headline
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert (stats["context"]["compaction"], stats["context"]["tierKind"]) == (1, "stale")
        async with run_ama(ama, env=ENV) as conn:  # a load before any response measured: stale, and the file's count
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
            reopened = usage_updates(conn, sid)[-1]
            assert reopened["used"] == compacted["used"]
            assert (meta(reopened)["compaction"], meta(reopened)["tierKind"]) == (1, "stale")
            await conn.prompt(sid, "second", timeout=15)
            measured = meta(usage_updates(conn, sid)[-1])
            assert (measured["source"], measured["compaction"]) == ("usage", 1) and "tierKind" not in measured
