"""Coverage of what `session/list` shows of a session and what becomes of it when the session is reopened: pages
that end where the results end (R82), the additional roots it lists (R84), the title a `session_info_update` set
(R85), the validation of roots on `session/load` and `session/resume` and of entries that are not strings
(R65.1), and stored roots that a reopening leaves out staying out (R64).

A session with two additional roots and one without are opened and prompted in one process and listed; a fresh
process reopens the first without its roots and lists again, as an editor does after a restart."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ama_conformance.core.agent import Agent
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

    def ids(self) -> list[str]:
        return [
            str(s.get("sessionId")) for page in self.pages for s in arr(page.get("sessions")) if isinstance(s, dict)
        ]

    @property
    def empty_tail(self) -> bool:
        """A cursor led to a last page with nothing on it: the page before promised results that did not exist."""
        return len(self.pages) > 1 and not arr(self.pages[-1].get("sessions"))


async def list_all(agent: Agent, **filters: str) -> Listing:
    pages: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):  # pages; a cursor loop that never ends is cut off
        page = await agent.call("session/list", dict(filters) | ({"cursor": cursor} if cursor else {}))
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


async def _new_with_roots(agent: Agent, roots: list[str]) -> str:
    """`session/new` with `roots` (`Agent.new_session`: a sign-in asked for first is given once)."""
    sid, _ = await agent.new_session(extra={"additionalDirectories": roots})
    return sid


@dataclass
class _Seen:
    """What the group gathered on its way to the checks that judge it at the end."""

    roots: list[str]  # the session's additional roots (none when the agent does not advertise them)
    listing: bool  # whether the agent advertises session/list
    walks: list[Listing] = field(default_factory=list)
    titles: list[tuple[bool, str]] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)  # the malformed additionalDirectories an agent took

    async def walk(self, agent: Agent, sid: str) -> Listing:
        """One walk through `agent`'s list, and the title it shows of `sid` against the one `agent` set."""
        self.walks.append(await list_all(agent))
        title = _title_seen(agent, sid, self.walks[-1])
        if title is not None:
            self.titles.append(title)
        return self.walks[-1]


def _reopen_method(agent: Agent) -> str | None:
    """How a fresh process opens a stored session again, or None when the agent offers no way."""
    if agent.advertised("loadSession"):
        return "session/load"
    return "session/resume" if agent.advertised("sessionCapabilities.resume") else None


@group("coverage-listing", ("R82", "R84", "R85", "R65.1", "R64"))
async def coverage_listing(ctx: GroupContext) -> None:
    c = ctx.checks
    agent = await ctx.spawn()
    with c.needs("R36"):
        await agent.initialize()
    roots = _roots(ctx) if agent.advertised("sessionCapabilities.additionalDirectories") else []
    seen = _Seen(roots, agent.advertised("sessionCapabilities.list"))
    if not seen.roots:
        for rid in ("R65.1", "R64"):
            c.skip(rid, "sessionCapabilities.additionalDirectories not advertised")
    if not seen.listing:
        for rid in ("R82", "R84", "R85"):
            c.skip(rid, "sessionCapabilities.list not advertised")
    if not seen.roots and not seen.listing:
        return
    sid = await _first_process(ctx, agent, seen, "R84", "R65.1")
    await _reopened(ctx, seen, sid, _reopen_method(agent), "R64", "R65.1")
    _pages_and_titles(ctx, seen.walks, seen.titles, "R82", "R85")


async def _first_process(ctx: GroupContext, agent: Agent, seen: _Seen, listed: str, malformed: str) -> str:
    """A session with the roots and one without, prompted and listed (`listed`: R84); malformed roots offered to
    `session/new` (`malformed`: R65.1). The process ends; the session with the roots is returned."""
    c = ctx.checks
    with c.needs("R33"):
        sid = await _new_with_roots(agent, seen.roots) if seen.roots else (await agent.new_session())[0]
        plain, _ = await agent.new_session()
    with c.needs("R103"):
        await agent.prompt(sid, ctx.ask("reply", "a session to list"))
    if seen.listing:
        with c.at(listed):
            _roots_listed(ctx, listed, await seen.walk(agent, sid), sid, plain, seen.roots)
    if seen.roots:
        with c.at(malformed):
            params = {"cwd": str(ctx.config.workspace), "mcpServers": []}
            seen.taken = await _rejects(agent, "session/new", params, ("relative/dir", [5], [None]))
    await agent.close()
    return sid


