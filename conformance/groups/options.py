"""Groups about session modes and config options, including changes sent while a turn runs."""

from __future__ import annotations

from typing import Any

from ama_acp.client.connection import PendingRequest
from ama_acp.client.errors import RpcError
from ama_conformance.core.agent import Agent, AgentFailure
from ama_conformance.core.outcome import Checks
from ama_conformance.groups.base import GroupContext, group
from ama_conformance.groups.turns import running_turn


def select_values(option: dict[str, Any]) -> list[str]:
    """The value ids of a select option, flattening groups."""
    values: list[str] = []
    for entry in option.get("options") or []:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("value"), str):
            values.append(entry["value"])
        for sub in entry.get("options") or []:
            if isinstance(sub, dict) and isinstance(sub.get("value"), str):
                values.append(sub["value"])
    return values


def switchable(options: Any, *, prefer: str | None = None) -> tuple[dict[str, Any], str] | None:
    """A select option with a value other than its current one, and that value (`prefer`: a category)."""
    if not isinstance(options, list):
        return None
    found = []
    for option in options:
        if isinstance(option, dict) and option.get("type") == "select" and isinstance(option.get("id"), str):
            others = [v for v in select_values(option) if v != option.get("currentValue")]
            if others:
                found.append((option, others[0]))
    found.sort(key=lambda pair: pair[0].get("category") != prefer)
    return found[0] if found else None


def _ended(pending: PendingRequest) -> bool:
    return pending.done


async def _mid_turn(
    c: Checks, rid: str, agent: Agent, sid: str, pending: PendingRequest, method: str, params: dict[str, Any]
) -> None:
    """`method` sent while the turn runs must be answered while it still runs. An agent that waits for the turn
    runs into the request timeout (a FAIL); a turn that ends on its own meanwhile leaves it untested. The turn
    is cancelled after."""
    if pending.done:
        c.untested(rid, "the turn ended before the change could be sent: give a longer --cancel-prompt")
    else:
        await agent.call(method, params)
        if _ended(pending):  # (a fresh look: the turn may have ended while the change was answered)
            c.untested(rid, "the turn ended on its own while the change was answered: give a longer --cancel-prompt")
        else:
            c.passed(rid, f"{method} was answered while the turn ran")
    await agent.conn.cancel(sid)
    try:
        await agent.finish(pending)
    except AgentFailure:
        pass  # how a cancelled turn ends is R110's business


def _skip_all(ctx: GroupContext, reason: str) -> None:
    for rid in ctx.own:
        ctx.checks.skip(rid, reason)


def _error_or(err: RpcError | None, otherwise: str) -> str:
    """How the agent answered a request that should fail: its error code, or `otherwise`."""
    return f"error {err.code}" if err else otherwise


def _entries(listed: Any) -> list[dict[str, Any]]:
    """The objects in a list the agent sent (iterated as it came: R4 reports one of the wrong type)."""
    return [o for o in listed or [] if isinstance(o, dict)]


def _mode_ids(state: Any) -> list[Any]:
    return [m.get("id") for m in _entries((state or {}).get("availableModes"))]


@group("modes", ("R91", "R91.1", "R92", "R127"))
async def modes(ctx: GroupContext) -> None:
    c = ctx.checks
    agent, sid, result = await ctx.opened()
    state = result.get("modes")
    available = _mode_ids(state)
    if not isinstance(state, dict) or not available:
        _skip_all(ctx, "session/new returned no modes")
        return
    current = state.get("currentModeId")
    with c.at("R91"):
        for mode in [m for m in available if m != current] + [current]:
            await agent.call("session/set_mode", {"sessionId": sid, "modeId": mode})
        c.passed("R91", f"set_mode to each of {available}")
    with c.at("R91.1"):
        err = await agent.error_of("session/set_mode", {"sessionId": sid, "modeId": "acp-conformance-no-such-mode"})
        c.check("R91.1", err is not None, "an unknown mode got " + _error_or(err, "{}"))
    pending = await running_turn(ctx, agent, sid)
    with c.at("R92"):
        other = next((m for m in available if m != current), current)
        await _mid_turn(c, "R92", agent, sid, pending, "session/set_mode", {"sessionId": sid, "modeId": other})
        await agent.call("session/set_mode", {"sessionId": sid, "modeId": current})
    _modes_named(c, "R127", agent, sid, available)


def _modes_named(c: Checks, rid: str, agent: Agent, sid: str, available: list[Any]) -> None:
    """R127: every current_mode_update names an advertised mode."""
    named = [u.get("currentModeId") for u in agent.conn.updates_for(sid, "current_mode_update")]
    bad = [m for m in named if m not in available]
    if named:
        c.check(rid, not bad, f"current_mode_update named {named[:6]}" + (f"; not advertised: {bad}" if bad else ""))
    else:
        c.skip(rid, "the agent sent no current_mode_update")


def _set_answer_complete(
    c: Checks, rid: str, options: list[Any], option: dict[str, Any], value: str, answer: Any
) -> None:
    """R94: the answer to a set_config_option lists every option, the one set with its new value."""
    ids = [o.get("id") for o in _entries(options)]
    after = answer.get("configOptions")
    listed = _entries(after)
    after_ids = [o.get("id") for o in listed]
    now = next((o.get("currentValue") for o in listed if o.get("id") == option["id"]), None)
    c.check(
        rid,
        isinstance(after, list) and set(ids) <= set(after_ids) and now == value,
        f"set {option['id']}={value!r}: the answer lists {after_ids} with {option['id']}={now!r}",
    )


@group("config", ("R94", "R97", "R97.1"))
async def config(ctx: GroupContext) -> None:
    c = ctx.checks
    agent, sid, result = await ctx.opened()
    options = result.get("configOptions")
    if not isinstance(options, list) or not options:
        _skip_all(ctx, "session/new returned no configOptions")
        return
    pick = switchable(options, prefer="mode")
    if pick is None:
        _skip_all(ctx, "no select option has a second value to switch to")
        return
    option, value = pick
    with c.at("R94"):
        answer = await agent.call(
            "session/set_config_option", {"sessionId": sid, "configId": option["id"], "value": value}
        )
        _set_answer_complete(c, "R94", options, option, value, answer)
    with c.at("R97"):
        err = await agent.error_of(
            "session/set_config_option",
            {"sessionId": sid, "configId": option["id"], "value": "acp-conformance-no-such-value"},
        )
        c.check("R97", err is not None, "a value not offered got " + _error_or(err, "a result"))
    pending = await running_turn(ctx, agent, sid)
    with c.at("R97.1"):
        params = {"sessionId": sid, "configId": option["id"], "value": option.get("currentValue")}
        await _mid_turn(c, "R97.1", agent, sid, pending, "session/set_config_option", params)
