"""Groups about prompt turns: completion, content types, cancellation (with and without an open permission
request), `$/cancel_request`, a second prompt during a turn."""

from __future__ import annotations

import base64
import time
from typing import Any

from ama_acp.client.connection import PendingRequest
from ama_acp.client.handlers import RpcError
from ama_conformance.core.agent import TURN_KINDS, Agent, AgentFailure
from ama_conformance.core.outcome import Blocked, describe
from ama_conformance.groups.base import GroupContext, group

# A 1×1 transparent PNG and a tiny WAV: valid media, so an agent that accepts the block type can take them.
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
_WAV = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
).decode()
_STOPS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")


@group("prompt", ("R103", "R45", "R100", "R100.1", "R100.2", "R100.3"))
async def prompt(ctx: GroupContext) -> None:
    c = ctx.checks
    agent, sid = await ctx.ready()
    with c.at("R103"):
        try:
            result = await agent.prompt(sid, ctx.ask("reply", "conformance reply one"))
        except AgentFailure as exc:
            if not isinstance(exc.__cause__, RpcError):
                raise
            # An error answers the prompt: the turn did not run (its model unreachable, a sign-in, a quota), which
            # ACP allows. What R103 asks of a turn that runs could not be seen.
            reason = f"{exc} (the agent could not run a turn: is its model reachable? see --model-env)"
            c.untested("R103", reason)
            raise Blocked("R103", reason) from exc
        stop = result.get("stopReason")
        c.check("R103", stop in _STOPS, f"the turn ended with stopReason {stop!r}")
    link = ctx.file("linked.txt", "a file the prompt links to\n")
    with c.at("R45"):
        result = await agent.prompt(
            sid,
            [
                {"type": "text", "text": "Say hello; the linked file is context only."},
                {"type": "resource_link", "uri": link.as_uri(), "name": link.name},
            ],
        )
        c.check("R45", result.get("stopReason") in _STOPS, f"a resource_link prompt ended {result.get('stopReason')!r}")
    blocks: dict[str, tuple[str, dict[str, Any]]] = {
        "R100": ("promptCapabilities.image", {"type": "image", "mimeType": "image/png", "data": _PNG}),
        "R100.1": ("promptCapabilities.audio", {"type": "audio", "mimeType": "audio/wav", "data": _WAV}),
        "R100.2": (
            "promptCapabilities.embeddedContext",
            {"type": "resource", "resource": {"uri": link.as_uri(), "text": "embedded text", "mimeType": "text/plain"}},
        ),
    }
    unadvertised: dict[str, Any] | None = None
    for rid, (cap, block) in blocks.items():
        if not agent.advertised(cap):
            c.skip(rid, f"{cap} not advertised")
            unadvertised = unadvertised or block
            continue
        with c.at(rid):
            result = await agent.prompt(sid, [{"type": "text", "text": "Describe the attachment briefly."}, block])
            c.check(
                rid, result.get("stopReason") in _STOPS, f"a {block['type']} prompt ended {result.get('stopReason')!r}"
            )
    if unadvertised is None:
        c.skip("R100.3", "every content type is advertised")
        return
    with c.at("R100.3"):
        err = await agent.error_of(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "Describe it."}, unadvertised]},
            ctx.config.timeouts.prompt,
        )
        await agent.barrier()
        c.passed(
            "R100.3",
            f"an unadvertised {unadvertised['type']} block got " + (f"error {err.code}" if err else "a normal turn"),
        )


RACE = 1.0  # seconds after a cancel within which a turn's ordinary end may have been on its way already
SETTLE_QUIET = 0.5  # after a cancelled turn's response: this long without a line from the agent ends the wait …
SETTLE_MAX = 3.0  # … which lasts this long at most


def raced(sent: float, stop: object) -> bool:
    """Whether a turn that did not end `cancelled` may be excused: it ended with a result — a valid stop reason,
    the only outcome besides `cancelled` that can have been on its way when the cancel arrived — within a second
    of the cancel. (A fast agent writes whole bursts of a turn in a millisecond, so the updates that follow a
    cancel say nothing.) An error, or a result that comes later, is never excused: an agent that goes on working
    after a cancel of the scripted model's slow answer takes far longer than that."""
    return stop in _STOPS and stop != "cancelled" and time.monotonic() - sent < RACE


async def settle(agent: Agent) -> None:
    """After a cancelled turn's response, wait until the agent has been quiet for a while (bounded), so that
    chunks of the turn it still sends arrive before anything else starts: the transcript checks (R105) then
    see them on every run, not only when they happen to beat the next request."""

    def quiet() -> bool:
        last = max((e.time for e in agent.conn.transcript if e.direction == "in"), default=0.0)
        return time.monotonic() - last >= SETTLE_QUIET

    try:
        await agent.wait_for(quiet, SETTLE_MAX)
    except Exception:  # the agent gone: nothing more can come, which is all this waits for
        return