def _roots_listed(ctx: GroupContext, rid: str, listing: Listing, sid: str, plain: str, roots: list[str]) -> None:
    """R84: the list shows the roots a session has as they were given, and none for a session without."""
    c = ctx.checks
    info, other = listing.info(sid), listing.info(plain)
    if info is None:
        c.untested(rid, "the session is not listed (R79's business)")
        return
    shown = info.get("additionalDirectories")
    extra = (other or {}).get("additionalDirectories")
    if extra or (not roots and shown):
        c.failed(rid, f"additionalDirectories {shown or extra!r} listed for a session that has none")
    elif not roots or shown is None:
        c.skip(rid, "the listing leaves additionalDirectories out (it may)")
    else:
        c.check(rid, shown == roots, f"the session has roots {roots}; session/list shows {shown!r}")


async def _reopened(
    ctx: GroupContext, seen: _Seen, sid: str, method: str | None, left_out: str, malformed: str
) -> None:
    """A fresh process reopens the session with `method` without its roots (no additionalDirectories: the stored
    ones must stay out, `left_out`: R64) and is offered malformed roots to reopen with (`malformed`: R65.1).
    Without a way to reopen, `malformed` is judged on what `session/new` took."""
    c = ctx.checks
    if method is None:
        c.skip(left_out, "neither loadSession nor sessionCapabilities.resume is advertised")
        if seen.roots:
            c.check(
                malformed,
                not seen.taken,
                "; ".join(seen.taken) or "session/new refused each malformed additionalDirectories",
            )
        return
    fresh = await ctx.spawn()
    with c.needs("R36"):
        await fresh.initialize()
    reopen = {"sessionId": sid, "cwd": str(ctx.config.workspace), "mcpServers": []}
    with c.needs("R66" if method == "session/load" else "R74"):
        await fresh.call(method, reopen)
        if seen.listing:
            await seen.walk(fresh, sid)
    if not seen.roots:
        return
    with c.at(left_out):
        _roots_left_out(ctx, left_out, seen, sid, method)
    with c.at(malformed):
        seen.taken += await _rejects(fresh, method, reopen, _BAD_ENTRIES)
        c.check(
            malformed,
            not seen.taken,
            "; ".join(seen.taken) or f"session/new and {method} refused every malformed entry",
        )


def _roots_left_out(ctx: GroupContext, rid: str, seen: _Seen, sid: str, method: str) -> None:
    """R64: after a reopening without additionalDirectories, the list shows the session with none."""
    c = ctx.checks
    if not seen.listing:
        c.untested(rid, "without session/list no client can see which roots the reopened session has")
        return
    info = seen.walks[-1].info(sid)
    if not (seen.walks[0].info(sid) or {}).get("additionalDirectories"):
        c.untested(rid, "session/list did not show the roots the session had, so it cannot show them back")
    elif info is None:
        c.untested(rid, "the reopened session is not listed (R79's business)")
    else:
        shown = arr(info.get("additionalDirectories"))
        c.check(rid, not shown, f"{method} without additionalDirectories; session/list then shows {shown or 'none'}")


def _pages_and_titles(
    ctx: GroupContext, walks: list[Listing], titles: list[tuple[bool, str]], pages_id: str, title_id: str
) -> None:
    """R82 and R85 over every walk through the list (none when the list is not advertised: skipped already)."""
    if not walks:
        return
    _pages(ctx, walks, pages_id)
    _titles(ctx, titles, title_id)


def _pages(ctx: GroupContext, walks: list[Listing], rid: str) -> None:
    if not any(len(w.pages) > 1 for w in walks):
        ctx.checks.skip(rid, "every listing fit on one page: no cursor to judge")
        return
    empty = [w for w in walks if w.empty_tail]
    ctx.checks.check(
        rid, not empty, "a nextCursor led to an empty last page" if empty else "each nextCursor led to more sessions"
    )


def _titles(ctx: GroupContext, titles: list[tuple[bool, str]], rid: str) -> None:
    if not titles:
        ctx.checks.skip(rid, "the agent set no title with session_info_update")
        return
    wrong = [what for ok, what in titles if not ok]
    ctx.checks.check(rid, not wrong, "; ".join(wrong) or titles[-1][1])
