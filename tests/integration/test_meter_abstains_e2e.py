"""A meter that abstains instead of inventing (issue 10, deliverables 3, 4 and the figures of 6), over real pipes.

Each test drives an ama subprocess against the local HTTP model server with usage omitted, absurd or over the
window, and checks the official figures: `usage_update`, `_ama/session_stats`, `/context` and `ama -p` json.
Every line ama writes is validated against the pinned ACP schema by the harness.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, agent_text, clean_env, kinds, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}
PRICE = "price = { input = 2.0, output = 8.0, cache_read = 0.5, cache_write = 2.5 }"
WINDOW = 100_000
AUTO_COMPACT_AT = WINDOW - 16_384


@pytest.fixture
def llm():
    with LLMServer() as server:
        yield server


def configure(ama: Ama, llm: LLMServer, kind: str = "openai", tail: str = "") -> None:
    url = llm.openai_url if kind == "openai" else llm.anthropic_url
    ama.config.write_text(f"""
model = "local/big"
[providers.local]
kind = "{kind}"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 0

[[models]]
id = "local/big"
context_window = {WINDOW}
{PRICE}

[[models]]
id = "local/small"
context_window = 50000
{PRICE}
{tail}
""")


async def open_session(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


async def stats_of(conn: AgentProcess, sid: str) -> dict[str, Any]:
    return as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))


async def context_text(conn: AgentProcess, sid: str) -> str:
    start = len(conn.updates_for(sid, "agent_message_chunk"))
    await conn.prompt(sid, "/context", timeout=10)
    return "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")[start:])


def est(text: str) -> int:
    """U2 for ASCII text: a quarter token a character, rounded up."""
    return math.ceil(len(text) / 4)


def meta(update: dict[str, Any]) -> dict[str, Any]:
    ama: dict[str, Any] = update["_meta"]["ama"]
    return ama


# --- 1. unknown cost stays unknown ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_response_without_usage_makes_cost_unknown_and_is_counted(tmp_path, llm, kind):
    """U17/U15/U16/S1: a response without usage (OpenAI: no usage chunk; Anthropic: all-zero counts) is billed
    as an unreported request; the cost is omitted everywhere instead of reading $0.00."""
    ama = Ama(tmp_path)
    configure(ama, llm, kind)
    llm.enqueue({"text": "hi", "usage": None})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        assert "cost" in usage_updates(conn, sid)[0]  # nothing billed yet: $0 is measured, not invented
        result = await conn.prompt(sid, "hello", timeout=15)
        assert result["stopReason"] == "end_turn"
        assert "usage" not in result  # S1: the turn's tokens are not known
        last = usage_updates(conn, sid)[-1]
        assert last["cost"] is None  # P1: unknown, said as null (not left out: "unchanged" to an editor)
        stats = await stats_of(conn, sid)
        assert "cost" not in stats
        # what was spent at least, as the usage_update's _meta says it: the one request could not be priced
        assert stats["costLowerBound"] == {"amount": 0, "currency": "USD"}
        assert stats["costLowerBound"]["amount"] == last["_meta"]["ama"]["costLowerBound"]["amount"]
        assert stats["billed"]["requests"] == 1 and stats["billed"]["unreported"] == 1
        assert "input" not in stats["billed"] and "total" not in stats["billed"]  # no sum over nothing
        text = await context_text(conn, sid)
        assert "**Cost so far:** $? (≥ $0.0000), unknown" in text and "reported no usage" in text


# --- 2. untrustworthy and over-window readings ------------------------------------------------------------


async def test_absurd_usage_is_unmeasured_and_keeps_the_anchor_until_a_trustworthy_reading(tmp_path, llm):
    """U11/U8: 500,000 on a 100,000 window is not trusted: the tier is `unmeasured` (not `healthy`) and the
    figure is the last valid usage plus the trailing estimate; a trustworthy reading ends it."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue(
        {"text": "first", "usage": {"input": 2000, "output": 10}},
        {"text": "second", "usage": {"input": 500_000, "output": 5}},
        {"text": "third", "usage": {"input": 2100, "output": 10}},
    )
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=15)
        assert meta(usage_updates(conn, sid)[-1])["tier"] == "healthy"
        await conn.prompt(sid, "two", timeout=15)
        absurd = usage_updates(conn, sid)[-1]
        m = meta(absurd)
        assert m["tier"] == "unmeasured" and m["source"] == "usage"
        assert m["usageTokens"] == 2010 and m["trailingTokens"] == est("two") + est("second")
        assert absurd["used"] == 2010 + est("two") + est("second")
        stats = await stats_of(conn, sid)
        assert stats["context"]["tier"] == "unmeasured"
        assert "not trustworthy" in await context_text(conn, sid)
        await conn.prompt(sid, "three", timeout=15)
        back = usage_updates(conn, sid)[-1]
        assert back["used"] == 2110 and meta(back)["tier"] == "healthy" and meta(back)["source"] == "usage"


