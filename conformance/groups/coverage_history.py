"""Coverage of what a session remembers and how it is shown again: each session keeps its own history (R53.1),
message ids name one message each, live (R117) and in a replay (R68), and a `session/load` replay carries the tool
calls (and thoughts and plans) of the live turns (R66.1).

Two sessions of one process are prompted with different markers, one of them with a file read, a turn the
suite's model reasons through (a thought) and one it plans; then a fresh process loads the first, as after an editor restart."""

from __future__ import annotations

import json
from typing import Any

from ama_conformance.core.agent import TURN_KINDS, Agent
from ama_conformance.groups.base import GroupContext, group

MARK_ONE = "history-marker-one-4e1f"
MARK_TWO = "history-marker-two-8c3a"
_AGENT_CHUNKS = ("agent_message_chunk", "agent_thought_chunk")


def _has_id(update: dict[str, Any]) -> bool:
    return isinstance(update.get("messageId"), str)


def id_reuse(turns: list[list[dict[str, Any]]]) -> list[str]:
    """The message-id problems of a session's updates, split by turn: an id the user's message and the agent's
    share, or an id that comes back in a later turn (another message). Within one turn an agent's thought and
    text may be one message, and several messages may follow each other: nothing there is judged."""
    problems: list[str] = []
    earlier: dict[str, int] = {}
    for n, updates in enumerate(turns):
        user = {str(u["messageId"]) for u in updates if u.get("sessionUpdate") == "user_message_chunk" and _has_id(u)}
        agent = {str(u["messageId"]) for u in updates if u.get("sessionUpdate") in _AGENT_CHUNKS and _has_id(u)}
        problems += [f"messageId {m!r} names both a user message and an agent message" for m in sorted(user & agent)]
        for m in sorted(user | agent):
            if m in earlier:
                problems.append(f"messageId {m!r} of turn {n + 1} was already used in turn {earlier[m] + 1}")
        for m in user | agent:
            earlier.setdefault(m, n)
    return problems


