"""Groups about sessions that outlive a process or end: load, resume, list, delete, close.

A session is made and prompted in one agent process, which then ends; a fresh process loads or resumes it —
the case an editor meets after a restart.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ama_conformance.core.agent import TURN_KINDS, Agent
from ama_conformance.core.outcome import Checks
from ama_conformance.groups.base import GroupContext, group
from ama_conformance.groups.coverage_listing import list_all
from ama_conformance.groups.turns import raced, running_turn, settle


async def _stored_session(ctx: GroupContext, gate: str, marker: str) -> tuple[Agent, str] | None:
    """A fresh agent advertising `gate`, with a session that has one finished turn, closed again; None (and
    every id of the group SKIPPED) when the gate is not advertised."""
    agent = await ctx.spawn()
    with ctx.checks.needs("R36"):
        await agent.initialize()
    if not agent.advertised(gate):
        for rid in ctx.own:
            ctx.checks.skip(rid, f"{gate} not advertised")
        await agent.close()
        return None
    with ctx.checks.needs("R33"):
        sid, _ = await agent.new_session()
    with ctx.checks.needs("R103"):
        await agent.prompt(sid, ctx.ask("reply", marker))
    await agent.close()
    fresh = await ctx.spawn()
    with ctx.checks.needs("R36"):
        await fresh.initialize()
    return fresh, sid


async def _reopened(ctx: GroupContext, gate: str, marker: str, method: str, rid: str) -> tuple[Agent, str, int] | None:
    """The stored session (`_stored_session`) opened again with `method` in the fresh process, the step `rid`
    judges: the agent, the session and the mark from before the request. None when `gate` is not advertised."""
    stored = await _stored_session(ctx, gate, marker)
    if stored is None:
        return None
    agent, sid = stored
    with ctx.checks.at(rid):
        mark = agent.mark()
        await agent.call(method, {"sessionId": sid, "cwd": str(ctx.config.workspace), "mcpServers": []})
    return agent, sid, mark


_USAGE = frozenset({"usage_update"})
METER_WAIT = 5.0  # seconds a metered agent has to send its usage after a load or resume


async def _meter_restored(ctx: GroupContext, agent: Agent, sid: str, mark: int, rid: str, how: str) -> None:
    """R71 / R77: the session's usage follows its load or resume — counted from the request on, so one sent with
    the replay, before the response, counts as well (the spec orders the replay, not the meter). An agent that
    sent no usage_update at all, in the first process either, has no meter: the guidance is "if data exists", so
    the requirement does not apply (SKIPPED), never a failure."""
    c = ctx.checks
    metered = any(a.conn.updates_for(sid, "usage_update") for a in ctx.agents if a is not agent)
    got = await agent.wait_for(lambda: bool(agent.updates_since(mark, sid, _USAGE)), METER_WAIT if metered else 0.5)
    if got:
        c.passed(rid, f"a usage_update came with the {how}")
    elif not metered:
        c.skip(rid, f"the agent sent no usage_update, before or after the {how}: it reports no usage (optional)")
    else:
        c.failed(rid, f"no usage_update after the {how}, though the agent reported usage before it")


def replay_in_order(checks: Checks, rid: str, replay: list[dict[str, Any]], marker: str, what: str) -> None:
    """R66: the replay holds the first turn (its `marker`), the user's message before the agent's reply."""
    kinds = [u.get("sessionUpdate") for u in replay]
    first_user = kinds.index("user_message_chunk") if "user_message_chunk" in kinds else -1
    first_agent = kinds.index("agent_message_chunk") if "agent_message_chunk" in kinds else -1
    checks.check(
        rid,
        0 <= first_user < first_agent and marker in json.dumps(replay),
        f"{what}: {kinds[:8]}{'…' if len(kinds) > 8 else ''}",
    )


@group("load", ("R66", "R67", "R70", "R71", "R72", "R56"))
async def load(ctx: GroupContext) -> None:
    c = ctx.checks
    reopened = await _reopened(ctx, "loadSession", "replayed-marker-5d1e", "session/load", "R66")
    if reopened is None:
        return
    agent, sid, mark = reopened
    with c.at("R66"):
        replay = agent.updates_since(mark, sid, TURN_KINDS)
        replay_in_order(c, "R66", replay, "replayed-marker-5d1e", "replayed before the response")
    with c.at("R67"):
        after = agent.mark()
        await agent.barrier()
        late = agent.updates_since(after, sid, TURN_KINDS)
        c.check(
            "R67",
            not late,
            f"{len(late)} history update(s) after the session/load response"
            if late
            else "the whole replay came before the response",
        )
    with c.at("R71"):
        await _meter_restored(ctx, agent, sid, mark, "R71", "load")
    with c.at("R70"):
        stop = (await agent.prompt(sid, ctx.ask("reply", "after load"))).get("stopReason")
        c.check("R70", isinstance(stop, str), f"a prompt on the loaded session ended {stop!r}")
    with c.at("R72"):
        err = await agent.error_of(
            "session/load", {"sessionId": "acp-conformance-unknown", "cwd": str(ctx.config.workspace), "mcpServers": []}
        )
        c.passed("R72", "an unknown session id got " + (f"error {err.code}" if err else "a result"))
    with c.at("R56"):
        err = await agent.error_of("session/load", {"sessionId": sid, "cwd": "relative/dir", "mcpServers": []})
        c.check(
            "R56",
            err is not None,
            "session/load with a relative cwd got " + (f"error {err.code}" if err else "a result"),
        )


@group("resume", ("R74", "R75", "R77"))
async def resume(ctx: GroupContext) -> None:
    c = ctx.checks
    reopened = await _reopened(ctx, "sessionCapabilities.resume", "resumed-marker-2b7c", "session/resume", "R74")
    if reopened is None:
        return
    agent, sid, mark = reopened
    with c.at("R74"):
        await agent.barrier()
        history = agent.updates_since(mark, sid, TURN_KINDS)
        c.check(
            "R74",
            not history,
            f"{len(history)} history update(s) around the resume" if history else "no history replayed",
        )
    with c.at("R77"):
        await _meter_restored(ctx, agent, sid, mark, "R77", "resume")
    with c.at("R75"):
        stop = (await agent.prompt(sid, ctx.ask("reply", "after resume"))).get("stopReason")
        c.check("R75", isinstance(stop, str), f"a prompt on the resumed session ended {stop!r}")


@group("list-delete", ("R79", "R80", "R81", "R83", "R86", "R87"))
async def list_delete(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    listing = agent.advertised("sessionCapabilities.list")
    if not listing:
        for rid in ("R79", "R80", "R81", "R83", "R86"):
            c.skip(rid, "sessionCapabilities.list not advertised")
    with c.needs("R33"):
        sid, _ = await agent.new_session()
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("reply", "a session to list"))
    if listing:
        await _listed(ctx, agent, sid, found="R79", empty="R80", filtered="R81", cursor="R83")
    if not agent.advertised("sessionCapabilities.delete"):
        for rid in ("R86", "R87"):
            if not c.reported(rid):
                c.skip(rid, "sessionCapabilities.delete not advertised")
        return
    with c.at("R87"):
        err = await agent.error_of("session/delete", {"sessionId": "acp-conformance-unknown"})
        c.check("R87", err is None, "deleting an unknown session got " + (f"error {err.code}" if err else "{}"))
    with c.at("R86"):
        await agent.call("session/delete", {"sessionId": sid})
        if listing:
            ids = (await list_all(agent)).ids()
            c.check(
                "R86",
                sid not in ids,
                "the deleted session is " + ("still listed" if sid in ids else "gone from the list"),
            )


async def _listed(
    ctx: GroupContext, agent: Agent, sid: str, *, found: str, empty: str, filtered: str, cursor: str
) -> None:
    """The session is listed (`found`); a filter that matches nothing lists nothing (`empty`), one by the
    workspace only its sessions (`filtered`); a cursor never issued is refused (`cursor`)."""
    c = ctx.checks
    with c.at(found):
        ids = (await list_all(agent)).ids()
        c.check(
            found, sid in ids, f"{len(ids)} session(s) listed, this run's {'among them' if sid in ids else 'missing'}"
        )
    with c.at(empty):
        nowhere = ctx.config.scratch / "no-sessions-here"
        nowhere.mkdir(exist_ok=True)
        page = await agent.call("session/list", {"cwd": str(nowhere)})
        c.check(
            empty,
            page.get("sessions") == [],
            f"a filter matching nothing answered sessions={page.get('sessions')!r:.100}",
        )
    with c.at(filtered):
        page = await agent.call("session/list", {"cwd": str(ctx.config.workspace)})
        cwds = {s.get("cwd") for s in page.get("sessions") or [] if isinstance(s, dict)}
        c.check(filtered, cwds <= {str(ctx.config.workspace)}, f"cwds under the filter: {sorted(map(str, cwds))[:3]}")
    with c.at(cursor):
        err = await agent.error_of("session/list", {"cursor": "acp-conformance-never-issued"})
        c.check(cursor, err is not None, "an unknown cursor got " + (f"error {err.code}" if err else "a page"))


@group("close", ("R88", "R89"))
async def close(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    if not agent.advertised("sessionCapabilities.close"):
        for rid in ("R88", "R89"):
            c.skip(rid, "sessionCapabilities.close not advertised")
        return
    with c.needs("R33"):
        sid, _ = await agent.new_session()
    pending = await running_turn(ctx, agent, sid)
    with c.at("R88"):
        sent = time.monotonic()
        closing = await agent.conn.start_request("session/close", {"sessionId": sid})
        closed = await closing.wait(ctx.config.timeouts.request)
        answered = pending.done
        error: str | None = None
        stop: object = None
        try:
            stop = (await agent.finish(pending)).get("stopReason")
        except Exception as exc:  # the prompt's own answer is what R88 judges
            error = str(exc)
        _judge_close(c, "R88", sent, answered, stop, error)
        await settle(agent)  # late chunks of the closed session's turn: R105
    c.check(
        "R89",
        isinstance(closed, dict) and not {k for k in closed if k != "_meta"},
        f"session/close answered {closed!r:.100}",
    )


def _judge_close(c: Checks, rid: str, sent: float, answered: bool, stop: object, error: str | None) -> None:
    """R88: the prompt a session/close interrupted ended `cancelled` (`answered`: before the close's response)."""
    when = "before" if answered else "after"
    if error is not None:  # never an allowed outcome, however soon after the close it came
        c.failed(rid, f"the running prompt answered an error ({error}), {when} the close response")
    elif stop == "cancelled":
        # The spec asks for `cancelled`; in what order the two responses go out, it does not say.
        c.passed(rid, f"the running prompt ended 'cancelled', {when} the close response")
    elif answered and raced(sent, stop):
        c.untested(
            rid,
            f"the running prompt ended {stop!r} as the close arrived, already on its way (give a longer --cancel-prompt)",
        )
    else:
        c.failed(rid, f"the running prompt ended {stop!r}, not 'cancelled', {when} the close response")