async def test_absurd_first_reading_estimates_and_is_unmeasured(tmp_path, llm):
    """U11/U9: with no anchor yet, an absurd reading leaves the whole estimate, tier `unmeasured`."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue({"text": "a", "usage": {"input": 900_000, "output": 5}})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        prefix = usage_updates(conn, sid)[0]["used"]
        await conn.prompt(sid, "one", timeout=15)
        last = usage_updates(conn, sid)[-1]
        assert meta(last)["source"] == "estimate" and meta(last)["tier"] == "unmeasured"
        assert last["used"] == prefix + est("one") + est("a")
        assert meta(last)["usageTokens"] == 0 and meta(last)["trailingTokens"] == last["used"]


@pytest.mark.parametrize("notices", [True, False])
async def test_reading_over_the_window_is_told_once_and_kept_as_a_lower_bound(tmp_path, llm, notices):
    """U11/U12: 250,000 on a 100,000 window is kept (used = the reading, percent capped at 100, overWindow in
    _meta) and the person is told once that the known window is likely wrong — a notice when the client
    advertised session.notices, else an agent message after the reply."""
    ama = Ama(tmp_path)
    configure(ama, llm, tail="[compaction]\nenabled = false\n")  # no compaction request between the two turns
    llm.enqueue(
        {"text": "big", "usage": {"input": 250_000, "output": 0}},
        {"text": "bigger", "usage": {"input": 260_000, "output": 0}},
    )
    async with run_ama(ama, env=ENV, options=ClientOptions(notices=notices)) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=15)
        first = usage_updates(conn, sid)[-1]
        assert first["used"] == 250_000 and first["size"] == WINDOW
        m = meta(first)
        assert m["percent"] == 100.0 and m["overWindow"] is True and m["source"] == "usage"
        await conn.prompt(sid, "two", timeout=15)
        assert usage_updates(conn, sid)[-1]["used"] == 260_000
        said = "more tokens than" in agent_text(conn, sid)
        told = [n for n in conn.updates_for(sid, "notice") if "more tokens than" in (n.get("description") or "")]
        if notices:
            assert len(told) == 1 and not said
            assert "250,000" in told[0]["description"] and "100,000" in told[0]["description"]
        else:
            assert told == [] and agent_text(conn, sid).count("more tokens than") == 1
            assert "context_window" in agent_text(conn, sid)
        stats = await stats_of(conn, sid)
        assert stats["contextTokens"] == 260_000 and stats["contextPercent"] == 100.0
        assert stats["context"]["overWindow"] is True


# --- 3. the U8 anchor -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_response_without_usage_joins_the_trailing_estimate(tmp_path, llm, kind):
    """U8: after a response without usage the figure is the last valid usage + the estimate of everything
    after it (the prompt and the unmeasured reply), not a whole estimate."""
    ama = Ama(tmp_path)
    configure(ama, llm, kind)
    llm.enqueue({"text": "a", "usage": {"input": 3000, "output": 20}}, {"text": "Done!", "usage": None})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=15)
        await conn.prompt(sid, "please fix the bug", timeout=15)
        last = usage_updates(conn, sid)[-1]
        trailing = est("please fix the bug") + est("Done!")
        assert last["used"] == 3020 + trailing
        assert meta(last)["source"] == "usage" and meta(last)["usageTokens"] == 3020
        assert meta(last)["trailingTokens"] == trailing and meta(last)["tier"] == "healthy"


def stored_assistant_texts(ama: Ama) -> list[str]:
    files = list((ama.data / "sessions").rglob("*.jsonl"))
    assert len(files) == 1
    texts = []
    for line in files[0].read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if isinstance(message, dict) and message.get("type") == "assistant":
            texts.append("".join(p["text"] for p in message["content"] if p.get("type") == "text"))
    return texts


async def test_no_jump_after_a_cancel_mid_stream(tmp_path, llm):
    """U8, issue 10 point 6: the partial reply kept after a cancel has no usage; the figure after the cancel
    is the anchor + the trailing estimate (the prompt and the partial reply), never below the figure before."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue(
        {"text": "first", "usage": {"input": 3900, "output": 20}},
        {"text": "x" * 400, "chunk_size": 2, "delay": 0.05, "usage": {"input": 9999, "output": 99}},
    )
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=15)
        before = usage_updates(conn, sid)[-1]["used"]
        assert before == 3920
        chunks = len(conn.updates_for(sid, "agent_message_chunk"))
        pending = await conn.start_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go on"}]}
        )
        await conn.wait_for(lambda: len(conn.updates_for(sid, "agent_message_chunk")) >= chunks + 3)
        await conn.cancel(sid)
        result = as_object(await pending.wait(timeout=10))
        assert result["stopReason"] == "cancelled"
        partial = stored_assistant_texts(ama)[-1]
        assert 0 < len(partial) < 400
        after = usage_updates(conn, sid)[-1]
        assert after["used"] >= before
        assert after["used"] == 3920 + est("go on") + est(partial)
        assert meta(after)["source"] == "usage" and meta(after)["usageTokens"] == 3920


