"""Groups beyond the official kit: tools through the client's file system and terminals, permission, the
session's working directory, and the MCP servers the client gives.

They need an agent whose model calls tools: run with `--model-env` so the agent talks to the suite's scripted
model, which calls whichever of the agent's tools fits each directive. Without it the agent's own model may
still follow the plain-language half of each prompt; what it did not do is reported NOT_TESTED or SKIPPED,
never passed.
"""

from __future__ import annotations

import json
from pathlib import Path

from ama_conformance.core.agent import Agent
from ama_conformance.groups.base import GroupContext, group
from ama_conformance.groups.mcp_sessions import (  # the suite's MCP server and its bounded waits (mcp_sessions.py)
    MCP_AFTER_PROMPT_WAIT,
    methods,
    server_spec,
    start_wait,
)

MCP_SERVER = Path(__file__).resolve().parents[1] / "servers" / "mcp_stdio.py"


def _agent_text(agent: Agent, sid: str) -> str:
    return json.dumps(agent.conn.updates_for(sid))


def _reads(agent: Agent) -> list[str]:
    return [
        str(params.get("path"))
        for method, params in agent.conn.requests_received
        if method == "fs/read_text_file" and isinstance(params, dict)
    ]


def _resolved_in_session(ctx: GroupContext, rid: str, agent: Agent, sid: str, name: str) -> None:
    """R54: which marker the agent (or its model) got says which directory it resolved `name` against."""
    reads = _reads(agent)
    seen = _agent_text(agent, sid) + (json.dumps(ctx.model.bodies()) if ctx.model else "")
    right = str(ctx.config.workspace / name) in reads or "marker-session-cwd-7f3a" in seen
    wrong = str(ctx.config.cwd / name) in reads or "marker-process-cwd-91cc" in seen
    if right or wrong:
        ctx.checks.check(
            rid,
            right and not wrong,
            f"a relative path read from the {'session' if right else 'process'} directory; fs reads: {reads}",
        )
    elif _tool_ran(ctx, agent, sid):
        ctx.checks.untested(
            rid,
            "the agent read neither file: its model called a tool, but neither file's words reached the client or "
            f"the model (the read failed, or read another path); fs reads: {reads}",
        )
    else:
        ctx.checks.untested(rid, "the agent read neither file (its model called no read tool; run with --model-env)")


def _tool_ran(ctx: GroupContext, agent: Agent, sid: str) -> bool:
    """Whether a tool ran in the session: the agent showed a tool call, or the model was sent a tool's result
    (OpenAI's `tool` message, Anthropic's `tool_result` block)."""
    if agent.conn.updates_for(sid, "tool_call") or _reads(agent):
        return True
    bodies = json.dumps(ctx.model.bodies()) if ctx.model else ""
    return '"role": "tool"' in bodies or '"type": "tool_result"' in bodies


@group("tools", ("R54", "R102", "R136.1"))
async def tools(ctx: GroupContext) -> None:
    """The client offers fs and terminals and allows what the agent asks; then rejects one write."""
    c = ctx.checks
    agent, sid = await ctx.ready(permission="allow")
    # R54: the same relative name in the session directory and in the process's own directory, with different
    # markers; which marker the agent (or its model) got says which directory it resolved against.
    name = ".acp-conformance-relative.txt"  # the only file the suite puts (briefly) in the agent's own cwd
    (ctx.config.workspace / name).write_text("marker-session-cwd-7f3a\n", encoding="utf-8")
    (ctx.config.cwd / name).write_text("marker-process-cwd-91cc\n", encoding="utf-8")
    try:
        with c.needs("R103"):
            await agent.prompt(sid, ctx.ask("read", name))
        with c.at("R54"):
            _resolved_in_session(ctx, "R54", agent, sid, name)
    finally:
        (ctx.config.cwd / name).unlink(missing_ok=True)
    with c.at("R102"):
        announced = [u for u in agent.conn.updates_for(sid, "tool_call")]
        if not announced and not _reads(agent):
            c.untested("R102", "no tool ran, so there was nothing to report")
        else:
            c.check("R102", bool(announced), f"{len(announced)} tool_call update(s) for the tools that ran")
    target = ctx.path("written.txt")
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("write", str(target), "written by the conformance suite"))
        await agent.prompt(sid, ctx.ask("run", "echo conformance-run"))
    agent.permission = "reject"
    refused = ctx.path("refused.txt")
    before = len(agent.permission_requests)
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("write", str(refused), "must not be written"))
    with c.at("R136.1"):
        if len(agent.permission_requests) == before:
            c.skip("R136.1", "the agent asked no permission for this write")
        else:
            c.check(
                "R136.1",
                not refused.exists(),
                f"after a rejection the file was {'written' if refused.exists() else 'not written'}",
            )