async def running_turn(ctx: GroupContext, agent: Agent, sid: str) -> PendingRequest:
    """Start the slow prompt and wait until the turn shows it runs. Starting a turn is R103's business; a turn
    that ends on its own before it can be cancelled leaves the cancel untested (give --cancel-prompt)."""
    mark = agent.mark()
    with ctx.checks.needs("R103"):
        pending = await agent.start_prompt(sid, ctx.slow_prompt)
        # The turn shows it runs (an update, a permission request), or it has already ended: no use waiting on.
        await agent.wait_for(
            lambda: pending.done or bool(agent.updates_since(mark, sid, TURN_KINDS)) or bool(agent.held),
            ctx.config.timeouts.turn_start,
        )
    if pending.done:
        try:
            await agent.finish(pending)
        except Exception as exc:  # the turn could not run at all: an error answer, the agent gone (R103's business)
            raise Blocked("R103", describe(exc)) from exc
        raise Blocked("R103", "the turn ended before it could be cancelled: pass a longer --cancel-prompt")
    return pending


@group("cancel", ("R110", "R111", "R107", "R114", "R20"))
async def cancel(ctx: GroupContext) -> None:
    c = ctx.checks
    agent, sid = await ctx.ready()
    with c.at("R114"):
        await agent.conn.notify("session/cancel", {"sessionId": "acp-conformance-no-such-session"})
        await agent.conn.notify("session/cancel", {"sessionId": sid})  # no turn is running
        await agent.barrier()
    with c.needs("R103"):
        result = await agent.prompt(sid, ctx.ask("reply", "after an idle cancel"))
    c.check(
        "R114", result.get("stopReason") in _STOPS, "cancels with no turn running changed nothing; the next prompt ran"
    )
    pending = await running_turn(ctx, agent, sid)
    with c.at("R110"):
        sent = time.monotonic()
        await agent.conn.cancel(sid)
        try:
            result = await agent.finish(pending)
        except AgentFailure as exc:
            c.failed("R111", f"the cancelled turn ended in an error: {exc}")
            c.failed("R110", "no stop reason: the turn ended in an error")
        else:
            c.passed("R111", "the cancelled turn ended with a result, not an error")
            stop = result.get("stopReason")
            if stop == "cancelled":
                c.passed("R110", "the cancelled turn ended with stopReason 'cancelled'")
            elif raced(sent, stop):
                c.untested(
                    "R110",
                    f"the turn ended ({stop!r}) as the cancel arrived, a race the spec leaves open: give a longer --cancel-prompt",
                )
            else:
                c.failed("R110", f"the turn went on after the cancel and ended with stopReason {stop!r}")
        await settle(agent)  # late chunks of the cancelled turn: R105
    # A second prompt while a turn runs: the spec is silent; what happens is recorded.
    pending = await running_turn(ctx, agent, sid)
    with c.at("R107"):
        extra = await agent.start_prompt(sid, ctx.ask("reply", "a second prompt"))
        await agent.conn.cancel(sid)
        outcomes = []
        for p in (pending, extra):
            try:
                outcomes.append(str((await agent.finish(p)).get("stopReason")))
            except AgentFailure as exc:
                outcomes.append(str(exc))
        c.passed("R107", f"first turn: {outcomes[0]}; second prompt: {outcomes[1]}")
    pending = await running_turn(ctx, agent, sid)
    with c.at("R20"):
        await agent.conn.notify("$/cancel_request", {"requestId": pending.id})
        honoured = await agent.wait_for(lambda: pending.done, 2.0)
        if not honoured:
            await agent.conn.cancel(sid)  # it ignores $/cancel_request (a MAY): end the turn the other way
        try:
            outcome = f"a result ({(await agent.finish(pending)).get('stopReason')!r})"
            ok = True
        except AgentFailure as exc:
            outcome = str(exc)
            ok = "-32800" in outcome
        c.check(
            "R20",
            ok,
            f"$/cancel_request {'acted on' if honoured else 'not acted on (allowed)'}: the prompt got {outcome}",
        )


@group("permission-cancel", ("R113",))
async def permission_cancel(ctx: GroupContext) -> None:
    c = ctx.checks
    agent, sid = await ctx.ready(permission="hold")
    target = ctx.path("never-written.txt")
    with c.needs("R103"):
        pending = await agent.start_prompt(sid, ctx.ask("write", str(target), "must not be written"))
        asked = await agent.wait_for(lambda: bool(agent.held) or pending.done, ctx.config.timeouts.turn_start)
    if not agent.held:
        agent.release_held()
        c.skip("R113", "the agent asked no permission for a write" + ("" if asked else " in time"))
        if not pending.done:
            await agent.conn.cancel(sid)
        return
    with c.at("R113"):
        await agent.conn.cancel(sid)  # answers the held request `cancelled`, as a client must
        try:
            stop = (await agent.finish(pending)).get("stopReason")
        except AgentFailure as exc:
            stop = str(exc)
        written = target.exists()
        c.check(
            "R113",
            stop == "cancelled" and not written,
            f"cancel with a permission request open: stopReason {stop!r}, the file was {'written' if written else 'not written'}",
        )
