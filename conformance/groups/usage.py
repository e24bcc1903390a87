"""The usage profile: ama's context-meter contract (E, D, P, U rules of docs/rules.md), checked on any agent.

It is reported apart from ACP conformance and never decides it: ACP makes `usage_update` optional (a MAY), and
these are ama's stricter promises — sent on open, after every response, after a model change, never duplicated,
never invented.
"""

from __future__ import annotations

from typing import Any

from ama_conformance.core.agent import Agent
from ama_conformance.core.values import obj
from ama_conformance.groups.base import GroupContext, group, transcript_messages
from ama_conformance.groups.options import switchable
from ama_conformance.requirements.registry import Profile


def _usage_of(msg: dict[str, Any], sid: str) -> dict[str, Any] | None:
    """The usage_update `msg` carries for `sid`, if it is one."""
    params = obj(msg.get("params"))
    update = obj(params.get("update"))
    if params.get("sessionId") == sid and update.get("sessionUpdate") == "usage_update":
        return update
    return None


def _usage_before_response(agent: Agent, request_id: int, sid: str) -> list[dict[str, Any]]:
    """The usage_updates of `sid` that reached the client after the request went out and before its response."""
    found: list[dict[str, Any]] = []
    sent = False
    for direction, msg in transcript_messages(agent):
        if direction == "out" and msg.get("id") == request_id and "method" in msg:
            sent = True
        elif direction == "in" and sent:
            if msg.get("id") == request_id and "method" not in msg:
                return found
            update = _usage_of(msg, sid)
            if update is not None:
                found.append(update)
    return found


def _payload_problems(updates: list[dict[str, Any]]) -> list[str]:
    bad = []
    for u in updates:
        used, size, cost = u.get("used"), u.get("size"), u.get("cost")
        if not (isinstance(used, int) and used >= 0 and isinstance(size, int) and size > 0):
            bad.append(f"used={used!r} size={size!r}")
        if cost is not None and (not isinstance(cost, dict) or cost.get("currency") != "USD"):
            bad.append(f"cost={cost!r}")
    return bad


def _repeats(updates: list[dict[str, Any]]) -> int:
    return sum(1 for a, b in zip(updates, updates[1:], strict=False) if a == b)


def _first_used(ctx: GroupContext, rid: str, agent: Agent, sid: str) -> None:
    """U10: the first usage_update counts what the session already holds (more than nothing)."""
    first = agent.conn.updates_for(sid, "usage_update")[:1]
    if not first:
        ctx.checks.untested(rid, "no usage_update to look at")
        return
    used = first[0].get("used")  # the agent's value, of any JSON type: R4 reports a wrong one's shape
    ok = isinstance(used, int) and not isinstance(used, bool) and used > 0
    ctx.checks.check(rid, ok, f"the first usage_update has used={used!r}")


async def _after_model_change(ctx: GroupContext, rid: str, agent: Agent, sid: str, opened: dict[str, Any]) -> None:
    """E3: a model change is followed by its config_option_update, then a usage_update."""
    c = ctx.checks
    pick = switchable(opened.get("configOptions"), prefer="model")
    if pick is None or pick[0].get("category") != "model":
        c.skip(rid, "no model option with a second value")
        return
    option, value = pick
    with c.at(rid):
        mark = agent.mark()
        await agent.call("session/set_config_option", {"sessionId": sid, "configId": option["id"], "value": value})

        def kinds() -> list[Any]:
            return [u.get("sessionUpdate") for u in agent.updates_since(mark, sid)]

        got = await agent.wait_for(lambda: "usage_update" in kinds(), 5.0)
        order = kinds()
        ok = (
            got
            and "config_option_update" in order
            and order.index("config_option_update") < order.index("usage_update")
        )
        c.check(rid, ok, f"after the model change: {order[:6]}")


async def _after_load(ctx: GroupContext, rid: str, sid: str) -> Agent:
    """E4 for a loaded session: a fresh process loads it; its usage_update comes after the replay, not inside it."""
    c = ctx.checks
    fresh = await ctx.spawn()
    with c.needs("R36"):
        await fresh.initialize()
    with c.at(rid):
        load = await fresh.conn.start_request(
            "session/load", {"sessionId": sid, "cwd": str(ctx.config.workspace), "mcpServers": []}
        )
        await load.wait(ctx.config.timeouts.request)
        got = await fresh.wait_for(lambda: bool(fresh.conn.updates_for(sid, "usage_update")), 5.0)
        during = _usage_before_response(fresh, load.id, sid)
        if got and not during:
            what = "a usage_update after the replay"
        else:
            what = f"{len(during)} usage_update(s) inside the replay" if during else "none"
        c.check(rid, got and not during, "after session/load: " + what)
    return fresh


@group("usage", ("E1", "E3", "E4", "D1", "P1", "P3", "U10"), profile=Profile.USAGE)
async def usage(ctx: GroupContext) -> None:
    from ama_conformance.core.transcript import schema_problems  # the transcript checks' R4, for P3

    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    with c.needs("R33"):
        sid, opened = await agent.new_session()
    with c.at("E4"):
        got = await agent.wait_for(lambda: bool(agent.conn.updates_for(sid, "usage_update")), 5.0)
        c.check("E4", got, "a usage_update followed session/new" if got else "no usage_update after session/new")
    _first_used(ctx, "U10", agent, sid)
    with c.needs("R103"):
        pending = await agent.start_prompt(sid, ctx.ask("reply", "usage profile"))
        await agent.finish(pending)
    with c.at("E1"):
        before = _usage_before_response(agent, pending.id, sid)
        c.check("E1", bool(before), f"{len(before)} usage_update(s) during the turn, before its response")
    await _after_model_change(ctx, "E3", agent, sid, opened)
    agents = [agent]
    if agent.advertised("loadSession"):
        await agent.close()
        agents.append(await _after_load(ctx, "E4", sid))
    updates = [u for a in agents for u in a.conn.updates_for(sid, "usage_update")]
    # D2: a session open always sends, so a repeat across an open (here: the load) is not a D1 duplicate.
    repeats = sum(_repeats(a.conn.updates_for(sid, "usage_update")) for a in agents)
    c.check("D1", repeats == 0, f"{repeats} repeated usage_update(s) out of {len(updates)}")
    bad = _payload_problems(updates)
    c.check("P1", not bad, "; ".join(bad[:3]) or f"{len(updates)} payload(s) well-formed")
    problems = [p for a in agents for p in schema_problems(ctx, a)]
    c.check("P3", not problems, "; ".join(problems[:2]) or "every message matched its schema definition")
