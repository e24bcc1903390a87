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
from ama_conformance.groups.persistence import replay_in_order

MARK_ONE = "history-marker-one-4e1f"
MARK_TWO = "history-marker-two-8c3a"
_AGENT_CHUNKS = ("agent_message_chunk", "agent_thought_chunk")


def _has_id(update: dict[str, Any]) -> bool:
    return isinstance(update.get("messageId"), str)


def _ids_of(updates: list[dict[str, Any]], kinds: tuple[str, ...]) -> set[str]:
    return {str(u["messageId"]) for u in updates if u.get("sessionUpdate") in kinds and _has_id(u)}


def id_reuse(turns: list[list[dict[str, Any]]]) -> list[str]:
    """The message-id problems of a session's updates, split by turn: an id the user's message and the agent's
    share, or an id that comes back in a later turn (another message). Within one turn an agent's thought and
    text may be one message, and several messages may follow each other: nothing there is judged."""
    problems: list[str] = []
    earlier: dict[str, int] = {}
    for n, updates in enumerate(turns):
        user, agent = _ids_of(updates, ("user_message_chunk",)), _ids_of(updates, _AGENT_CHUNKS)
        problems += [f"messageId {m!r} names both a user message and an agent message" for m in sorted(user & agent)]
        problems += [
            f"messageId {m!r} of turn {n + 1} was already used in turn {earlier[m] + 1}"
            for m in sorted(user | agent)
            if m in earlier
        ]
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


def _count(updates: list[dict[str, Any]], kind: str) -> int:
    """How many `kind` updates; tool calls by their id (a call is announced once, whatever its updates)."""
    found = _kinds(updates, kind)
    return len({u.get("toolCallId") for u in found}) if kind == "tool_call" else len(found)


_REPLAYED = (("tool_call", "tool calls"), ("agent_thought_chunk", "thoughts"), ("plan", "plans"))


def _replay_gaps(live: list[dict[str, Any]], replay: list[dict[str, Any]]) -> list[str]:
    """What the replay of a session leaves out of its live turns: tool calls, thoughts, plans, and the tool calls
    its tool_call_updates name."""
    gaps = []
    for kind, what in _REPLAYED:
        had, shown = _count(live, kind), _count(replay, kind)
        if had and not shown:
            gaps.append(f"the live turns had {had} {what}, the replay none")
        elif kind == "tool_call" and shown < had:
            gaps.append(f"the live turns had {had} tool calls, the replay {shown}")
    announced = {str(u.get("toolCallId")) for u in _kinds(replay, "tool_call")}
    orphans = sorted({str(u.get("toolCallId")) for u in _kinds(replay, "tool_call_update")} - announced)
    if orphans:
        gaps.append(f"replayed tool_call_updates for calls the replay never announced: {orphans[:3]}")
    return gaps


def _replayed(live: list[dict[str, Any]], replay: list[dict[str, Any]]) -> str:
    thoughts, plans = len(_kinds(replay, "agent_thought_chunk")), len(_kinds(replay, "plan"))
    return (
        f"replayed {_count(replay, 'tool_call')} tool call(s), {thoughts} thought chunk(s) and {plans} plan(s); "
        f"live: {len(_kinds(live, 'agent_thought_chunk'))} thought chunk(s), {len(_kinds(live, 'plan'))} plan(s)"
    )


def _ids_unique(ctx: GroupContext, rid: str, turns: list[list[list[dict[str, Any]]]]) -> None:
    """R117 over the live turns of each session (`turns`: per session, per turn)."""
    if not any(_ids(t) for session in turns for t in session):
        ctx.checks.skip(rid, "the agent sent no messageId")
        return
    problems = [p for session in turns for p in id_reuse(session)]
    ctx.checks.check(rid, not problems, "; ".join(problems[:3]) or "each message id named one message")


def _apart_for_the_model(ctx: GroupContext, rid: str) -> bool:
    """R53.1 as the suite's model saw it: whether it saw both sessions (and judged them), else False."""
    bodies = ctx.model.bodies() if ctx.model else []
    if not (any(MARK_ONE in json.dumps(b) for b in bodies) and any(MARK_TWO in json.dumps(b) for b in bodies)):
        return False
    bleed = _bleed(bodies)
    ctx.checks.check(rid, not bleed, "; ".join(bleed[:2]) or "each session's model requests held its own turns only")
    return True


def _apart_in_the_replay(ctx: GroupContext, rid: str, replay: list[dict[str, Any]]) -> None:
    """R53.1 as the replay of the first session shows it, for an agent the suite's model did not see."""
    text = json.dumps(replay)
    if MARK_ONE not in text:
        ctx.checks.untested(rid, "the first session's replay does not hold its own words either (R66's business)")
        return
    ctx.checks.check(
        rid,
        MARK_TWO not in text,
        "the first session's replay "
        + ("carries the second session's words" if MARK_TWO in text else "holds its own turns only"),
    )