@group("tools-unoffered", ("R131", "R132"))
async def tools_unoffered(ctx: GroupContext) -> None:
    """The client sends no clientCapabilities at all (so: no fs, no terminal, R39) and allows everything; the
    transcript checks fail R131/R132 on any fs/* or terminal/* call."""
    c = ctx.checks
    agent, sid = await ctx.ready(capabilities=False, permission="allow")
    source = ctx.file("source.txt", "read me\n")
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("read", str(source)))
        await agent.prompt(sid, ctx.ask("write", str(ctx.path("new.txt")), "text"))
        await agent.prompt(sid, ctx.ask("run", "echo conformance-unoffered"))
    # The transcript checks fail R131/R132 on any fs/* or terminal/* call; a pass needs a tool to have run, or
    # the agent never had the occasion to break them (a vacuous pass would hide an untested rule).
    ran = bool(agent.conn.updates_for(sid, "tool_call")) or bool(agent.conn.requests_received)
    for rid in ("R131", "R132"):
        if ran:
            c.passed(rid, "tools ran, none through the client's fs or terminal, which it did not offer")
        else:
            c.untested(rid, "no tool ran: the agent's model called none (run with --model-env)")


@group("mcp", ("R60", "R62", "R61"))
async def mcp(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    one, log_one = server_spec(ctx, "conformance-one")
    two, log_two = server_spec(ctx, "conformance-two")
    with c.at("R60"):
        sid, _ = await agent.new_session(mcp=[one, two])
        connected = await agent.wait_for(lambda: "initialize" in methods(log_one), start_wait(ctx))
        if not connected:  # some agents start servers lazily, at the first prompt
            with c.needs("R103"):  # a turn that never ends is R103's, not the MCP servers'
                await agent.prompt(sid, ctx.ask("reply", "hello"))
            connected = await agent.wait_for(lambda: "initialize" in methods(log_one), MCP_AFTER_PROMPT_WAIT)
        c.check("R60", connected, f"the stdio MCP server got {methods(log_one)[:4] or 'nothing'}")
    both = await agent.wait_for(lambda: "initialize" in methods(log_two), 2.0)
    c.check("R62", both, f"the second server got {methods(log_two)[:4] or 'nothing'}")
    missing = [t for t in ("http", "sse") if not agent.advertised(f"mcpCapabilities.{t}")]
    if not missing:
        c.skip("R61", "http and sse MCP servers are both advertised")
        return
    with c.at("R61"):
        kind = missing[0]
        server = {"type": kind, "name": "conformance-remote", "url": "http://127.0.0.1:9/mcp", "headers": []}
        mark = agent.mark()
        err = await agent.error_of("session/new", {"cwd": str(ctx.config.workspace), "mcpServers": [server]})
        await agent.barrier()
        told = "conformance-remote" in json.dumps(agent.conn.updates[mark:])  # a notice or message naming it
        c.check(
            "R61",
            err is not None or told,
            f"an unadvertised {kind} server got "
            + (f"error {err.code}" if err else "a session, reported" if told else "a session without a word"),
        )
