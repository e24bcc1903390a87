"""The context meter through the real subprocess against the local HTTP providers (docs/context.md).

Every test cites the rules it checks; every line ama writes is validated against the pinned schema.
"""

from __future__ import annotations

import json
import math

import pytest

from ama_acp.client.connection import AgentProcess, ClientOptions
from tests.support.harness import Ama, kinds, run_ama, usage_updates
from tests.support.json_values import as_object, session_id
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.anyio

PRICE = {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.5}  # USD per million


@pytest.fixture
def llm():
    with LLMServer() as server:
        yield server


def configure(ama: Ama, kind: str, llm: LLMServer) -> None:
    url = llm.openai_url if kind == "openai" else llm.anthropic_url
    price = ", ".join(f"{k} = {v}" for k, v in PRICE.items())
    ama.config.write_text(f"""
model = "local/big"
[providers.local]
kind = "{kind}"
base_url = "{url}"
api_key_env = "LOCAL_TEST_KEY"

[[models]]
id = "local/big"
context_window = 100000
max_output = 4096
price = {{ {price} }}

[[models]]
id = "local/small"
context_window = 50000
price = {{ {price} }}

[[models]]
id = "local/nowin"
""")


ENV = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def no_consecutive_duplicates(conn: AgentProcess, sid: str) -> None:
    """D1: no two consecutive identical usage_updates, except around an open (D2)."""
    prev = None
    for u in conn.updates_for(sid):
        if u["sessionUpdate"] != "usage_update":
            continue
        assert u != prev, f"duplicate usage_update {u}"
        prev = u


async def open_session(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


def cost_of(*usages: dict[str, int]) -> float:
    return sum(
        (
            u.get("input", 0) * PRICE["input"]
            + u.get("output", 0) * PRICE["output"]
            + u.get("cache_read", 0) * PRICE["cache_read"]
            + u.get("cache_write", 0) * PRICE["cache_write"]
        )
        / 1e6
        for u in usages
    )


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_exact_used_sequence_over_a_turn_with_tool_calls(tmp_path, llm, kind):
    """U7/U8/E1/E2/D1/U17/P1/P2: the exact `used` after each of three requests, and the cost with cache rates."""
    ama = Ama(tmp_path)
    configure(ama, kind, llm)
    (ama.workspace / "notes.txt").write_text("hello\n" * 100)
    u1 = {"input": 1000, "output": 40, "cache_read": 200}
    u2 = {"input": 1300, "output": 30, "cache_read": 1000, **({"cache_write": 100} if kind == "anthropic" else {})}
    u3 = {"input": 1500, "output": 60}
    llm.enqueue(
        {
            "thinking": "look first",
            "text": "Reading.",
            "usage": u1,
            "tool_calls": [{"id": "t1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
        },
        {"text": "Listing.", "usage": u2, "tool_calls": [{"id": "t2", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "Done.", "usage": u3},
    )
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        opened = usage_updates(conn, sid)[0]
        assert opened["_meta"]["ama"]["source"] == "prefix" and opened["size"] == 100_000  # E4, U10
        result = await conn.prompt(sid, "please look at notes.txt", timeout=30)
        assert result["stopReason"] == "end_turn"
        ups = usage_updates(conn, sid)[1:]
        expected = [sum(u.values()) for u in (u1, u2, u3)]
        assert [u["used"] for u in ups] == expected  # E2 at the turn end is identical to the last: D1
        for u, tokens in zip(ups, expected, strict=True):
            meta = u["_meta"]["ama"]
            assert meta["source"] == "usage" and meta["usageTokens"] == tokens and meta["trailingTokens"] == 0
            assert meta["percent"] == round(tokens / 100_000 * 100, 1)  # U12
            assert meta["autoCompactAt"] == 100_000 - 16_384  # U13
            assert meta["pruneAt"] == math.floor(0.7 * (100_000 - 16_384))  # U14
            assert meta["tier"] == "healthy"
        assert ups[-1]["cost"] == {"amount": round(cost_of(u1, u2, u3), 6), "currency": "USD"}
        # S1: the turn's billed usage in the prompt response.
        usage = as_object(result["usage"])
        assert usage["totalTokens"] == sum(expected)
        assert usage["outputTokens"] == 130
        assert usage["cachedReadTokens"] == 1200
        # S2: the same figures from the stats extension.
        stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
        assert stats["contextTokens"] == expected[-1] and stats["contextWindow"] == 100_000
        assert stats["cost"]["amount"] == round(cost_of(u1, u2, u3), 6)
        assert stats["context"]["source"] == "usage"
        no_consecutive_duplicates(conn, sid)
    # The second request carried the first tool result, paired with its call.
    body = json.dumps(llm.requests[1].body)
    assert "hello" in body and "t1" in body


@pytest.mark.parametrize(
    ("prompt", "extra"),
    [
        ([{"type": "text", "text": "重构这个函数 please"}], 6 + math.ceil(7 / 4)),  # U1/U2 (docs/context.md)
        ([{"type": "text", "text": "please fix the bug"}], math.ceil(18 / 4)),  # U2
        ([{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}], 1600),  # U3
        ([{"type": "text", "text": "こんにちは 안녕하세요"}], 5 + 5 + 1),  # U1: kana and hangul, one space
    ],
)
async def test_prompt_estimates_after_cancel_before_any_reply(tmp_path, llm, prompt, extra):
    """U1–U3, U10, E2 on cancel: cancelled before the first reply, `used` is the prefix plus the prompt's estimate."""
    ama = Ama(tmp_path)
    configure(ama, "openai", llm)
    llm.enqueue({"hang": 5})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        prefix = usage_updates(conn, sid)[0]["used"]
        pending = await conn.start_request("session/prompt", {"sessionId": sid, "prompt": prompt})
        await conn.wait_for(lambda: len(llm.requests) == 1)
        await conn.cancel(sid)
        result = as_object(await pending.wait(timeout=3))
        assert result["stopReason"] == "cancelled"
        assert len(llm.requests) == 1, "cancelled while the request hung, not in a retry after it"
        last = usage_updates(conn, sid)[-1]
        assert last["used"] == prefix + extra
        assert last["_meta"]["ama"]["source"] == "prefix"


async def test_model_switch_smaller_window_unknown_window_and_back(tmp_path, llm):
    """E3 (options first, then the meter), size follows the model, U9 the old usage is not carried under the new
    window, D3 no update without a window."""
    ama = Ama(tmp_path)
    configure(ama, "openai", llm)
    llm.enqueue({"text": "hi", "usage": {"input": 2000, "output": 10}})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "hello", timeout=10)
        before = len(conn.updates_for(sid))

        async def switch(model: str) -> list[str]:
            start = len(conn.updates_for(sid))
            r = as_object(
                await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": model})
            )
            assert next(o for o in r["configOptions"] if o["id"] == "model")["currentValue"] == model
            await conn.wait_for(lambda: "config_option_update" in kinds(conn, sid)[start:])
            return kinds(conn, sid)[start:]

        assert await switch("local/small") == ["config_option_update", "usage_update"]
        small = usage_updates(conn, sid)[-1]
        assert small["size"] == 50_000 and small["_meta"]["ama"]["source"] == "estimate"  # U9: not measured here
        assert small["_meta"]["ama"]["percent"] == round(small["used"] / 50_000 * 100, 1)
        assert await switch("local/nowin") == ["config_option_update"]  # D3
        stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
        assert "contextWindow" not in stats and "contextPercent" not in stats  # U15: absent, not 0
        assert await switch("local/big") == ["config_option_update", "usage_update"]
        assert usage_updates(conn, sid)[-1]["size"] == 100_000
        assert len(conn.updates_for(sid)) > before
        no_consecutive_duplicates(conn, sid)


async def test_unpriced_request_makes_cost_unknown(tmp_path, llm):
    """U17: once any billed request has no price, the session cost is omitted, not a partial sum."""
    ama = Ama(tmp_path)
    configure(ama, "openai", llm)
    ama.config.write_text(ama.config.read_text() + '\n[[models]]\nid = "local/free"\ncontext_window = 100000\n')
    llm.enqueue(
        {"text": "a", "usage": {"input": 100, "output": 5}}, {"text": "b", "usage": {"input": 200, "output": 5}}
    )
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=10)
        assert "cost" in usage_updates(conn, sid)[-1]
        await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "local/free"})
        await conn.prompt(sid, "two", timeout=10)
        assert usage_updates(conn, sid)[-1]["cost"] is None
        stats = as_object(await conn.request("_ama/session_stats", {"sessionId": sid}))
        assert "cost" not in stats and stats["billed"]["requests"] == 2


async def test_untrustworthy_usage_falls_back_to_estimate(tmp_path, llm):
    """U11: usage above 4x the window is not trusted: the figure is an estimate, never over 100 %, and the tier
    is `unmeasured`, not the `healthy` of the estimate."""
    ama = Ama(tmp_path)
    configure(ama, "openai", llm)
    llm.enqueue({"text": "a", "usage": {"input": 900_000, "output": 5}})
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=10)
        last = usage_updates(conn, sid)[-1]
        assert last["_meta"]["ama"]["source"] == "estimate"
        assert last["used"] < 10_000 and last["_meta"]["ama"]["percent"] < 100
        assert last["_meta"]["ama"]["tier"] == "unmeasured"


