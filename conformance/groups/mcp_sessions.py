"""MCP servers on `session/load` and `session/resume`: a session made in one process and reopened in a fresh one
must connect to the MCP servers the reopening request names (R69, R75.1), as `session/new` does (R60).

The waits are bounded and short, so an agent that never starts MCP servers costs seconds, not minutes: the suite
waits up to `MCP_START_WAIT` seconds after the response for the server to be started; an agent that starts
servers lazily is then given one prompt, and once that turn has ended its server must have been started within
`MCP_AFTER_PROMPT_WAIT` (it lists a server's tools before the model is asked, so by then it has long run).
The *mcp* group (conformance/groups/tools.py) uses the same bounds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ama_conformance.core.agent import Agent
from ama_conformance.groups.base import GroupContext, group

MCP_SERVER = Path(__file__).resolve().parents[1] / "servers" / "mcp_stdio.py"
MCP_START_WAIT = 10.0  # seconds after session/new, load or resume (never more than --timeout)
MCP_AFTER_PROMPT_WAIT = 2.0  # seconds after a prompt's response, for an agent that starts servers lazily


def start_wait(ctx: GroupContext) -> float:
    return min(ctx.config.timeouts.request, MCP_START_WAIT)


def server_spec(ctx: GroupContext, name: str) -> tuple[dict[str, Any], Path]:
    """A stdio MCP server entry for `mcpServers` that runs the suite's own server, and the log it writes."""
    log = ctx.config.scratch / f"mcp-{name}.log"
    log.unlink(missing_ok=True)
    server = {"name": name, "command": sys.executable, "args": [str(MCP_SERVER), "--log", str(log)], "env": []}
    return server, log


def methods(log: Path) -> list[str]:
    """The methods the server received, in order (its log; none when it never ran)."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("method"), str):
            out.append(entry["method"])
    return out


async def started(ctx: GroupContext, agent: Agent, sid: str, log: Path) -> tuple[bool, str]:
    """Whether the agent started the server at `log` (it got `initialize`) for session `sid`, prompting once
    if it had not by the bounded wait; and how (for the finding's detail)."""
    if await agent.wait_for(lambda: "initialize" in methods(log), start_wait(ctx)):
        return True, "at once"
    with ctx.checks.needs("R103"):
        await agent.prompt(sid, ctx.ask("reply", "hello"))
    if await agent.wait_for(lambda: "initialize" in methods(log), MCP_AFTER_PROMPT_WAIT):
        return True, "at the first prompt"
    return False, f"not within {start_wait(ctx):g} s of the response, nor by the end of a prompt"


async def _stored(ctx: GroupContext) -> tuple[str, set[str]] | None:
    """A session with one finished turn, made in one process that is then closed, and which of load and resume
    the agent advertises; None (and every id of the group SKIPPED) when it advertises neither."""
    first = await ctx.spawn()
    with ctx.checks.needs("R36"):
        await first.initialize()
    gates = {g for g in ("loadSession", "sessionCapabilities.resume") if first.advertised(g)}
    if not gates:
        for rid in ctx.own:
            ctx.checks.skip(rid, "neither loadSession nor sessionCapabilities.resume advertised")
        return None
    with ctx.checks.needs("R33"):
        sid, _ = await first.new_session()
    with ctx.checks.needs("R103"):
        await first.prompt(sid, ctx.ask("reply", "a session to reopen with an MCP server"))
    await first.close()
    return sid, gates


async def _fresh(ctx: GroupContext) -> Agent:
    agent = await ctx.spawn()
    with ctx.checks.needs("R36"):
        await agent.initialize()
    return agent


def _seen(ok: bool, how: str, log: Path) -> str:
    got = methods(log)[:4]
    return f"the MCP server was started {how}; it got {got}" if ok else f"the MCP server was not started ({how})"


async def _reopened_with_server(ctx: GroupContext, sid: str, method: str, rid: str, name: str) -> Agent:
    """A fresh process reopens `sid` with `method`, naming a stdio MCP server of the suite's, which it must start
    (`rid`)."""
    agent = await _fresh(ctx)
    server, log = server_spec(ctx, name)
    with ctx.checks.at(rid):
        await agent.call(method, {"sessionId": sid, "cwd": str(ctx.config.workspace), "mcpServers": [server]})
        ok, how = await started(ctx, agent, sid, log)
        ctx.checks.check(rid, ok, _seen(ok, how, log))
    return agent


@group("mcp-reopen", ("R69", "R75.1"))
async def mcp_reopen(ctx: GroupContext) -> None:
    """The session is reopened in a fresh process each time, as after an editor restart: loaded (R69), then
    resumed (R75.1), each with a stdio MCP server of the suite's in `mcpServers`."""
    c = ctx.checks
    stored = await _stored(ctx)
    if stored is None:
        return
    sid, gates = stored
    if "loadSession" not in gates:
        c.skip("R69", "loadSession not advertised")
    else:
        loaded = await _reopened_with_server(ctx, sid, "session/load", "R69", "conformance-load")
        await loaded.close()
    if "sessionCapabilities.resume" not in gates:
        c.skip("R75.1", "sessionCapabilities.resume not advertised")
        return
    await _reopened_with_server(ctx, sid, "session/resume", "R75.1", "conformance-resume")