def by_user_turn(updates: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A replay split into turns: each starts at a user message that follows something else."""
    turns: list[list[dict[str, Any]]] = []
    for u in updates:
        starts = u.get("sessionUpdate") == "user_message_chunk" and (
            not turns or turns[-1][-1].get("sessionUpdate") != "user_message_chunk"
        )
        if starts or not turns:
            turns.append([])
        turns[-1].append(u)
    return turns


def _ids(updates: list[dict[str, Any]]) -> bool:
    return any(_has_id(u) for u in updates)


def _kinds(updates: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [u for u in updates if u.get("sessionUpdate") == kind]


async def _turn(ctx: GroupContext, agent: Agent, sid: str, prompt: str) -> list[dict[str, Any]]:
    mark = agent.mark()
    with ctx.checks.needs("R103"):
        await agent.prompt(sid, prompt)
    await agent.barrier()
    return agent.updates_since(mark, sid, TURN_KINDS)


def _bleed(bodies: list[dict[str, Any]]) -> list[str]:
    """Model requests of one session that carry the other session's marker."""
    out = []
    for body in bodies:
        text = json.dumps(body)
        for mine, other in ((MARK_ONE, MARK_TWO), (MARK_TWO, MARK_ONE)):
            if mine in text and other in text:
                out.append(f"a model request with {mine!r} also carries {other!r}")
    return out


@group("coverage-history", ("R53.1", "R117", "R66.1", "R68"))
async def coverage_history(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn(permission="allow")
    with c.needs("R36"):
        await agent.initialize()
    with c.needs("R33"):
        one, _ = await agent.new_session()
        two, _ = await agent.new_session()
    source = ctx.file("history.txt", "a file the first session reads\n")
    turns_one = [await _turn(ctx, agent, one, ctx.ask("reply", MARK_ONE))]
    turns_two = [await _turn(ctx, agent, two, ctx.ask("reply", MARK_TWO))]
    turns_one.append(await _turn(ctx, agent, one, ctx.ask("read", str(source))))
    turns_one.append(await _turn(ctx, agent, one, ctx.ask("think", "history-thought-5b2a")))
    turns_one.append(await _turn(ctx, agent, one, ctx.ask("plan", "history-plan-step")))
    live = [u for t in turns_one for u in t]
    with c.at("R117"):
        if not _ids(live + [u for t in turns_two for u in t]):
            c.skip("R117", "the agent sent no messageId")
        else:
            problems = id_reuse(turns_one) + id_reuse(turns_two)
            c.check("R117", not problems, "; ".join(problems[:3]) or "each message id named one message")
    bodies = ctx.model.bodies() if ctx.model else []
    seen_by_model = any(MARK_ONE in json.dumps(b) for b in bodies) and any(MARK_TWO in json.dumps(b) for b in bodies)
    if seen_by_model:
        bleed = _bleed(bodies)
        c.check("R53.1", not bleed, "; ".join(bleed[:2]) or "each session's model requests held its own turns only")
    await agent.close()
    fresh = await ctx.spawn(permission="allow")
    with c.needs("R36"):
        await fresh.initialize()
    if not fresh.advertised("loadSession"):
        for rid in ("R66.1", "R68"):
            c.skip(rid, "loadSession not advertised")
        if not seen_by_model:
            c.skip("R53.1", "neither the suite's model nor session/load shows what a session holds")
        return
    with c.at("R66.1"):
        mark = fresh.mark()
        await fresh.call("session/load", {"sessionId": one, "cwd": str(ctx.config.workspace), "mcpServers": []})
        replay = fresh.updates_since(mark, one, TURN_KINDS)
        gaps = []
        for kind, what in (("tool_call", "tool calls"), ("agent_thought_chunk", "thoughts"), ("plan", "plans")):
            had, shown = len(_kinds(live, kind)), len(_kinds(replay, kind))
            if kind == "tool_call":
                had = len({u.get("toolCallId") for u in _kinds(live, kind)})
                shown = len({u.get("toolCallId") for u in _kinds(replay, kind)})
            if had and not shown:
                gaps.append(f"the live turns had {had} {what}, the replay none")
            elif kind == "tool_call" and shown < had:
                gaps.append(f"the live turns had {had} tool calls, the replay {shown}")
        announced = {u.get("toolCallId") for u in _kinds(replay, "tool_call")}
        orphans = sorted(
            {str(u.get("toolCallId")) for u in _kinds(replay, "tool_call_update")} - set(map(str, announced))
        )
        if orphans:
            gaps.append(f"replayed tool_call_updates for calls the replay never announced: {orphans[:3]}")
        if not _kinds(live, "tool_call"):
            c.untested("R66.1", "no tool ran in the live turns (its model called none: run with --model-env)")
        else:
            c.check(
                "R66.1",
                not gaps,
                "; ".join(gaps)
                or f"replayed {len(announced)} tool call(s), {len(_kinds(replay, 'agent_thought_chunk'))} thought chunk(s) and {len(_kinds(replay, 'plan'))} plan(s); live: {len(_kinds(live, 'agent_thought_chunk'))} thought chunk(s), {len(_kinds(live, 'plan'))} plan(s)",
            )
    if not seen_by_model and MARK_ONE not in json.dumps(replay):
        c.untested("R53.1", "the first session's replay does not hold its own words either (R66's business)")
    elif not seen_by_model:
        c.check(
            "R53.1",
            MARK_TWO not in json.dumps(replay),
            "the first session's replay "
            + ("carries the second session's words" if MARK_TWO in json.dumps(replay) else "holds its own turns only"),
        )
    with c.at("R68"):
        if not _ids(replay):
            c.skip("R68", "no messageId in the replay")
        else:
            problems = id_reuse(by_user_turn(replay))
            c.check("R68", not problems, "; ".join(problems[:3]) or "each replayed message had an id of its own")
