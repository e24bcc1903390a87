"""The live sessions of one connection, and what they share: config, catalog, tools, store, the peer."""

from __future__ import annotations

import logging
import os
from typing import Any

from ama_acp.config import Config
from ama_acp.rpc.errors import AcpError
from ama_acp.session.commands import default_commands
from ama_acp.session.session import Session
from ama_acp.wire import types as w

log = logging.getLogger(__name__)


class SessionManager:
    def __init__(self, config: Config, peer: Any, *, default_model: str) -> None:
        from ama_acp.providers.catalog import Catalog

        self.config = config
        self.peer = peer
        self.default_model = default_model
        self.catalog = Catalog(config.models)
        self.sessions: dict[str, Session] = {}
        self.client_caps = w.ClientCapabilities()
        self.commands = default_commands()
        self._tools: dict[str, Any] | None = None
        self._tool_specs: list[Any] | None = None
        self._store: Any = None

    # --- shared services used by sessions -----------------------------------------------------------------

    @property
    def store(self) -> Any:
        if self._store is None:
            from ama_acp.session.store import SessionStore

            self._store = SessionStore(self.config.data_dir)
        return self._store

    def _load_tools(self) -> dict[str, Any]:
        if self._tools is None:
            from ama_acp.tools.registry import default_tools

            self._tools = {t.name: t for t in default_tools()}
        return self._tools

    def tool(self, name: str) -> Any:
        return self._load_tools().get(name)

    def tool_specs(self) -> list[Any]:
        if self._tool_specs is None:
            from ama_acp.conversation.tools import ToolSpec

            self._tool_specs = [ToolSpec(t.name, t.description, t.parameters) for t in self._load_tools().values()]
        return self._tool_specs

    def tool_context_for(self, session: Session) -> Any:
        from ama_acp.session.workspaces import tool_context

        return tool_context(self, session)

    def context_for(self, session: Session) -> Any:
        from ama_acp.context.session_context import SessionContext

        return SessionContext(self, session)

    def model_info(self, model_id: str) -> Any:
        return self.catalog.get(model_id)

    def make_provider(self, model_id: str) -> Any:
        from ama_acp.context.session_context import estimate_request
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

    async def client_request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        return await self.peer.request(method, params, timeout=timeout)

    async def maybe_compact(self, session: Session) -> None:
        """Before a request: prune at pruneAt (tier one), compact at autoCompactAt if still needed."""
        from ama_acp.agent.compaction import maybe_compact
        from ama_acp.agent.pruning import maybe_prune

        await maybe_prune(self, session)
        await maybe_compact(self, session)

    async def compact(self, session: Session, manual: bool, instructions: str = "") -> None:
        from ama_acp.agent.compaction import compact

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
        session.mcp_servers = mcp_servers
        if mcp_servers:  # accepted and recorded; connecting to them is not implemented yet (docs/protocol.md)
            names = ", ".join(str(m.get("name", "?")) for m in mcp_servers)
            log.warning("session %s: MCP servers recorded but not connected (not supported yet): %s", session_id, names)
        try:
            session.writer = self.store.create(
                Header(session_id=session_id, cwd=cwd, additional_directories=dirs, created_at=session.created_at)
            )
            from ama_acp.session.entries import ModelEntry

            session.writer.append(ModelEntry(model_id=session.model_id))
        except OSError as exc:
            session.cannot_save(exc)
        self.sessions[session_id] = session
        return session

    async def close(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        session.cancel()
        await session.wait_idle()  # the cancelled prompt answers before the close does (R88)
        session.closed = True
        if session.writer is not None:
            session.writer.close()

    async def shutdown(self) -> None:
        for session_id in list(self.sessions):
            session = self.sessions[session_id]
            session.cancel()
            if session.writer is not None:
                session.writer.close()
