"""The usage reporter: docs/rules.md P1–P3, D1–D3, U15, and the worked example of docs/context.md end to end."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ama_acp.context.billing import Billing
from ama_acp.context.meter import ContextFigures, ContextMeter
from ama_acp.context.reporter import UsageReporter, usage_payload
from ama_acp.conversation.messages import (
    AssistantMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ama_acp.providers.catalog import Catalog, price_for
from ama_conformance.schema.validate import WireValidator

BASE = ContextFigures(
    used=53_120,
    source="usage",
    tier="healthy",
    usage_tokens=52_800,
    trailing_tokens=320,
    window=200_000,
    percent=26.6,
    auto_compact_at=183_616,
    prune_at=128_531,
)


def figures(**changes: Any) -> ContextFigures:
    return msgspec.structs.replace(BASE, **changes)


def sent(payload: dict[str, Any] | None) -> dict[str, Any]:
    """A payload the test expects to go out (None: nothing would be sent)."""
    assert payload is not None, "no usage_update"
    return payload


def notification(payload: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess_1", "update": payload}}


def test_p1_p2_payload_is_the_spec_example() -> None:
    assert usage_payload(figures(), 0.0451) == {
        "sessionUpdate": "usage_update",
        "used": 53_120,
        "size": 200_000,
        "cost": {"amount": 0.0451, "currency": "USD"},
        "_meta": {
            "ama": {
                "source": "usage",
                "usageTokens": 52_800,
                "trailingTokens": 320,
                "percent": 26.6,
                "autoCompactAt": 183_616,
                "pruneAt": 128_531,
                "tier": "healthy",
            }
        },
    }


def test_p3_payload_validates_against_acp_schema(acp_validator: WireValidator) -> None:
    for payload in (
        usage_payload(figures(), 0.0451),
        usage_payload(figures(source="estimate", usage_tokens=0, trailing_tokens=53_120), None),
        usage_payload(figures(auto_compact_at=None, prune_at=None), 0.0),
        usage_payload(figures(used=250_000, window=100_000, percent=100.0, over_window=True), None),
    ):
        acp_validator.validate_outgoing(notification(sent(payload)), {})


def test_u15_p1_unknown_figures_are_left_out_and_an_unknown_cost_is_null() -> None:
    p = sent(
        usage_payload(
            figures(source="estimate", usage_tokens=0, trailing_tokens=53_120, auto_compact_at=None, prune_at=None),
            None,
        )
    )
    assert "cost" in p and p["cost"] is None  # P1: said, not left out (an absent field reads as "unchanged")
    assert p["_meta"]["ama"] == {
        "source": "estimate",
        "usageTokens": 0,  # S2/P2: for every source; the estimate is all trailing
        "trailingTokens": 53_120,
        "percent": 26.6,
        "tier": "healthy",
    }
    assert None not in p["_meta"]["ama"].values()


def test_u11_u12_over_window_is_said_in_meta() -> None:
    p = sent(
        usage_payload(
            figures(
                used=250_000, usage_tokens=250_000, trailing_tokens=0, percent=100.0, window=100_000, over_window=True
            ),
            None,
        )
    )
    assert p["used"] == 250_000 and p["size"] == 100_000
    assert p["_meta"]["ama"]["overWindow"] is True and p["_meta"]["ama"]["percent"] == 100.0
    assert "overWindow" not in sent(usage_payload(figures(), None))["_meta"]["ama"]  # only when it is so


def test_d3_unknown_window_sends_nothing() -> None:
    r = UsageReporter()
    f = figures(window=None, percent=None, auto_compact_at=None, prune_at=None, tier="unmeasured")
    assert r.payload(f, 1.0) is None
    assert r.update(f, 1.0, force=True) is None  # not even on a session open


def test_d3_a_spell_without_a_window_makes_the_next_figure_news() -> None:
    # A switch to a model without a window and back: the client's meter was void in between (ama acp-client
    # reads `ctx ?`), so the figure of the model switched back to goes out even if it reads as the last one sent.
    r = UsageReporter()
    assert r.update(figures(), 0.01) is not None
    assert r.update(figures(window=None, percent=None, auto_compact_at=None, prune_at=None), 0.01) is None
    assert r.update(figures(), 0.01) is not None
    assert r.update(figures(), 0.01) is None


def test_d1_identical_payload_is_not_sent_again() -> None:
    r = UsageReporter()
    assert r.update(figures(), 0.01) is not None
    assert r.update(figures(), 0.01) is None
    assert r.update(figures(used=53_121, trailing_tokens=321), 0.01) is not None  # a change goes out
    assert r.update(figures(used=53_121, trailing_tokens=321), 0.02) is not None  # cost alone is a change
    assert r.update(figures(used=53_121, trailing_tokens=321, tier="mid"), 0.02) is not None  # _meta alone too


def test_u17_p1_p2_unknown_cost_is_null_with_its_lower_bound_in_meta(acp_validator: WireValidator) -> None:
    p = sent(usage_payload(figures(), None, bound=0.01234567))
    assert p["cost"] is None
    assert p["_meta"]["ama"]["costLowerBound"] == {"amount": 0.012346, "currency": "USD"}
    acp_validator.validate_outgoing(notification(p), {})  # null is the schema's own "unknown"
    known = sent(usage_payload(figures(), 0.02, bound=0.01))
    assert known["cost"] == {"amount": 0.02, "currency": "USD"} and "costLowerBound" not in known["_meta"]["ama"]


def test_d1_cost_turning_unknown_is_sent_once() -> None:
    r = UsageReporter()
    assert r.update(figures(), 0.01) is not None
    turned = r.update(figures(), None, bound=0.01)
    assert turned is not None and turned["cost"] is None  # a change: the editor must stop showing $0.01
    assert r.update(figures(), None, bound=0.01) is None  # and only once
    assert r.update(figures(), None, bound=0.02) is not None  # a higher bound is news too


def test_d2_session_open_always_sends() -> None:
    r = UsageReporter()
    first = r.update(figures(), 0.01, force=True)
    again = r.update(figures(), 0.01, force=True)
    assert first == again and again is not None


def test_d1_float_noise_in_cost_does_not_defeat_dedup() -> None:
    r = UsageReporter()
    assert r.update(figures(), 0.1 + 0.2) is not None
    assert r.update(figures(), 0.3) is None
    assert sent(r.payload(figures(), 0.1 + 0.2))["cost"]["amount"] == 0.3


def test_d1_caller_mutating_a_sent_payload_does_not_defeat_dedup() -> None:
    r = UsageReporter()
    given = sent(r.update(figures(), None))
    given["used"] = 1  # e.g. a caller that wraps or edits what it was given
    assert r.update(figures(), None) is None


def test_worked_example_section5_end_to_end() -> None:
    """The worked example (docs/context.md) through meter + billing + reporter: U10, U2, U7, U8, E4/D2, E1, E2/D1."""
    catalog = Catalog()
    demo = catalog.get("scripted/demo")
    assert demo is not None
    meter = ContextMeter(window=200_000, reserve_tokens=16_384)
    billing = Billing()
    reporter = UsageReporter()
    updates: list[dict[str, Any]] = []

    def emit(force: bool = False) -> dict[str, Any] | None:
        p = reporter.update(meter.figures(), billing.cost, force=force)
        if p is not None:
            updates.append(p)
        return p

    # 1. session/new: system prompt 4,000 chars + tool JSON 6,000 chars -> 2,500 (prefix); E4 sends (D2).
    meter.set_prefix("S" * 4000, "T" * 6000)
    p = sent(emit(force=True))
    assert p["used"] == 2500 and p["size"] == 200_000 and p["_meta"]["ama"]["source"] == "prefix"
    assert p["cost"] == {"amount": 0.0, "currency": "USD"}
    assert p["_meta"]["ama"]["autoCompactAt"] == 183_616 and p["_meta"]["ama"]["pruneAt"] == 128_531

    # 2. The user's message: trailing estimate 6 + ceil(7/4) = 8.
    meter.append(UserMessage(content=[TextPart("重构这个函数"), TextPart(" please")]))
    assert meter.figures().used == 2508  # still prefix: what the first request carries

    # 3. First response reports input 2,508 and output 40 -> 2,548 (usage); E1 sends.
    first = AssistantMessage(
        content=[ToolCallPart(id="c1", name="read", arguments='{"path": "a.py"}')],
        stop="tool_use",
        usage=Usage(input=2508, output=40),
    )
    meter.append(first)
    billing.add(first.usage, price_for(demo, first.usage))
    p = sent(emit())
    assert p["used"] == 2548
    assert p["_meta"]["ama"] == {
        "source": "usage",
        "usageTokens": 2548,
        "trailingTokens": 0,
        "percent": 1.3,
        "autoCompactAt": 183_616,
        "pruneAt": 128_531,
        "tier": "healthy",
    }
    assert p["cost"]["amount"] == pytest.approx((2508 * 1.0 + 40 * 5.0) / 1e6)

    # 4. A tool result of 1,000 ASCII chars -> trailing 250; the next response reports input 2,798,
    #    cacheRead 0, output 12 -> 2,810.
    meter.append(ToolResultMessage(tool_call_id="c1", name="read", content=[TextPart("x" * 1000)]))
    f = meter.figures()
    assert (f.used, f.trailing_tokens) == (2798, 250)
    second = AssistantMessage(content=[TextPart("Done.")], usage=Usage(input=2798, cache_read=0, output=12))
    meter.append(second)
    billing.add(second.usage, price_for(demo, second.usage))
    p = sent(emit())  # E1
    assert p["used"] == 2810 and p["_meta"]["ama"]["usageTokens"] == 2810
    assert p["cost"]["amount"] == pytest.approx(0.005566)

    # 5. The turn ends with nothing appended: E2 would send 2,810 again; D1 suppresses it.
    assert emit() is None
    assert [s["used"] for s in updates] == [2500, 2548, 2810]


def test_the_tier_caps_ride_in_every_payload_and_never_cause_an_update_of_their_own() -> None:
    """Issue 29 (seed 002's strain): `_meta.ama.tierCaps` in every usage_update; D1 still compares whole payloads."""
    r = UsageReporter(caps=[50.0, 60.0, 70.5, 74.0])
    first = r.update(figures(), None)
    assert first is not None
    assert first["_meta"]["ama"]["tierCaps"] == {"mid": 50, "high": 60, "warning": 70.5, "danger": 74}
    assert r.update(figures(), None) is None  # the same figures: the caps add nothing new (D1)
    moved = r.update(figures(used=53_121, trailing_tokens=321), None)
    assert moved is not None and moved["_meta"]["ama"]["tierCaps"] == first["_meta"]["ama"]["tierCaps"]
    assert "tierCaps" not in sent(usage_payload(figures(), None))["_meta"]["ama"]  # without caps: the payload as before
    assert sent(UsageReporter(caps=[50.0, 60.0, 70.0, float("inf")]).update(figures(), None))["_meta"]["ama"][
        "tierCaps"
    ] == {
        "mid": 50,
        "high": 60,
        "warning": 70,
    }  # JSON has no infinity: that cap is left out
