"""Coverage of the JSON-RPC envelope and the agent's own requests: string request ids (R11), line numbers that
start at 1 (R30.1), a client request that fails (R143), and a `$/cancel_request` the agent sends itself (R24)."""

from __future__ import annotations

import functools
import json
from typing import Any

from ama_acp.client.errors import RpcError
from ama_acp.client.handlers import RESOURCE_NOT_FOUND
from ama_conformance.core.agent import Agent, AgentFailure
from ama_conformance.core.values import arr, obj
from ama_conformance.groups.base import GroupContext, group, transcript_messages

# Ids no client of this suite uses for anything else: a plain string (for a session/new), and a digit-only
# string an agent that reads ids as numbers would answer as the integer 990001 (for an error answer, so a wrong
# id there loses no session the transcript checks would then miss).
STRING_IDS = ("acp-conformance-string-id", "990001")


def _messages(agent: Agent, direction: str) -> list[dict[str, Any]]:
    return [msg for way, msg in transcript_messages(agent) if way == direction]


def _answer_to(agent: Agent, rid: str) -> dict[str, Any] | None:
    """The agent's response whose id equals `rid` in value, whatever its JSON type (`7` answers `"7"` here)."""
    for msg in _messages(agent, "in"):
        if "method" not in msg and "id" in msg and str(msg["id"]) == rid:
            return msg
    return None


def _answered(agent: Agent, rid: str) -> bool:
    return _answer_to(agent, rid) is not None


def line_numbers(agent: Agent) -> list[tuple[str, Any]]:
    """(where, value) of every line number the agent put on the wire: fs/read_text_file `line`, and the `line` of
    each tool-call location."""
    found: list[tuple[str, Any]] = []
    for msg in _messages(agent, "in"):
        params = obj(msg.get("params"))
        if msg.get("method") == "fs/read_text_file" and params.get("line") is not None:
            found.append(("fs/read_text_file line", params["line"]))
        update = obj(params.get("update"))
        if msg.get("method") == "session/update" and update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            for loc in arr(update.get("locations")):
                if isinstance(loc, dict) and loc.get("line") is not None:
                    found.append((f"tool call {update.get('toolCallId')!r} location line", loc["line"]))
    return found


def own_cancels(agent: Agent) -> tuple[list[str], list[str]]:
    """The agent's `$/cancel_request`s: (what each named, the problems: one sent with an id, or naming an id the
    agent never used for a request of its own)."""
    mine = {json.dumps(m["id"]) for m in _messages(agent, "in") if "method" in m and "id" in m}
    named, problems = [], []
    for msg in _messages(agent, "in"):
        if msg.get("method") != "$/cancel_request":
            continue
        wanted = obj(msg.get("params")).get("requestId")
        named.append(repr(wanted))
        if "id" in msg:
            problems.append(f"a $/cancel_request sent as a request (id {msg['id']!r}), not a notification")
        if json.dumps(wanted) not in mine:
            problems.append(f"$/cancel_request names {wanted!r}, which is no request the agent sent")
    return named, problems


async def _string_id(agent: Agent, rid: str, method: str, params: dict[str, Any]) -> tuple[bool, str]:
    """(whether it is fine, what happened) for a request with the string id `rid`: answered under that same id."""
    line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    await agent.conn.send_raw(json.dumps(line))
    answered = await agent.wait_for(functools.partial(_answered, agent, rid))
    answer = _answer_to(agent, rid)
    if not answered or answer is None:
        return False, f"{method} with id {rid!r} got no response"
    if answer["id"] != rid:
        return False, f"{method} with id {rid!r} was answered under {answer['id']!r}"
    return True, f"{method} answered under {rid!r}"


@group("coverage-wire", ("R11", "R30.1", "R143", "R24"))
async def coverage_wire(ctx: GroupContext) -> None:
    c = ctx.checks
    agent, sid = await ctx.ready(permission="allow")
    with c.at("R11"):
        outcomes = [
            await _string_id(agent, STRING_IDS[1], "_acp_conformance/string_id", {}),
            await _string_id(agent, STRING_IDS[0], "session/new", {"cwd": str(ctx.config.workspace), "mcpServers": []}),
        ]
        bad = [what for ok, what in outcomes if not ok]
        c.check("R11", not bad, "; ".join(bad or [what for _, what in outcomes]))
    # R30.1: a read of a file that is there, the likeliest turn to name a line.
    source = ctx.file("lines.txt", "first line\nsecond line\n")
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("read", str(source)))
    with c.at("R30.1"):
        lines = line_numbers(agent)
        wrong = [f"{where} {value!r}" for where, value in lines if not (isinstance(value, int) and value >= 1)]
        if not lines:
            c.skip("R30.1", "the agent put no line number on the wire")
        else:
            c.check("R30.1", not wrong, "; ".join(wrong) or f"{len(lines)} line number(s), each from 1 up")
    await _own_cancel(ctx, agent, sid, "R24")
    await _client_fails(ctx, agent, sid, "R143")


async def _own_cancel(ctx: GroupContext, agent: Agent, sid: str, rid: str) -> None:
    """A cancel while the agent waits for a permission answer: an agent may withdraw its request with its own
    `$/cancel_request` (R24); the suite's client then answers it -32800."""
    c = ctx.checks
    agent.permission = "hold"
    with c.needs("R103"):
        pending = await agent.start_prompt(sid, ctx.ask("write", str(ctx.path("held.txt")), "never written"))
        await agent.wait_for(lambda: bool(agent.held) or pending.done, ctx.config.timeouts.turn_start)
    with c.at(rid):
        if not pending.done:
            await agent.conn.cancel(sid)
        try:
            outcome = f"the turn ended {(await agent.finish(pending)).get('stopReason')!r}"
            ended = True
        except AgentFailure as exc:
            outcome, ended = f"the turn ended in an error: {exc}", False
        agent.release_held()
        await agent.barrier()
        named, problems = own_cancels(agent)
        if not named:
            c.skip(rid, "the agent sent no $/cancel_request of its own")
        else:
            c.check(
                rid,
                not problems and ended,
                "; ".join([*problems, outcome]) if problems or not ended else f"it withdrew {named}; {outcome}",
            )


async def _client_fails(ctx: GroupContext, agent: Agent, sid: str, rid: str) -> None:
    """The client fails the agent's read of a file (-32002, as a client may for any request: a file it cannot
    open). The last step of the group: every later read would fail too."""
    c = ctx.checks
    target = ctx.file("unreadable.txt", "the client will not hand this out\n")

    async def refuse(params: dict[str, Any]) -> object:
        raise RpcError(RESOURCE_NOT_FOUND, f"The client could not open {params.get('path')}.")

    agent.conn.set_handler("fs/read_text_file", refuse)
    asked = len(agent.conn.requests_received)
    failure = "no stop reason"
    with c.at(rid):
        try:
            stop: Any = (await agent.prompt(sid, ctx.ask("read", str(target)))).get("stopReason")
        except AgentFailure as exc:
            stop, failure = None, str(exc)
        reads = [p for m, p in agent.conn.requests_received[asked:] if m == "fs/read_text_file"]
        if not reads:
            c.skip(rid, "the agent asked the client for no file (its model called no read tool, or it read itself)")
        elif not isinstance(stop, str):
            c.failed(rid, f"after the client failed fs/read_text_file (-32002) the prompt got {failure}")
        else:
            after = (await agent.prompt(sid, ctx.ask("reply", "after a failed read"))).get("stopReason")
            c.check(
                rid,
                isinstance(after, str),
                f"the client failed fs/read_text_file; the turn ended {stop!r}, the next one {after!r}",
            )