# --- 4. a model switch within one provider ----------------------------------------------------------------


async def test_model_switch_within_a_provider_estimates_until_the_new_model_reports(tmp_path, llm):
    """U9/E3: after a switch to another model of the same provider, the old usage is not carried under the new
    window as if measured: the figure is an estimate until the new model's first response brings usage."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue(
        {"text": "hi", "usage": {"input": 2000, "output": 10}}, {"text": "ok", "usage": {"input": 2100, "output": 10}}
    )
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "hello", timeout=15)
        assert usage_updates(conn, sid)[-1]["used"] == 2010
        await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/small"})
        await conn.wait_for(lambda: usage_updates(conn, sid)[-1]["size"] == 50_000)
        switched = usage_updates(conn, sid)[-1]
        m = meta(switched)
        assert m["source"] == "estimate" and m["usageTokens"] == 0 and m["trailingTokens"] == switched["used"]
        assert switched["used"] != 2010
        stats = await stats_of(conn, sid)
        assert stats["context"]["source"] == "estimate" and stats["contextTokens"] == switched["used"]
        await conn.prompt(sid, "again", timeout=15)
        measured = usage_updates(conn, sid)[-1]
        assert measured["used"] == 2110 and meta(measured)["source"] == "usage" and measured["size"] == 50_000


# --- 5. tier notices --------------------------------------------------------------------------------------

RISES = [61_000, 71_000, 75_000, 40_000, 62_000, 63_000]  # high, warning, danger, healthy, high, high


def replies_at(*inputs: int) -> list[dict[str, Any]]:
    return [{"text": f"reply {i}", "usage": {"input": n, "output": 0}} for i, n in enumerate(inputs)]


async def test_tier_notices_once_per_rise_through_notice(tmp_path, llm):
    """Load tiers: high, warning and danger each notify once per rise, with what to do; a fall and a new rise
    notify again, staying does not."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue(*replies_at(*RISES))
    async with run_ama(ama, env=ENV, options=ClientOptions(notices=True)) as conn:
        sid = await open_session(conn, ama)
        for i in range(len(RISES)):
            await conn.prompt(sid, f"turn {i}", timeout=15)
        notices = conn.updates_for(sid, "notice")
        assert [n["title"] for n in notices] == ["Context high", "Context warning", "Context danger", "Context high"]
        high, warning, danger, again = (n["description"] for n in notices)
        assert "61.0 %" in high and "current thread" in high
        assert "71.0 %" in warning and "fresh session" in warning
        assert "75.0 %" in danger and "hand off" in danger and f"{AUTO_COMPACT_AT:,}" in danger
        assert "62.0 %" in again
        assert [n["severity"] for n in notices] == ["info", "warning", "warning", "info"]
        assert "Context high" not in agent_text(conn, sid)  # the notice form only


