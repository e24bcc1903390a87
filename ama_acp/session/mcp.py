"""One session's MCP servers as the session and the person see them (docs/tools.md "MCP servers").

The connections themselves (starting servers, listing and calling tools, noticing a crash) are `ama_acp/mcp/`,
which knows no ACP. This module puts their tools beside ama's own: a `Tool` adapter per MCP tool, so a call
goes through the same loop, approval and updates; it tells the person once about a server that failed; it
resends the meter when the servers' declarations change the prefix; and it breaks the prefix down per server
for `/context` and the stats. The `mcp` SDK is imported only when a session has servers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import anyio

from ama_acp.conversation.messages import ImagePart
from ama_acp.conversation.tools import ToolSpec
from ama_acp.secrets import is_secret, register_secret_values
from ama_acp.session.facets import Identified, ReportsUsage, Rooted
from ama_acp.session.mcp_resources import resource_tools
from ama_acp.session.runtime import Configured, KnowsClient
from ama_acp.tools.base import Location, Tool, ToolKind, ToolResult
from ama_acp.wire.warning import takes_notices, warning

if TYPE_CHECKING:
    from ama_acp.mcp.config import McpServerSpec
    from ama_acp.mcp.hub import McpHub, ServerProblem
    from ama_acp.mcp.tools import McpTool
    from ama_acp.tools.context import ToolContext

log = logging.getLogger(__name__)

PREFIX = "mcp__"


# The call's own deadline (`[mcp] call_timeout`, enforced by the MCP request) fires first; this margin keeps the
# generic deadline of tools/registry.py from cutting it short while the server is told to cancel.
DEADLINE_MARGIN = 5.0


class McpRuntime(Configured, KnowsClient, Protocol):
    """The `[mcp]` table, and whether the client takes notices (session/manager.py `SessionManager`)."""


class McpSession(Identified, Rooted, ReportsUsage, Protocol):
    """What the servers of a session read of it, and how they speak to the person (session/live.py)."""

    @property
    def closed(self) -> bool: ...

    @property
    def rt(self) -> McpRuntime: ...

    async def announce_commands(self) -> None: ...


class McpToolAdapter:
    """An MCP tool as one of ama's tools (the `Tool` protocol of tools/base.py)."""

    def __init__(self, tool: McpTool, hub: McpHub, *, trusted: bool = False) -> None:
        self.tool = tool
        self._hub = hub
        self.name = tool.wire_name
        self.description = tool.description
        self.parameters = tool.input_schema
        # readOnlyHint is the server's own claim (the MCP specification calls annotations untrusted hints): a
        # read, allowed in every mode, only for a server the person named in `[mcp] trusted_servers`. Any
        # other tool may change the world: asked like a command in manual and accept_edits, refused in read_only
        # (permissions.py decides by kind).
        self.kind: ToolKind = "read" if tool.read_only and trusted else "execute"

    def deadline_seconds(self, args: object) -> float:
        """The registry's deadline for this call (tools/base.py `HasDeadline`): `[mcp] call_timeout` and a
        margin, not the generic 60 s, so a configured 90 s is honoured."""
        return self._hub.call_timeout + DEADLINE_MARGIN

    def title(self, args: dict[str, object]) -> str:
        return f"{self.tool.server}: {self.tool.title or self.tool.name}"

    def locations(self, args: dict[str, object], cwd: str) -> list[Location]:
        return []

    async def run(self, args: dict[str, object], ctx: ToolContext) -> ToolResult:
        result = await self._hub.call(self.name, args)
        images = [ImagePart(c.data, c.mime_type or "image/png") for c in result.content if c.kind == "image" and c.data]
        return ToolResult(result.text, is_error=result.is_error, images=images)


