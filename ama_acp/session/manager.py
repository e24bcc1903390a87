"""The live sessions of one connection, and what they share: config, catalog, tools, store, the peer."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Protocol

from ama_acp.config import Config, Price
from ama_acp.conversation.messages import Usage
from ama_acp.rpc.dispatch import defer
from ama_acp.rpc.errors import AcpError
from ama_acp.session.commands import default_commands
from ama_acp.session.entries import McpServersEntry
from ama_acp.session.session import Session
from ama_acp.wire import types as w

if TYPE_CHECKING:  # imported lazily at run time (startup time), so for annotations only
    from ama_acp.conversation.tools import ToolSpec
    from ama_acp.providers.base import Provider
    from ama_acp.providers.catalog import ModelInfo
    from ama_acp.rpc.dispatch import JSONValue
    from ama_acp.rpc.peer import Params
    from ama_acp.session.runtime import Spawn
    from ama_acp.session.store import SessionStore
    from ama_acp.tools.base import Tool

log = logging.getLogger(__name__)


class ClientPeer(Protocol):
    """The connection to the client as sessions use it (rpc/peer.py `Peer`, or `ama -p`'s stand-in)."""

    async def notify(self, method: str, params: Params) -> None: ...

    async def request(self, method: str, params: Params, timeout: float | None = None) -> JSONValue: ...


class SessionManager:
    def __init__(self, config: Config, peer: ClientPeer, *, default_model: str) -> None:
        from ama_acp.providers.catalog import Catalog

        self.config = config
        self.peer = peer
        self.default_model = default_model
        self.catalog = Catalog(config.models)
        self.sessions: dict[str, Session] = {}
        self.client_caps = w.ClientCapabilities()
        self.commands = default_commands()
        self.spawn: Spawn | None = None  # the connection's task group (MCP servers live there); None under ama -p
        self._tools: dict[str, Tool] | None = None
        self._tool_specs: list[ToolSpec] | None = None
        self._store: SessionStore | None = None

    # --- shared services used by sessions -----------------------------------------------------------------

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            from ama_acp.session.store import SessionStore

            self._store = SessionStore(self.config.data_dir)
        return self._store

    def _load_tools(self) -> dict[str, Tool]:
        if self._tools is None:
            from ama_acp.tools.registry import default_tools

            self._tools = {t.name: t for t in default_tools()}
        return self._tools

    def tool(self, name: str) -> Tool | None:
        return self._load_tools().get(name)

    def tool_specs(self) -> list[ToolSpec]:
        if self._tool_specs is None:
            from ama_acp.conversation.tools import ToolSpec

            self._tool_specs = [ToolSpec(t.name, t.description, t.parameters) for t in self._load_tools().values()]
        return self._tool_specs

    def model_info(self, model_id: str) -> ModelInfo | None:
        return self.catalog.get(model_id)

    def context_window(self, model_id: str) -> int | None:
        info = self.catalog.get(model_id)
        return info.context_window if info else None

    def price(self, model_id: str, usage: Usage | None) -> Price | None:
        """The catalog's price for one request (long-context tiers depend on the usage); injected into the
        session's billing, so the context package never imports the catalog."""
        from ama_acp.providers.catalog import price_for

        info = self.catalog.get(model_id)
        return price_for(info, usage) if info else None

    def make_provider(self, model_id: str) -> Provider:
        from ama_acp.context.request_size import estimate_request
        from ama_acp.providers.resolve import make_provider

        return make_provider(self.config, model_id, self.catalog.get(model_id), estimate_request)

    def model_choices(self, current: str) -> list[tuple[str, str]]:
        """Models worth offering: those whose provider has credentials, configured ones, and the current."""
        from ama_acp.providers.resolve import has_credentials

        seen: dict[str, str] = {}
        for info in self.catalog.all():
            if info.id == current or has_credentials(self.config, info.provider):
                seen[info.id] = info.name or info.id
        seen.setdefault(current, current)
        return list(seen.items())

    async def send_update(self, session_id: str, update: w.SessionUpdate) -> None:
        await self.peer.notify("session/update", w.SessionNotification(session_id=session_id, update=update))

    async def client_request(self, method: str, params: Params, timeout: float | None = None) -> object:
        return await self.peer.request(method, params, timeout=timeout)

    async def before_request(self, session: Session) -> None:
        from ama_acp.session.compacting import before_request

        await before_request(self, session)

    async def compact(self, session: Session, manual: bool, instructions: str = "") -> None:
        from ama_acp.session.compacting import compact

        await compact(self, session, manual=manual, instructions=instructions)

    # --- lifecycle ----------------------------------------------------------------------------------------

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise AcpError.session_not_found(session_id)
        return session

    def check_dirs(self, cwd: str, additional: list[str] | None) -> list[str]:
        if not os.path.isabs(cwd):
            raise AcpError.invalid_params(f"cwd: must be an absolute path, got {cwd!r}")
        if not os.path.isdir(cwd):
            raise AcpError.invalid_params(f"cwd: no such directory {cwd!r}")
        dirs: list[str] = []
        for i, d in enumerate(additional or []):
            if not isinstance(d, str) or not d or not os.path.isabs(d):
                raise AcpError.invalid_params(f"additionalDirectories[{i}]: must be an absolute path, got {d!r}")
            if not os.path.isdir(d):
                raise AcpError.invalid_params(f"additionalDirectories[{i}]: no such directory {d!r}")
            if d != cwd and d not in dirs:
                dirs.append(d)
        return dirs

    def new_session(self, cwd: str, additional: list[str] | None, mcp_servers: list[dict[str, Any]]) -> Session:
        from ama_acp.session.entries import Header
        from ama_acp.session.store import new_session_id

        dirs = self.check_dirs(cwd, additional)
        session_id = new_session_id()
        session = Session(
            self,
            session_id=session_id,
            cwd=cwd,
            additional_directories=dirs,
            mode=self.config.mode,
            model_id=self.default_model,
        )
        try:
            session.writer = self.store.create(
                Header(session_id=session_id, cwd=cwd, additional_directories=dirs, created_at=session.created_at)
            )
            from ama_acp.session.entries import ModelEntry

            session.writer.append(ModelEntry(model_id=session.model_id))
        except OSError as exc:
            session.cannot_save(exc)
        self.sessions[session_id] = session
        self.connect_mcp(session, mcp_servers)
        return session

    def connect_mcp(self, session: Session, servers: list[dict[str, Any]]) -> None:
        """Start the session's MCP servers in the background, once the opening response is out (so nothing
        about them reaches the client before the session id does): the open never waits for them."""
        from ama_acp.session.mcp import start

        mcp = start(session, servers)
        if mcp is None:
            return
        session.mcp = mcp
        session.persist(McpServersEntry(servers=[spec.public() for spec in mcp.specs]))  # names, no secrets
        spawn = self.spawn
        if spawn is None:
            log.warning("session %s: MCP servers cannot run here (no background task group)", session.id)
            return

        async def begin() -> None:
            spawn(mcp.run)

        try:
            defer(begin)
        except LookupError:  # not under the RPC peer: start now
            spawn(mcp.run)

    async def close(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        session.cancel()
        await session.wait_idle()  # the cancelled prompt answers before the close does (R88)
        await _release(session)

    async def shutdown(self) -> None:
        for session_id in list(self.sessions):
            session = self.sessions[session_id]
            session.cancel()
            await _release(session)


async def _release(session: Session) -> None:
    """What a session holds goes with it: its MCP servers (no process outlives the session) and its file."""
    session.closed = True
    if session.mcp is not None:
        await session.mcp.aclose()
    if session.writer is not None:
        session.writer.close()
