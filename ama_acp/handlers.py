"""The ACP methods ama answers: thin, typed, each delegating to the session manager."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ama_acp import __version__
from ama_acp.config import Config
from ama_acp.rpc.dispatch import Dispatcher, defer
from ama_acp.rpc.errors import AcpError
from ama_acp.wire import types as w

if TYPE_CHECKING:  # built on first use (startup time): for annotations only
    from ama_acp.session.lifecycle import Lifecycle
    from ama_acp.session.manager import ClientPeer, SessionManager
    from ama_acp.session.runtime import Spawn

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1


class Handlers:
    """`initialize` must not wait for the session machinery: the manager (and everything it imports) is
    built on first use, while server.py preloads its modules in a thread after startup."""

    def __init__(self, config: Config, peer: ClientPeer, model_id: str) -> None:
        self._args = (config, peer, model_id)
        # Starts a task in the connection's task group (server.py sets it): sessions' MCP servers run there.
        self.spawn: Spawn | None = None
        self._manager: SessionManager | None = None
        self._lifecycle: Lifecycle | None = None
        self.initialized = False
        self.client_caps = w.ClientCapabilities()

    @property
    def m(self) -> SessionManager:
        if self._manager is None:
            from ama_acp.session.manager import SessionManager

            config, peer, model_id = self._args
            self._manager = SessionManager(config, peer, default_model=model_id)
            self._manager.client_caps = self.client_caps
            self._manager.spawn = self.spawn
        return self._manager

    @property
    def lifecycle(self) -> Lifecycle:
        if self._lifecycle is None:
            from ama_acp.session.lifecycle import Lifecycle

            self._lifecycle = Lifecycle(self.m)
        return self._lifecycle

    async def shutdown(self) -> None:
        if self._manager is not None:
            await self._manager.shutdown()

    def register(self, d: Dispatcher) -> None:
        d.add("initialize", w.InitializeRequest, self.initialize)
        d.add("authenticate", w.AuthenticateRequest, self.authenticate)
        d.add("session/new", w.NewSessionRequest, self.new_session)
        d.add("session/prompt", w.PromptRequest, self.prompt)
        d.add("session/cancel", w.SessionIdRequest, self.cancel, notification=True)
        d.add("session/set_mode", w.SetSessionModeRequest, self.set_mode)
        d.add("session/set_config_option", w.SetSessionConfigOptionRequest, self.set_config_option)
        d.add("_ama/session_stats", w.SessionIdRequest, self.session_stats)
        d.add("session/load", w.LoadSessionRequest, lambda req: self.lifecycle.load(req))
        d.add("session/resume", w.ResumeSessionRequest, lambda req: self.lifecycle.resume(req))
        d.add("session/list", w.ListSessionsRequest, lambda req: self.lifecycle.list(req))
        d.add("session/close", w.SessionIdRequest, lambda req: self.lifecycle.close(req))
        d.add("session/delete", w.SessionIdRequest, lambda req: self.lifecycle.delete(req))

    def on_cancel_request(self, method: str, params: Any) -> bool:
        """`$/cancel_request` on a prompt cancels the turn, which then answers `cancelled` (R25)."""
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if method != "session/prompt" or not isinstance(session_id, str) or self._manager is None:
            return False  # not a prompt, or params the prompt itself will refuse: a plain request cancel
        session = self._manager.sessions.get(session_id)
        if session is None:
            return False
        session.cancel()
        return True

    async def initialize(self, req: w.InitializeRequest) -> w.InitializeResponse:
        self.client_caps = req.client_capabilities
        if self._manager is not None:
            self._manager.client_caps = req.client_capabilities
        self.initialized = True
        log.info("client: %s", req.client_info.name if req.client_info else "unknown")
        return w.InitializeResponse(
            protocol_version=PROTOCOL_VERSION,  # the only version ama speaks (R37)
            agent_capabilities=w.AgentCapabilities(
                load_session=True,
                prompt_capabilities=w.PromptCapabilities(image=True, embedded_context=True),
                mcp_capabilities=w.McpCapabilities(http=True, sse=True),  # stdio is required of every agent
                session_capabilities=w.SessionCapabilities(
                    list={}, delete={}, resume={}, close={}, additional_directories={}
                ),
            ),
            agent_info=w.Implementation(name="ama", title="ama", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, req: w.AuthenticateRequest) -> w.Empty:
        raise AcpError.invalid_params(
            f"methodId: ama offers no authentication method ({req.method_id!r}); "
            "provider keys come from the environment or the config file"
        )

    async def new_session(self, req: w.NewSessionRequest) -> w.NewSessionResponse:
        session = self.m.new_session(req.cwd, req.additional_directories, req.mcp_servers)
        defer(session.announce_open)
        return w.NewSessionResponse(
            session_id=session.id, modes=session.mode_state(), config_options=session.config_options()
        )

    async def prompt(self, req: w.PromptRequest) -> w.PromptResponse:
        return await self.m.get(req.session_id).prompt(req.prompt)

    async def cancel(self, req: w.SessionIdRequest) -> None:
        session = self._manager.sessions.get(req.session_id) if self._manager else None
        if session is not None:  # unknown or idle: ignored (R114)
            session.cancel()

    async def set_mode(self, req: w.SetSessionModeRequest) -> w.Empty:
        await self.m.get(req.session_id).set_mode(req.mode_id)
        return w.Empty()

    async def set_config_option(self, req: w.SetSessionConfigOptionRequest) -> w.SetSessionConfigOptionResponse:
        if req.type == "boolean" or isinstance(req.value, bool):
            raise AcpError.invalid_params(f"value: {req.config_id} is a select option; ama has no boolean options")
        opts = await self.m.get(req.session_id).set_config(req.config_id, req.value)
        return w.SetSessionConfigOptionResponse(config_options=opts)

    async def session_stats(self, req: w.SessionIdRequest) -> dict[str, Any]:
        return self.m.get(req.session_id).stats()
