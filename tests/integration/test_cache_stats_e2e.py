"""The prompt cache seen from the editor, over real pipes against the local model server billing with prefix
caching (tests/support/prompt_cache.py): the `cache` section of `_ama/session_stats`, `/context`'s cache lines,
and cache-aware pruning (docs/context.md "The prompt cache"; C1–C4), with a model switch, a reload and a
cancel."""

from __future__ import annotations

import json

import pytest

from ama_acp.agent.pruning import PLACEHOLDER
from ama_acp.client.connection import AgentProcess
from ama_acp.client.demo import cache_line
from ama_acp.context import cache_ledger
from tests.support.harness import Ama, agent_text, local_config, run_ama
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer
from tests.support.prompt_cache import PromptCache

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "k" * 12}
PRICE = "price = { input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }\n"


class Clock:
    """Wall-clock time for the session's cache ledger, moved by the test instead of waited for."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(cache_ledger, "wall_clock", c)
    return c


def config(url: str, kind: str = "anthropic", window: int = 100_000, extra: str = "") -> str:
    return local_config(
        url,
        kind,
        window=window,
        tail=PRICE + "cache = { ttl_seconds = 300, min_tokens = 256 }\n" + extra,
    )


async def start(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    return session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))


async def context_text(conn: AgentProcess, sid: str) -> str:
    before = len(agent_text(conn, sid))
    await conn.prompt(sid, "/context", timeout=10)
    return agent_text(conn, sid)[before:]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_stats_and_context_report_what_the_cache_read_wrote_and_saved(tmp_path, clock, kind):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        llm.prompt_cache = PromptCache(ttl=300.0, min_tokens=256, clock=clock)
        ama.config.write_text(config(llm.openai_url if kind == "openai" else llm.anthropic_url, kind))
        llm.enqueue({"text": "one", "usage": "cache"}, {"text": "two", "usage": "cache"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            opened = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            fresh = opened["cache"]
            # Before any request: the facts, and cold (nothing was sent); no figure is invented.
            assert fresh == {"state": "cold", "lifetimeSeconds": 300, "minTokens": 256}
            assert "cacheHitRate" not in opened
            await conn.prompt(sid, "hello", timeout=10)
            clock.now += 42
            await conn.prompt(sid, "again", timeout=10)
            clock.now += 7
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            log = llm.prompt_cache.log
            read = sum(u["cache_read"] for u in log)
            written = sum(u["cache_write"] for u in log)
            cache = stats["cache"]
            assert read > 0 and cache["readTokens"] == read
            if kind == "anthropic":
                assert written > 0 and cache["writeTokens"] == written
            else:
                assert "writeTokens" not in cache  # OpenAI reports (and bills) no writes: not an invented 0
            assert cache["cacheHitRate"] == stats["billed"]["cacheReadShare"]  # the seed's name, the same figure
            assert stats["cacheHitRate"] == cache["cacheHitRate"]  # seed 001_: at the top level too
            saved = (read * (3.0 - 0.3) + written * (3.0 - 3.75)) / 1e6
            assert cache["saved"] == {"amount": round(saved, 6), "currency": "USD"}
            assert cache["secondsSinceLastWrite"] == 7
            assert cache["state"] == "warm"
            # `ama demo` prints this line under the stats it got from the agent.
            line = cache_line(stats)
            assert line.startswith(f"prompt cache: {read:,} tokens read, ") and line.endswith("; state warm")
            assert f"hit rate {cache['cacheHitRate'] * 100:.1f} %, saved ${round(saved, 6):.4f}" in line
            text = await context_text(conn, sid)
            wrote = f", {written:,} written" if kind == "anthropic" else ""
            assert f"**Cache:** {read:,} tokens read{wrote}; saved ${saved:.4f}" in text
            assert "Cache of local/m (lifetime 5 min, minimum 256 tokens): warm: last written 7 s ago." in text
            clock.now += 301
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            assert stats["cache"]["state"] == "cold"
            assert "cold: idle 5 min, past its lifetime" in await context_text(conn, sid)


async def test_a_model_switch_is_cold_and_a_reload_keeps_the_last_write(tmp_path, clock):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        llm.prompt_cache = PromptCache(ttl=300.0, min_tokens=256, clock=clock)
        other = '[[models]]\nid = "local/n"\ncontext_window = 100000\n' + PRICE
        ama.config.write_text(config(llm.anthropic_url, extra=other))
        llm.enqueue({"text": "one", "usage": "cache"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "hello", timeout=10)
            clock.now += 30
            before = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            assert before["state"] == "warm" and before["secondsSinceLastWrite"] == 30
            await conn.prompt(sid, "/model local/n", timeout=10)
            switched = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            # Nothing of this conversation is cached by local/n; it has no cache facts of its own.
            assert switched["state"] == "cold" and "secondsSinceLastWrite" not in switched
            assert "lifetimeSeconds" not in switched
            await conn.prompt(sid, "/model local/m", timeout=10)
            back = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            assert back["state"] == "warm" and back["secondsSinceLastWrite"] == 30
        clock.now += 100
        async with run_ama(ama, env=KEY) as conn:
            await conn.initialize()
            await conn.request("session/load", {"sessionId": sid, "cwd": str(ama.workspace), "mcpServers": []})
            loaded = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            # The last write is stored as wall-clock time: a load knows how long ago it was.
            assert loaded["secondsSinceLastWrite"] == 130 and loaded["state"] == "warm"
            assert loaded["saved"] == before["saved"]


async def test_a_cancelled_request_leaves_saved_and_the_last_write_unknown(tmp_path, clock):
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        llm.prompt_cache = PromptCache(ttl=300.0, min_tokens=256, clock=clock)
        ama.config.write_text(config(llm.anthropic_url))
        llm.enqueue({"text": "one", "usage": "cache"}, {"text": "x" * 400, "chunk_size": 1, "delay": 0.05})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "hello", timeout=10)
            turn = await conn.start_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "a long one"}]}
            )
            await conn.wait_for(lambda: len(agent_text(conn, sid)) > len("one") + 3, timeout=10)
            await conn.cancel(sid)
            assert as_object(await turn.wait(timeout=10))["stopReason"] == "cancelled"
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            cache = stats["cache"]
            assert stats["billed"]["interrupted"] == 1
            assert "saved" not in cache and "secondsSinceLastWrite" not in cache
            assert cache["state"] == "unknown"
            assert "warm or cold unknown: the last write is unknown" in await context_text(conn, sid)


def _tool_turn(files: list[str]) -> list[dict[str, object]]:
    calls: list[dict[str, object]] = [
        {"tool_calls": [{"id": f"c{i}", "name": "read_file", "arguments": {"path": name}}], "usage": "cache"}
        for i, name in enumerate(files)
    ]
    return [*calls, {"text": "read them", "usage": "cache"}]


@pytest.mark.parametrize("idle", [10, 400])
async def test_pruning_runs_early_only_when_the_cache_is_cold(tmp_path, clock, idle):
    """Window 20,000: autoCompactAt 10,000, pruneAt 7,000, early 5,000. Three reads fill the context to between
    5,000 and 7,000; the next request prunes the oldest read only if the cache went cold (idle past 300 s)."""
    ama = Ama(tmp_path)
    files = ["a.txt", "b.txt", "c.txt"]
    for n, name in enumerate(files):
        lines = [f"{name} line {i:04d}: value {(i * 7919 + n) % 10007:05d} of the sample data\n" for i in range(95)]
        (ama.workspace / name).write_text("".join(lines))
    with LLMServer() as llm:
        llm.prompt_cache = PromptCache(ttl=300.0, min_tokens=256, clock=clock)
        ama.config.write_text(config(llm.anthropic_url, window=20_000, extra="[compaction]\nkeep_tokens = 500\n"))
        llm.enqueue(*_tool_turn(files), {"text": "next done", "usage": "cache"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "read the three files", timeout=20)
            stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
            used = stats["contextTokens"]
            assert 5_000 <= used < 7_000, used  # between the early threshold and pruneAt
            clock.now += idle
            await conn.prompt(sid, "next", timeout=20)
            last_body = json.dumps(llm.requests[-1].body)
            cache = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            text = await context_text(conn, sid)
            if idle > 300:  # cold: the cached prefix is lost anyway, so pruning ran early
                assert PLACEHOLDER in last_body
                decided = cache["lastPruning"]
                assert (decided["decision"], decided["cache"]) == ("early", "cold")
                assert (
                    f"Last pruning decision: pruned early at {decided['tokens']:,} tokens — the cache was cold." in text
                )
            else:  # warm: pruning would throw the cached prefix away, so it waits for pruneAt
                assert PLACEHOLDER not in last_body
                decided = cache["lastPruning"]
                assert (decided["decision"], decided["cache"]) == ("kept", "warm")
                assert f"kept the context at {decided['tokens']:,} tokens, under pruneAt — the cache was warm." in text
            assert used <= decided["tokens"] < 7_000  # the fill with the person's new message


async def test_a_compaction_handoff_request_counts_as_a_write(tmp_path, clock):
    """The handoff is a request of the current model: it writes (or refreshes) the cached prefix, so the last write
    is its moment; the compacted context is a new prefix, which the next request writes."""
    ama = Ama(tmp_path)
    with LLMServer() as llm:
        llm.prompt_cache = PromptCache(ttl=300.0, min_tokens=256, clock=clock)
        ama.config.write_text(config(llm.anthropic_url, extra="[compaction]\nkeep_tokens = 100\n"))
        llm.enqueue(
            {"text": "First answer " + "x" * 40_000, "usage": "cache"},
            {"text": "## Goal\nthe handoff", "usage": "cache"},
        )
        async with run_ama(ama, env=KEY) as conn:
            sid = await start(conn, ama)
            await conn.prompt(sid, "hello", timeout=10)
            clock.now += 200
            before = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            assert before["secondsSinceLastWrite"] == 200
            await conn.prompt(sid, "/compact", timeout=20)
            assert len(llm.requests) == 2, agent_text(conn, sid)[-600:]  # the handoff was asked for
            after = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))["cache"]
            assert after["secondsSinceLastWrite"] == 0 and after["state"] == "warm"
            assert after["writeTokens"] > before["writeTokens"]  # the handoff request wrote its prefix
