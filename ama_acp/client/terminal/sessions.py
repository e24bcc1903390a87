"""Which session the client works in: a new one, one loaded (`--load ID`: the agent replays it) or resumed
(`--resume ID`: no replay), and `--list` of the stored ones.

Each is offered only when the agent advertised it in `initialize` (`loadSession`, `sessionCapabilities.list`,
`sessionCapabilities.resume`); asking an agent for what it did not offer is refused here with a sentence, not
sent.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ama_acp.client.display.agent_types import ListedSession, lenient
from ama_acp.client.display.content import objects
from ama_acp.client.terminal.slash import Requester
from ama_acp.errors import ProtocolError
from ama_acp.rpc.dispatch import JSONObject

MAX_LIST_PAGES = 100  # an agent whose cursor never ends cannot keep the client listing forever


class NotOffered(ProtocolError):
    """The person asked for something the agent did not advertise."""


class SessionAgent(Requester, Protocol):
    session_cwds: dict[str, str]

    async def new_session(self, cwd: str, mcp_servers: Sequence[object] | None = None) -> JSONObject: ...


@dataclass(frozen=True)
class Opened:
    session_id: str
    result: JSONObject
    how: str  # new | load | resume


def capabilities(init: JSONObject) -> JSONObject:
    caps = init.get("agentCapabilities")
    return caps if isinstance(caps, dict) else {}


def offers(init: JSONObject, what: str) -> bool:
    """Whether the agent advertised `what`: load, list or resume."""
    caps = capabilities(init)
    if what == "load":
        return caps.get("loadSession") is True
    session = caps.get("sessionCapabilities")
    return isinstance(session, dict) and isinstance(session.get(what), dict)


def _require(init: JSONObject, what: str, flag: str) -> None:
    if not offers(init, what):
        raise NotOffered(f"the agent does not offer session/{what}, so {flag} cannot work with it")


async def open_session(
    conn: SessionAgent, init: JSONObject, cwd: str, *, load: str | None = None, resume: str | None = None
) -> Opened:
    """session/new, session/load or session/resume, as asked."""
    if load is not None:
        _require(init, "load", "--load")
        result = await conn.request("session/load", {"sessionId": load, "cwd": cwd, "mcpServers": []})
        conn.session_cwds[load] = cwd
        return Opened(load, result if isinstance(result, dict) else {}, "load")
    if resume is not None:
        _require(init, "resume", "--resume")
        result = await conn.request("session/resume", {"sessionId": resume, "cwd": cwd, "mcpServers": []})
        conn.session_cwds[resume] = cwd
        return Opened(resume, result if isinstance(result, dict) else {}, "resume")
    result = await conn.new_session(cwd)
    session_id = result.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise ProtocolError(f"session/new answered without a sessionId: {result!r}")
    return Opened(session_id, result, "new")


async def list_sessions(conn: SessionAgent, init: JSONObject, cwd: str | None) -> list[JSONObject]:
    """Every session the agent lists (all pages), for `cwd` when given."""
    _require(init, "list", "--list")
    found: list[JSONObject] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        params: dict[str, str] = {} if cwd is None else {"cwd": cwd}
        if cursor is not None:
            params["cursor"] = cursor
        answer = await conn.request("session/list", params)
        page = answer if isinstance(answer, dict) else {}
        found += [s for s in objects(page.get("sessions")) if isinstance(s.get("sessionId"), str)]
        cursor = given if isinstance(given := page.get("nextCursor"), str) else None
        if not cursor:
            break
    return found


def session_lines(sessions: list[JSONObject], cwd: str | None, clean: Callable[[str], str]) -> list[str]:
    """One line per session: id, last activity, title, and the folder when it is not `cwd`. `clean` makes the
    agent's strings safe to print (no escape sequences reach the terminal)."""
    if not sessions:
        return ["no sessions" + (f" in {cwd}" if cwd else "")]
    lines = []
    for s in sessions:
        listed = lenient(ListedSession, s)
        parts = [clean(listed.session_id)]
        if listed.updated_at is not None:
            parts.append(clean(listed.updated_at))
        parts.append(clean(listed.title) if listed.title else "(untitled)")
        where = listed.cwd
        if where is not None and (cwd is None or os.path.normpath(where) != os.path.normpath(cwd)):
            parts.append(f"[{clean(where)}]")
        lines.append("  ".join(parts))
    return lines