async def test_context_command_breakdown(tmp_path, llm):
    """S3: /context answers in the conversation with the figures and a breakdown by kind, without a model call."""
    ama = Ama(tmp_path)
    configure(ama, "openai", llm)
    async with run_ama(ama, env=ENV) as conn:
        sid = await open_session(conn, ama)
        result = await conn.prompt(sid, "/context", timeout=10)
        assert result["stopReason"] == "end_turn"
        text = "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk"))
        for label in (
            "system prompt",
            "tool declarations",
            "user messages",
            "assistant messages",
            "tool results",
            "images",
        ):
            assert label in text
        assert "of 100,000 tokens" in text
        assert llm.requests == []


async def test_tier_notice_once_when_crossing_into_warning(tmp_path, llm):
    """docs/context.md "Load tiers": crossing up into warning sends one notice (client advertised session.notices)."""
    ama = Ama(tmp_path)
    configure(ama, "openai", llm)
    llm.enqueue(
        {"text": "a", "usage": {"input": 71_000, "output": 5}}, {"text": "b", "usage": {"input": 71_500, "output": 5}}
    )
    async with run_ama(ama, env=ENV, options=ClientOptions(notices=True)) as conn:
        sid = await open_session(conn, ama)
        await conn.prompt(sid, "one", timeout=10)
        await conn.prompt(sid, "two", timeout=10)
        notices = conn.updates_for(sid, "notice")
        assert len(notices) == 1 and notices[0]["severity"] == "warning"
        assert "71.0 %" in notices[0]["description"] and "100,000" in notices[0]["description"]
        assert usage_updates(conn, sid)[-1]["_meta"]["ama"]["tier"] == "warning"