async def test_tier_notices_as_agent_messages_after_the_reply(tmp_path, llm):
    """Load tiers without session.notices: the notice is an agent message, sent after the assistant message
    is complete (never inside the streamed reply), once per rise."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue(*replies_at(*RISES))
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        for i in range(len(RISES)):
            await conn.prompt(sid, f"turn {i}", timeout=15)
        assert conn.updates_for(sid, "notice") == []
        chunks = conn.updates_for(sid, "agent_message_chunk")
        told = [c for c in chunks if "Context " in c["content"]["text"]]
        assert [c["content"]["text"].split(":")[0].strip(" \n⚠ℹ") for c in told] == [
            "Context high",
            "Context warning",
            "Context danger",
            "Context high",
        ]
        # Each notice follows the whole reply it is about: the reply's text ended before it.
        texts = [c["content"]["text"] for c in chunks]
        for c in told:
            at = texts.index(c["content"]["text"])
            assert at > 0 and "reply" in "".join(texts[:at])
            replies = {r.get("messageId") for r in chunks if "reply" in r["content"]["text"]}
            assert c["messageId"] not in replies  # a message of its own, not part of the model's
        assert "".join(texts).count("reply 2") == 1  # the reply is whole, not split by the notice


async def test_context_shows_the_tier_caps(tmp_path, llm):
    """Load tiers: /context names the caps in force (the configured ones)."""
    ama = Ama(tmp_path)
    configure(ama, llm, tail="[tiers]\ncaps = [40, 55, 65, 72]\n")
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        text = await context_text(conn, sid)
        assert "mid 40 %" in text and "high 55 %" in text and "warning 65 %" in text and "danger 72 %" in text


# --- 6. stats and payload figures -------------------------------------------------------------------------


async def test_usage_and_trailing_tokens_for_every_source_and_the_cache_share(tmp_path, llm):
    """S2/P2: usageTokens 0 and trailingTokens = the whole estimate for prefix; the cache-read share of the
    billed input in stats (`billed.cacheReadShare`) and in /context."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue({"text": "a", "usage": {"input": 1000, "output": 10, "cache_read": 3000}})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        opened = usage_updates(conn, sid)[0]
        assert meta(opened)["source"] == "prefix"
        assert meta(opened)["usageTokens"] == 0 and meta(opened)["trailingTokens"] == opened["used"]
        stats = await stats_of(conn, sid)
        assert stats["context"]["usageTokens"] == 0 and stats["context"]["trailingTokens"] == stats["contextTokens"]
        assert "cacheReadShare" not in stats["billed"]  # nothing billed yet: unknown, not 0
        await conn.prompt(sid, "one", timeout=15)
        stats = await stats_of(conn, sid)
        assert stats["billed"]["cacheRead"] == 3000 and stats["billed"]["cacheReadShare"] == 0.75
        assert stats["context"]["usageTokens"] == 4010 and stats["context"]["trailingTokens"] == 0
        assert "75.0 % of the billed input" in await context_text(conn, sid)


def test_print_mode_json_context_is_tokens_window_percent(tmp_path):
    """`ama -p --output-format json`: `context` is {tokens, window, percent}, with unknowns omitted, and no
    invented cost for a response without usage."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        configure(ama, llm)
        llm.enqueue({"text": "the answer", "usage": {"input": 5000, "output": 10}}, {"text": "again", "usage": None})

        def run(*extra: str) -> dict[str, Any]:
            out = subprocess.run(
                [sys.executable, "-m", "ama_acp", "-p", "q", "--output-format", "json", *extra]
                + ["--data-dir", str(ama.data), "--config", str(ama.config)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=ama.workspace,
                env=clean_env(ama.tmp, ENV),
            )
            assert out.returncode == 0, out.stderr
            result: dict[str, Any] = json.loads(out.stdout)
            return result

        measured = run()
        assert measured["context"] == {"tokens": 5010, "window": WINDOW, "percent": 5.0}
        assert measured["answer"] == "the answer" and "cost" in measured
        unmeasured = run()
        assert "cost" not in unmeasured and unmeasured["usage"] is None
        ctx = unmeasured["context"]
        assert set(ctx) == {"tokens", "window", "percent"} and ctx["window"] == WINDOW
        assert llm.pending == 0


async def test_model_switch_then_load_is_still_an_estimate(tmp_path, llm):
    """U9 on load: the stored figures name the model they were measured with; a session switched to another
    model after its last response loads as an estimate, not with the old usage under the new window."""
    ama = Ama(tmp_path)
    configure(ama, llm)
    llm.enqueue({"text": "hi", "usage": {"input": 2000, "output": 10}})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "hello", timeout=15)
        await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/small"})
        await conn.wait_for(lambda: usage_updates(conn, sid)[-1]["size"] == 50_000)
        live = usage_updates(conn, sid)[-1]
    async with run_ama(ama, env=ENV) as conn:
        await conn.initialize()
        await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
        await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
        loaded = usage_updates(conn, sid)[-1]
        assert loaded["size"] == 50_000 and meta(loaded)["source"] == "estimate"
        assert loaded == live
