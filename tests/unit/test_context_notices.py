"""The context notices and /context wording of a session (session/accounting/session_context.py; docs/context.md "Notices"):
the mid notice, the exact tier at the boundary, and figures that rest on an estimate saying so."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ama_acp.agent.instructions import SessionInstructions
from ama_acp.config import CompactionConfig, Config, InstructionsConfig, Price
from ama_acp.conversation.messages import AssistantMessage, TextPart, Usage, UserMessage
from ama_acp.conversation.tools import ToolSpec
from ama_acp.session.accounting.session_context import ContextNotice, SessionContext
from ama_acp.shaping.skills import Found

WINDOWS = {"local/big": 10_000, "local/small": 4_000}


class Runtime:
    def __init__(self, config: Config) -> None:
        self._config = config

    @property
    def config(self) -> Config:
        return self._config

    def context_window(self, model_id: str) -> int | None:
        return WINDOWS.get(model_id)

    def price(self, model_id: str, usage: Usage | None) -> Price | None:
        return None


class Session:
    def __init__(self) -> None:
        self.model_id = "local/big"

    @property
    def id(self) -> str:
        return "s1"

    def system_prompt(self) -> str:
        return "s" * 400  # 100 tokens

    def tool_specs(self) -> Sequence[ToolSpec]:
        return []

    def tools_version(self) -> int:
        return 0

    def mcp_declarations(self) -> dict[str, list[ToolSpec]]:
        return {}

    @property
    def tools(self) -> Session:  # the declared tools (session/turn/toolset.py's part, in a session)
        return self

    @property
    def instructions(self) -> SessionInstructions:  # no project instructions (agent/instructions.py)
        return SessionInstructions(InstructionsConfig(enabled=False), "/", None)

    @property
    def skills(self) -> Found:  # no skills (shaping/skills.py)
        return Found()


def context(compaction: bool = False) -> tuple[SessionContext, Session]:
    session = Session()
    cfg = Config(compaction=CompactionConfig(enabled=compaction))
    return SessionContext(Runtime(cfg), session), session


def reply(used: int | None) -> AssistantMessage:
    usage = Usage(input=used, output=0) if used is not None else None
    return AssistantMessage(content=[TextPart("ok")], usage=usage)


CAPS = {"mid": 50, "high": 60, "warning": 70, "danger": 74}


def turn(ctx: SessionContext, used: int | None, deliver: bool = True) -> list[ContextNotice]:
    ctx.append(UserMessage(content=[TextPart("go")]))
    ctx.append(reply(used))
    return ctx.context_notices(deliver=deliver)


def test_4999_of_10000_is_healthy_and_says_nothing_5000_is_mid_with_one_info_notice() -> None:
    ctx, _ = context()
    assert ctx.context_notices(deliver=True) == []  # the prefix: healthy
    assert turn(ctx, 4_999) == []
    assert ctx.figures().tier == "healthy" and ctx.figures().percent == 50.0
    (notice,) = turn(ctx, 5_000)
    assert (notice.severity, notice.title) == ("info", "Context mid")
    assert notice.text.startswith("50.0 % (5,000 of 10,000 tokens) used.")
    assert "Finish the current piece of work soon; start new work in a fresh session." in notice.text
    # The measured fill carries no ≈; the boot cost after it (the first notice) is ama's estimate and says so
    # (issue 29 moved this expectation from the whole text to the fill).
    fill, boot = notice.text.split(" Boot cost: ")
    assert "≈" not in fill and "estimated" not in fill
    assert boot == "≈ 101 tokens (system prompt 100 · ama's tools 1), carried by every request before any message."
    assert turn(ctx, 5_500) == []  # staying in mid says nothing more


def test_mid_again_after_a_fall_and_a_new_rise() -> None:
    ctx, _ = context()
    assert [n.title for n in turn(ctx, 5_000)] == ["Context mid"]
    assert turn(ctx, 1_000) == []  # a fall
    assert [n.title for n in turn(ctx, 5_100)] == ["Context mid"]


def test_a_rise_into_mid_during_a_streamed_reply_waits_and_is_worded_when_it_goes_out() -> None:
    ctx, _ = context()
    assert turn(ctx, 5_000, deliver=False) == []
    (notice,) = ctx.context_notices(deliver=True)
    assert notice.title == "Context mid" and "(5,000 of 10,000 tokens)" in notice.text
    assert ctx.context_notices(deliver=True) == []  # once


def test_a_jump_past_mid_is_told_as_the_higher_tier_only() -> None:
    ctx, _ = context()
    assert [n.title for n in turn(ctx, 6_100)] == ["Context high"]


def test_a_notice_after_a_model_switch_is_estimated() -> None:
    """The figure after a switch is an estimate of the whole context (U9): its numbers carry ≈ and the word."""
    ctx, session = context()
    assert turn(ctx, 1_000) == []
    ctx.append(UserMessage(content=[TextPart("x" * 8_000)]))  # 2,000 tokens more of context
    session.model_id = "local/small"
    ctx.model_changed("local/big", "local/small")
    f = ctx.figures()
    assert f.source == "estimate" and f.tier == "mid", f
    (notice,) = ctx.context_notices(deliver=True)
    assert notice.title == "Context mid (stale)"  # seed row 002-22: estimated since the switch, not measured yet
    assert notice.text.startswith(f"≈ {f.percent:.1f} % (≈ {f.used:,} of 4,000 tokens, estimated) used.")
    assert notice.text.endswith(
        "The tier is stale: estimated since a model switch; the next response measures it again."
    )
    assert notice.meta == {"ama": {"tier": "mid", "tierCaps": CAPS, "bootTokens": 101, "tierKind": "stale"}}


def test_every_readout_names_the_last_compaction_and_the_stale_tier_until_a_response_measures() -> None:
    """seed row 002-41 and seed row 002-22 (issue 42): after compaction #N every readout names it; its tier is `stale` until a
    response measures the context again; the boot cost is in each (seed 002: every readout)."""
    ctx, _ = context(compaction=True)
    assert turn(ctx, 1_000) == []  # measured
    ctx.replace([UserMessage(content=[TextPart("x" * 24_000)])])  # the handoff: 6,000 tokens + the prefix's 101
    ctx.compacted(3)
    update = ctx.usage_update()
    assert update is not None and update.meta is not None
    ama = update.meta["ama"]
    assert isinstance(ama, dict)
    assert (ama["bootTokens"], ama["compaction"], ama["tierKind"], ama["tier"]) == (101, 3, "stale", "high")
    stats = ctx.stats()["context"]
    assert isinstance(stats, dict) and (stats["compaction"], stats["tierKind"]) == (3, "stale")
    assert "tier high (stale) · source estimate" in ctx.describe() and "· compaction #3" in ctx.describe()
    (stale,) = ctx.context_notices(deliver=True)
    assert stale.title == "Context high (stale)" and "estimated since compaction #3" in stale.text
    (fresh,) = turn(ctx, 7_100)  # a response measures: the tier is fresh again, the count stays
    assert fresh.title == "Context warning" and "stale" not in fresh.text
    assert "Compaction #3 was the last one of this session." in fresh.text and "Boot cost: ≈ 101 tokens" in fresh.text
    assert fresh.meta == {"ama": {"tier": "warning", "tierCaps": CAPS, "bootTokens": 101, "compaction": 3}}
    after = ctx.usage_update()
    assert after is not None and after.meta is not None
    assert after.meta["ama"]["compaction"] == 3 and "tierKind" not in after.meta["ama"]


def test_a_notice_on_the_prefix_is_estimated() -> None:
    ctx, _ = context()
    ctx.append(UserMessage(content=[TextPart("y" * 21_996)]))  # no response yet: 100 + 1 (tools `[]`) + 5,499
    (notice,) = ctx.context_notices(deliver=True)
    assert notice.title == "Context mid" and "≈ 5,600 of 10,000 tokens, estimated" in notice.text


# -- /context ------------------------------------------------------------------------------------------------


def first_lines(ctx: SessionContext) -> list[str]:
    return ctx.describe().splitlines()[:2]


def test_context_of_a_measured_figure_keeps_its_wording() -> None:
    ctx, _ = context()
    turn(ctx, 4_999)
    head = first_lines(ctx)
    # Issue 29 added the boot cost (ama's estimate of the prefix, hence its ≈) to the headline.
    assert head[0] == (
        "**Context:** 4,999 of 10,000 tokens (50.0 %) · tier healthy · source usage"
        " · boot cost ≈ 101 tokens (system prompt 100 · ama's tools 1)"
    )
    assert "estimate" not in head[1].split("+")[0]  # the usage line, not an estimate note


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("prefix", "no model response yet"),
        ("switch", "a model switch, a compaction or pruning"),
        ("replace", "a model switch, a compaction or pruning"),
        ("no usage", "the last response reported no usage"),
        ("untrusted", "the last response's usage was not trustworthy"),
    ],
)
def test_context_of_an_estimate_says_so_and_why(how: str, why: str) -> None:
    ctx, session = context()
    if how == "switch":
        turn(ctx, 1_000)
        session.model_id = "local/small"
        ctx.model_changed("local/big", "local/small")
    elif how == "replace":
        turn(ctx, 1_000)
        ctx.replace(list(ctx.meter.messages[-1:]))
    elif how == "no usage":
        turn(ctx, None)
    elif how == "untrusted":
        ctx.append(AssistantMessage(content=[TextPart("ok")], usage=Usage(input=-1, output=0)))
    f = ctx.figures()
    assert f.source == ("prefix" if how == "prefix" else "estimate")
    head = first_lines(ctx)
    window = f"{f.window:,}"
    assert head[0].startswith(f"**Context:** ≈ {f.used:,} of {window} tokens (≈ {f.percent:.1f} %, estimated) · ")
    assert head[1].startswith("The figure is ama's estimate, not a provider's count: ") and why in head[1]


# -- the boot cost (issue 29: seed 002's strain) ----------------------------------------------------------------


class McpSession(Session):
    """A session with ama's one tool and two MCP servers' declarations."""

    OWN = [ToolSpec("read_file", "Read a file " + "r" * 400, {"type": "object"})]
    MCP = {
        "github": [ToolSpec(f"mcp__github__t{i}", "d" * 800, {"type": "object"}) for i in range(3)],
        "my\nfs": [ToolSpec("mcp__fs__read", "f" * 200, {"type": "object"})],
    }

    def tool_specs(self) -> Sequence[ToolSpec]:
        return [*self.OWN, *(s for specs in self.MCP.values() for s in specs)]

    def mcp_declarations(self) -> dict[str, list[ToolSpec]]:
        return self.MCP


def test_the_boot_cost_adds_up_to_the_prefix_and_names_each_mcp_server() -> None:
    session = McpSession()
    ctx = SessionContext(Runtime(Config(compaction=CompactionConfig(enabled=False))), session)
    parts = ctx.prefix_parts()
    assert [p.name for p in parts] == ["system prompt", "ama's tools", "MCP github", "MCP my fs"]
    b = ctx.meter.breakdown()
    assert sum(p.tokens for p in parts) == b.system_prompt + b.tool_declarations == ctx.figures().used
    assert dict((p.name, p.tokens) for p in parts)["MCP github"] > 600  # three declarations of 800 characters
    ctx.append(UserMessage(content=[TextPart("go")]))
    ctx.append(reply(6_000))
    (notice,) = ctx.context_notices(deliver=True)
    boot = sum(p.tokens for p in parts)
    assert f"Boot cost: ≈ {boot:,} tokens (system prompt 100 · ama's tools " in notice.text
    assert " · MCP github " in notice.text and " · MCP my fs " in notice.text
    assert notice.meta == {
        "ama": {"tier": "high", "tierCaps": {"mid": 50, "high": 60, "warning": 70, "danger": 74}, "bootTokens": boot}
    }
    assert " · boot cost ≈ " in first_lines(ctx)[0] and " · MCP github " in first_lines(ctx)[0]