class SessionMcp:
    def __init__(self, session: McpSession, specs: list[McpServerSpec], problems: list[str]) -> None:
        from ama_acp.mcp.hub import McpHub  # the SDK comes with it: only for sessions with servers

        cfg = session.rt.config.mcp
        self._session = session
        self.specs = specs
        self.hub = McpHub(
            specs,
            call_timeout=cfg.call_timeout,
            cwd=session.cwd,  # ACP gives stdio servers no directory: the project's is what a person expects
            on_problem=self._problem,
            on_tools_changed=self._tools_changed,
            on_notice=self._notice,
            on_prompts_changed=self._prompts_changed,
        )
        self._trusted = frozenset(cfg.trusted_servers)
        self._start_timeout = cfg.start_timeout
        self._problems = list(problems)  # items of mcpServers that did not decode: told with the first update
        self._told: set[str] = set()
        self._waited = False
        self._adapters: dict[str, McpToolAdapter] = {}
        self._adapters_for = -1

    # --- tools ------------------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        return self.hub.version

    def _refresh(self) -> None:
        if self._adapters_for != self.hub.version:
            self._adapters = {
                t.wire_name: McpToolAdapter(t, self.hub, trusted=t.server in self._trusted) for t in self.hub.tools()
            }
            self._adapters_for = self.hub.version

    def tool(self, name: str) -> Tool | None:
        if not name.startswith(PREFIX):
            return next((t for t in resource_tools(self.hub) if t.name == name), None)
        self._refresh()
        return self._adapters.get(name)

    def tool_specs(self) -> list[ToolSpec]:
        self._refresh()
        specs = [ToolSpec(a.name, a.description, a.parameters) for a in self._adapters.values()]
        return specs + [ToolSpec(t.name, t.description, t.parameters) for t in resource_tools(self.hub)]

    def server_names(self) -> list[str]:
        """Every server of this open, ready or not (session/accounting/held_figure.py `ServerStatus`)."""
        return [spec.name for spec in self.specs]

    def starting(self) -> list[str]:
        """The servers still starting: neither ready nor failed (nor closed) yet."""
        return [name for name, state in self.hub.servers() if state == "starting"]

    def by_server(self) -> dict[str, list[ToolSpec]]:
        """The declarations of each server's tools (every configured server, even one with none)."""
        self._refresh()
        out: dict[str, list[ToolSpec]] = {spec.name: [] for spec in self.specs}
        for a in self._adapters.values():
            out.setdefault(a.tool.server, []).append(ToolSpec(a.name, a.description, a.parameters))
        # The two resource tools are declared because of the first ready server that offers resources: counted
        # with it, so `/context` and a load's check of the held figure see them come and go with that server.
        resources = resource_tools(self.hub)
        if resources:
            first = self.hub.resource_servers()[0]
            out.setdefault(first, []).extend(ToolSpec(t.name, t.description, t.parameters) for t in resources)
        return out

    # --- lifecycle --------------------------------------------------------------------------------------

    async def run(self) -> None:
        """The hub's life (a background task of the connection): never raises."""
        try:
            await self.hub.run()
        except Exception:  # a bug of ours must not take the connection's task group down
            log.exception("session %s: the MCP hub failed", self._session.id)

    async def before_first_request(self) -> None:
        """The first model request waits for servers still starting, up to `mcp.start_timeout`; those not
        ready by then are told and left out of that request (they join later requests once ready)."""
        for problem in self._problems:
            await self._tell(problem, f"MCP server configuration: {problem}")
        self._problems = []
        if self._waited:
            return
        self._waited = True
        late = await self.hub.wait_ready(self._start_timeout)
        for name in late:
            await self._tell(
                f"late:{name}",
                f"MCP server {name!r} was not ready after {self._start_timeout:g} s; its tools are left out of this "
                "request and join the next ones once it is.",
            )

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.hub.aclose()
            except Exception:
                log.exception("session %s: stopping its MCP servers failed", self._session.id)

    # --- reports ----------------------------------------------------------------------------------------

    async def _problem(self, problem: ServerProblem) -> None:
        # The hub has logged the reason and the stderr tail; here the person is told.
        await self._tell(
            f"problem:{problem.server}",
            f"MCP server {problem.server!r} {problem.reason}; its tools are withdrawn and the session goes on.",
        )

    async def _notice(self, server: str, topic: str, text: str) -> None:
        # Once per server and topic for the session (a re-list that drops the same tools again says nothing new;
        # its prompts failing to list is news of its own).
        await self._tell(f"notice:{server}" if topic == "tools" else f"notice:{server}:{topic}", text)

    async def _tools_changed(self) -> None:
        # The declarations are part of the prefix: the figure moved (before the first prompt too).
        try:
            await self._session.report_usage()
        except Exception:
            log.exception("session %s: could not report the meter after an MCP tools change", self._session.id)

    async def _prompts_changed(self) -> None:
        # The servers' prompts are slash commands (session/mcp_prompts.py): the editor's menu follows them.
        if self._session.closed:
            return
        try:
            await self._session.announce_commands()
        except Exception:
            log.exception("session %s: could not send its commands after an MCP prompts change", self._session.id)

    async def _tell(self, key: str, text: str) -> None:
        """Once per key: a `notice` when the client shows notices, else an agent message."""
        if key in self._told or self._session.closed:
            return
        self._told.add(key)
        try:
            await self._session.send(warning(takes_notices(self._session.rt.client_caps), "MCP server", text))
        except Exception:
            log.exception("session %s: could not tell the person about an MCP server", self._session.id)


# Headers that carry credentials whatever their value looks like.
_SECRET_HEADERS = frozenset({"AUTHORIZATION", "PROXY_AUTHORIZATION", "COOKIE"})


def secret_values(specs: list[McpServerSpec]) -> list[str]:
    """The values in the servers' env and headers that are credentials: env variables with a secret-looking
    name (the same rule as ama's own environment), credential headers and secret-looking header names, and the
    token of a `Bearer …`/`Basic …` value; and what `public()` leaves out of arguments and URLs (mcp/scrub.py).
    Not every value: redacting a PYTHONPATH everywhere would garble logs."""
    out: list[str] = []
    for spec in specs:
        out.extend(spec.hidden_values())
        for name, value in spec.env:
            if is_secret(name):
                out.append(value)
        for name, value in spec.headers:
            key = name.upper().replace("-", "_")
            if key in _SECRET_HEADERS or is_secret(key):
                out.append(value)
                scheme, _, token = value.partition(" ")
                if token and scheme.lower() in ("bearer", "basic", "token"):
                    out.append(token)
    return out


def start(session: McpSession, raw: list[dict[str, object]]) -> SessionMcp | None:
    """The session's servers, parsed from the editor's `mcpServers` (None when there are none)."""
    if not raw:
        return None
    from ama_acp.mcp.config import parse_servers

    specs, problems = parse_servers(raw)
    if not specs and not problems:
        return None
    # Before anything can log or store them: a server's stderr, a tool result echoing its environment.
    register_secret_values(secret_values(specs))
    return SessionMcp(session, specs, problems)
