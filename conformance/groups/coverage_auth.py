"""Coverage of sign-in: no `auth_required` after a successful `authenticate` (R49), and `auth_required` again for
new sessions after `logout`, when sessions need sign-in at all (R51)."""

from __future__ import annotations

from typing import Any

from ama_acp.client.errors import RpcError
from ama_conformance.core.agent import AUTH_REQUIRED, Agent
from ama_conformance.groups.base import GroupContext, group


def _said(err: object) -> str:
    code = getattr(err, "code", None)
    return "a session" if err is None else f"error {code}"


@group("coverage-auth", ("R49", "R51"))
async def coverage_auth(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    params = {"cwd": str(ctx.config.workspace), "mcpServers": []}
    methods = agent.agent_auth_methods()
    logout = agent.advertised("auth.logout")
    if not methods:
        c.skip("R49", "no agent-type auth method advertised")
        if not logout:
            c.skip("R51", "auth.logout not advertised")
            return
    with c.needs("R33"):
        # Whether this agent's sessions need sign-in at all (ACP lets them): what R51 expects after a logout.
        before = await agent.error_of("session/new", params)
    if methods:
        with c.at("R49"):
            await _signed_in(ctx, "R49", agent, methods, params, before)
    if not logout:
        c.skip("R51", "auth.logout not advertised")
        return
    with c.at("R51"):
        await _logged_out(ctx, "R51", agent, params, before)


async def _signed_in(
    ctx: GroupContext, rid: str, agent: Agent, methods: list[str], params: dict[str, Any], before: RpcError | None
) -> None:
    """R49: after a successful authenticate, session/new no longer answers auth_required."""
    signed = await ctx.sign_in(agent, methods, rid)
    if signed is None:
        return
    method, err = signed
    if err is not None:  # sign-in the suite cannot give: R48 reports it, nothing to judge here
        ctx.checks.untested(rid, f"authenticate {method!r} answered error {err.code}: {err.message}")
        return
    after = await agent.error_of("session/new", params)
    ctx.checks.check(
        rid,
        after is None or after.code != AUTH_REQUIRED,
        f"before authenticate session/new got {_said(before)}; after it, {_said(after)}",
    )


async def _logged_out(
    ctx: GroupContext, rid: str, agent: Agent, params: dict[str, Any], before: RpcError | None
) -> None:
    """R51: after logout, a new session needs sign-in again (when sessions needed it before any)."""
    await agent.call("logout", {})  # that it answers {} is R50's business; an error fails here
    again = await agent.error_of("session/new", params)
    if before is None or before.code != AUTH_REQUIRED:
        ctx.checks.skip(rid, f"this agent's sessions need no sign-in (session/new before any got {_said(before)})")
        return
    ctx.checks.check(
        rid, again is not None and again.code == AUTH_REQUIRED, f"after logout a new session got {_said(again)}"
    )