async def _live_turns(ctx: GroupContext, agent: Agent, one: str, two: str) -> list[list[list[dict[str, Any]]]]:
    """The turns of each session: the first's marker, the second's, then a read, a thought and a plan in the first."""
    source = ctx.file("history.txt", "a file the first session reads\n")
    turns_one = [await _turn(ctx, agent, one, ctx.ask("reply", MARK_ONE))]
    turns_two = [await _turn(ctx, agent, two, ctx.ask("reply", MARK_TWO))]
    turns_one.append(await _turn(ctx, agent, one, ctx.ask("read", str(source))))
    turns_one.append(await _turn(ctx, agent, one, ctx.ask("think", "history-thought-5b2a")))
    turns_one.append(await _turn(ctx, agent, one, ctx.ask("plan", "history-plan-step")))
    return [turns_one, turns_two]


@group("coverage-history", ("R53.1", "R117", "R66.1", "R68", "R66", "R101"))
async def coverage_history(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn(permission="allow")
    with c.needs("R36"):
        await agent.initialize()
    with c.needs("R33"):
        one, _ = await agent.new_session()
        two, _ = await agent.new_session()
    turns = await _live_turns(ctx, agent, one, two)
    live = [u for t in turns[0] for u in t]
    with c.at("R117"):
        _ids_unique(ctx, "R117", turns)
    seen_by_model = _apart_for_the_model(ctx, "R53.1")
    await agent.close()
    with c.at("R101"):
        _routed(ctx, "R101", agent, {one: MARK_ONE, two: MARK_TWO})
    fresh = await ctx.spawn(permission="allow")
    with c.needs("R36"):
        await fresh.initialize()
    if not fresh.advertised("loadSession"):
        for rid in ("R66", "R66.1", "R68"):
            c.skip(rid, "loadSession not advertised")
        if not seen_by_model:
            c.skip("R53.1", "neither the suite's model nor session/load shows what a session holds")
        return
    # A load that fails is R66's failure here as in the load group (the same behaviour, the same verdict): what
    # needs the replay is then untested, naming R66.
    with c.at("R66"):
        mark = fresh.mark()
        await fresh.call("session/load", {"sessionId": one, "cwd": str(ctx.config.workspace), "mcpServers": []})
        replay = fresh.updates_since(mark, one, TURN_KINDS)
        replay_in_order(ctx.checks, "R66", replay, MARK_ONE, "the replay of a session with tool calls")
    with c.at("R66.1"):
        _replay_complete(ctx, "R66.1", live, replay)
    if not seen_by_model:
        _apart_in_the_replay(ctx, "R53.1", replay)
    with c.at("R68"):
        _replay_ids(ctx, "R68", replay)


def misrouted(updates: list[dict[str, Any]], words: dict[str, str]) -> tuple[list[str], int]:
    """(each update under one session's id that carries another session's words and not its own, how many
    updates carried their own session's words). `updates`: session/update params; `words`: session id -> the
    words only that session was given."""
    problems: list[str] = []
    own = 0
    for params in updates:
        sid, update = params.get("sessionId"), params.get("update")
        if not isinstance(sid, str) or sid not in words or not isinstance(update, dict):
            continue
        text = json.dumps(update)
        if words[sid] in text:
            own += 1
            continue
        for other, theirs in words.items():
            if other != sid and theirs in text:
                problems.append(
                    f"a {update.get('sessionUpdate')} under session {sid!r} carries {theirs!r}, the words of "
                    f"session {other!r}: {text[:200]}"
                )
    return problems, own


def _routed(ctx: GroupContext, rid: str, agent: Agent, words: dict[str, str]) -> None:
    """R101: every update of the two sessions went out under its own session's id."""
    problems, own = misrouted(list(agent.conn.updates), words)
    if problems:
        ctx.checks.failed(rid, "; ".join(problems[:3]))
    elif not own:
        ctx.checks.untested(rid, "no update of either session carried its own words (nothing to tell them apart)")
    else:
        ctx.checks.passed(rid, f"{own} update(s) carried their session's words, each under its own session's id")


def _replay_complete(ctx: GroupContext, rid: str, live: list[dict[str, Any]], replay: list[dict[str, Any]]) -> None:
    """R66.1: the replay holds the tool calls, thoughts and plans of the live turns."""
    if not _kinds(live, "tool_call"):
        ctx.checks.untested(rid, "no tool ran in the live turns (its model called none: run with --model-env)")
        return
    gaps = _replay_gaps(live, replay)
    ctx.checks.check(rid, not gaps, "; ".join(gaps) or _replayed(live, replay))


def _replay_ids(ctx: GroupContext, rid: str, replay: list[dict[str, Any]]) -> None:
    """R68: each replayed message has an id of its own."""
    if not _ids(replay):
        ctx.checks.skip(rid, "no messageId in the replay")
        return
    problems = id_reuse(by_user_turn(replay))
    ctx.checks.check(rid, not problems, "; ".join(problems[:3]) or "each replayed message had an id of its own")
