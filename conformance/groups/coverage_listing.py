"""Coverage of what `session/list` shows of a session and what becomes of it when the session is reopened: pages
that end where the results end (R82), the additional roots it lists (R84), the title a `session_info_update` set
(R85), the validation of roots on `session/load` and `session/resume` and of entries that are not strings
(R65.1), and stored roots that a reopening leaves out staying out (R64).

A session with two additional roots and one without are opened and prompted in one process and listed; a fresh
process reopens the first without its roots and lists again, as an editor does after a restart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ama_acp.client.errors import RpcError
from ama_conformance.core.agent import AUTH_REQUIRED, Agent, AgentFailure
from ama_conformance.core.outcome import SignInNeeded
from ama_conformance.core.values import arr
from ama_conformance.groups.base import GroupContext, group

_BAD_ENTRIES: tuple[Any, ...] = (["relative/dir"], [""])


@dataclass
class Listing:
    """Every page one walk through `session/list` got."""

    pages: list[dict[str, Any]]

    def info(self, sid: str) -> dict[str, Any] | None:
        for page in self.pages:
            for info in arr(page.get("sessions")):
                if isinstance(info, dict) and info.get("sessionId") == sid:
                    return info
        return None

    @property
    def empty_tail(self) -> bool:
        """A cursor led to a last page with nothing on it: the page before promised results that did not exist."""
        return len(self.pages) > 1 and not arr(self.pages[-1].get("sessions"))


async def list_all(agent: Agent) -> Listing:
    pages: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):  # pages; a cursor loop that never ends is cut off
        page = await agent.call("session/list", {"cursor": cursor} if cursor else {})
        pages.append(page)
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            break
    return Listing(pages)


def last_title(agent: Agent, sid: str) -> tuple[bool, Any]:
    """Whether this process's agent set `sid`'s title with a `session_info_update`, and the last value it set."""
    seen, value = False, None
    for update in agent.updates_since(0, sid, frozenset({"session_info_update"})):
        if "title" in update:
            seen, value = True, update["title"]
    return seen, value


def _title_seen(agent: Agent, sid: str, listing: Listing) -> tuple[bool, str] | None:
    """(agrees, what) for the title this process set and the listing shows, or None when no title was set."""
    seen, value = last_title(agent, sid)
    if not seen:
        return None
    info = listing.info(sid) or {}
    shown = info.get("title")
    return shown == value, f"session_info_update set the title {value!r}; session/list shows {shown!r}"


def _roots(ctx: GroupContext) -> list[str]:
    roots = []
    for name in ("root-one", "root-two"):
        path: Path = ctx.config.scratch / f"{ctx.checks.group}-{name}"
        path.mkdir(exist_ok=True)
        roots.append(str(path))
    return roots


async def _rejects(agent: Agent, method: str, params: dict[str, Any], entries: tuple[Any, ...]) -> list[str]:
    """For each bad `additionalDirectories` value, what `method` answered it (a problem when it took it)."""
    taken = []
    for bad in entries:
        err = await agent.error_of(method, params | {"additionalDirectories": bad})
        if err is None:
            taken.append(f"{method} took additionalDirectories {bad!r}")
    return taken


async def _new_with_roots(ctx: GroupContext, agent: Agent, roots: list[str]) -> str:
    """`session/new` with `roots`; when the agent asks to sign in first, once, as `Agent.new_session` does."""
    cwd = str(ctx.config.workspace)
    params = {"cwd": cwd, "mcpServers": [], "additionalDirectories": roots}
    try:
        result = await agent.call("session/new", params)
    except AgentFailure as exc:
        cause = exc.__cause__
        if not isinstance(cause, RpcError) or cause.code != AUTH_REQUIRED:
            raise
        method = ctx.config.auth_method or next(iter(agent.agent_auth_methods()), None)
        err = await agent.error_of("authenticate", {"methodId": method}) if method else None
        if method is None or err is not None:
            raise SignInNeeded(f"session/new needs sign-in the suite cannot give: {cause.message}") from exc
        result = await agent.call("session/new", params)
    sid = result.get("sessionId")
    if not isinstance(sid, str) or not sid:
        raise AgentFailure(f"session/new answered no session id: {result!r:.300}")
    agent.conn.session_cwds[sid] = cwd
    return sid


@group("coverage-listing", ("R82", "R84", "R85", "R65.1", "R64"))
async def coverage_listing(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    roots = _roots(ctx) if agent.advertised("sessionCapabilities.additionalDirectories") else []
    listing = agent.advertised("sessionCapabilities.list")
    if not roots:
        for rid in ("R65.1", "R64"):
            c.skip(rid, "sessionCapabilities.additionalDirectories not advertised")
    if not listing:
        for rid in ("R82", "R84", "R85"):
            c.skip(rid, "sessionCapabilities.list not advertised")
    if not roots and not listing:
        return
    cwd = str(ctx.config.workspace)
    with c.needs("R33"):
        sid = await _new_with_roots(ctx, agent, roots) if roots else (await agent.new_session())[0]
        plain, _ = await agent.new_session()
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("reply", "a session to list"))
    walks: list[Listing] = []
    titles: list[tuple[bool, str]] = []
    if listing:
        with c.at("R84"):
            walks.append(await list_all(agent))
            info, other = walks[0].info(sid), walks[0].info(plain)
            shown = info.get("additionalDirectories") if info is not None else None
            extra = (other or {}).get("additionalDirectories")
            if info is None:
                c.untested("R84", "the session is not listed (R79's business)")
            elif extra or (not roots and shown):
                c.failed("R84", f"additionalDirectories {shown or extra!r} listed for a session that has none")
            elif not roots or shown is None:
                c.skip("R84", "the listing leaves additionalDirectories out (it may)")
            else:
                c.check("R84", shown == roots, f"the session has roots {roots}; session/list shows {shown!r}")
        titles += [t for t in [_title_seen(agent, sid, walks[-1])] if t is not None]
    taken: list[str] = []
    if roots:
        with c.at("R65.1"):
            taken = await _rejects(agent, "session/new", {"cwd": cwd, "mcpServers": []}, ("relative/dir", [5], [None]))
    await agent.close()
    method = "session/load" if agent.advertised("loadSession") else "session/resume"
    if method == "session/resume" and not agent.advertised("sessionCapabilities.resume"):
        c.skip("R64", "neither loadSession nor sessionCapabilities.resume is advertised")
        if roots:
            c.check("R65.1", not taken, "; ".join(taken) or "session/new refused each malformed additionalDirectories")
        _pages_and_titles(ctx, walks, titles, "R82", "R85")
        return
    fresh = await ctx.spawn()
    with c.needs("R36"):
        await fresh.initialize()
    reopen = {"sessionId": sid, "cwd": cwd, "mcpServers": []}
    with c.needs("R66" if method == "session/load" else "R74"):
        await fresh.call(method, reopen)  # no additionalDirectories: the stored roots must stay out
        if listing:
            walks.append(await list_all(fresh))
            titles += [t for t in [_title_seen(fresh, sid, walks[-1])] if t is not None]
    if roots:
        with c.at("R64"):
            info = walks[-1].info(sid) if listing else None
            if not listing:
                c.untested("R64", "without session/list no client can see which roots the reopened session has")
            elif not (walks[0].info(sid) or {}).get("additionalDirectories"):
                c.untested("R64", "session/list did not show the roots the session had, so it cannot show them back")
            elif info is None:
                c.untested("R64", "the reopened session is not listed (R79's business)")
            else:
                shown = arr(info.get("additionalDirectories"))
                c.check(
                    "R64",
                    not shown,
                    f"{method} without additionalDirectories; session/list then shows {shown or 'none'}",
                )
        with c.at("R65.1"):
            taken += await _rejects(fresh, method, reopen, _BAD_ENTRIES)
            c.check("R65.1", not taken, "; ".join(taken) or f"session/new and {method} refused every malformed entry")
    _pages_and_titles(ctx, walks, titles, "R82", "R85")


def _pages_and_titles(
    ctx: GroupContext, walks: list[Listing], titles: list[tuple[bool, str]], pages_id: str, title_id: str
) -> None:
    """R82 and R85 over every walk through the list (none when the list is not advertised: skipped already)."""
    c = ctx.checks
    if not walks:
        return
    if not any(len(w.pages) > 1 for w in walks):
        c.skip(pages_id, "every listing fit on one page: no cursor to judge")
    else:
        empty = [w for w in walks if w.empty_tail]
        c.check(
            pages_id,
            not empty,
            "a nextCursor led to an empty last page" if empty else "each nextCursor led to more sessions",
        )
    if not titles:
        c.skip(title_id, "the agent set no title with session_info_update")
    else:
        wrong = [what for ok, what in titles if not ok]
        c.check(title_id, not wrong, "; ".join(wrong) or titles[-1][1])
