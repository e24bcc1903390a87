"""The ACP methods ama answers: thin, typed, each delegating to the session manager."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ama_acp import __version__
from ama_acp.config import Config
from ama_acp.rpc.dispatch import Dispatcher, defer
from ama_acp.rpc.errors import AcpError, clip
from ama_acp.wire import types as w

if TYPE_CHECKING:  # built on first use (startup time): for annotations only
    from ama_acp.session.lifecycle import Lifecycle
    from ama_acp.session.manager import ClientPeer, SessionManager
    from ama_acp.session.runtime import Spawn

log = logging.getLogger(__name__)

# Re-reads the configuration and the credentials: the config, and the model it makes usable (None) with why.
Reload = Callable[[], tuple[Config, str | None, str]]

# Sign-in (ACP authentication): an agent method, `authenticate` re-reads credentials and succeeds once a model
# is usable; a terminal method (only for clients that can run one, R42), which runs `<agent command> setup`.
AGENT_METHOD = w.AuthMethod(
    id="ama-credentials",
    name="Use ama's configured model",
    description="ama re-reads its config, credentials file (written by `ama setup`) and environment.",
)
TERMINAL_METHOD = w.AuthMethod(
    type="terminal",
    id="ama-setup",
    name="Set up ama in a terminal",
    description="Runs `ama setup`: choose a provider, paste a key (stored 0600, never in the config), pick a model.",
    args=["setup"],
)

# The older convention (Zed before `auth.terminal`; the ACP registry's validator still sends it): the client says
# `clientCapabilities._meta["terminal-auth"]: true`, and runs the command the method's `_meta["terminal-auth"]`
# names. `python -m ama_acp` is ama however it was installed (a venv's script, uvx, pipx).
LEGACY_TERMINAL_METHOD = msgspec.structs.replace(
    TERMINAL_METHOD,
    meta={
        "terminal-auth": {
            "command": sys.executable,
            "args": ["-m", "ama_acp", *(TERMINAL_METHOD.args or [])],
            "label": "ama setup",
        }
    },
)

PROTOCOL_VERSION = 1


def legacy_terminal_auth(caps: w.ClientCapabilities) -> bool:
    """Whether the client set `_meta["terminal-auth"]: true` (read with a type check: `_meta` is free-form)."""
    return isinstance(caps.meta, dict) and caps.meta.get("terminal-auth") is True


class Handlers:
    """`initialize` must not wait for the session machinery: the manager (and everything it imports) is
    built on first use, while server.py preloads its modules in a thread after startup."""

    def __init__(
        self, config: Config, peer: ClientPeer, model_id: str | None, reload: Reload | None = None, why: str = ""
    ) -> None:
        self._args = (config, peer, model_id)
        self._reload = reload
        self._no_model_why = why or "no model is configured: run `ama setup` in a terminal, then sign in again"
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
            # Without a usable model only list/delete/close reach here (new/load/resume answer auth_required):
            # the manager is then built for them, and rebuilt by a successful authenticate.
            self._manager = SessionManager(config, peer, default_model=model_id or "")
            self._manager.client_caps = self.client_caps
            self._manager.spawn = self.spawn
        return self._manager

    @property
    def lifecycle(self) -> Lifecycle:
        if self._lifecycle is None:
            from ama_acp.session.lifecycle import Lifecycle

            self._lifecycle = Lifecycle(self.m)
        return self._lifecycle

    def prepare_first_prompt(self) -> None:
        """Called in server.py's preload thread, after the session modules: see manager.prepare_first_prompt.
        It touches no state of this object (the model it reads is the one ama started with)."""
        from ama_acp.session.manager import prepare_first_prompt

        config, _, model_id = self._args
        prepare_first_prompt(config, model_id)

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
        d.add("session/load", w.LoadSessionRequest, self.load)
        d.add("session/resume", w.ResumeSessionRequest, self.resume)
        d.add("session/fork", w.ForkSessionRequest, self.fork)
        d.add("session/list", w.ListSessionsRequest, lambda req: self.lifecycle.list(req))
        d.add("session/close", w.SessionIdRequest, lambda req: self.lifecycle.close(req))
        d.add("session/delete", w.SessionIdRequest, lambda req: self.lifecycle.delete(req))

    async def load(self, req: w.LoadSessionRequest) -> w.LoadSessionResponse:
        self.require_model()
        return await self.lifecycle.load(req)

    async def resume(self, req: w.ResumeSessionRequest) -> w.LoadSessionResponse:
        self.require_model()
        return await self.lifecycle.resume(req)

    async def fork(self, req: w.ForkSessionRequest) -> w.NewSessionResponse:
        self.require_model()
        return await self.lifecycle.fork(req)

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
                    list={}, delete={}, resume={}, close={}, additional_directories={}, fork={}
                ),
            ),
            agent_info=w.Implementation(name="ama", title="ama", version=__version__),
            auth_methods=self._auth_methods(),
        )

    def _auth_methods(self) -> list[w.AuthMethod]:
        methods: list[w.AuthMethod] = [AGENT_METHOD]
        if self.client_caps.auth.terminal:  # only to a client that can run it (R42)
            methods.append(TERMINAL_METHOD)
        elif legacy_terminal_auth(self.client_caps):
            methods.append(LEGACY_TERMINAL_METHOD)
        return methods

    def require_model(self) -> None:
        """Sessions need a usable model: without one, `auth_required` with the sign-in methods (session/new,
        load and resume), so the editor can offer them instead of a session that cannot answer."""
        if self._args[2] is None:
            raise AcpError.auth_required(self._no_model_why, self._methods_data())

    def _methods_data(self) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = msgspec.to_builtins(self._auth_methods())
        return data

    async def authenticate(self, req: w.AuthenticateRequest) -> w.Empty:
        if req.method_id == TERMINAL_METHOD.id:
            raise AcpError.invalid_params(
                f"methodId: {TERMINAL_METHOD.id!r} is a terminal method: the client runs `ama setup` itself"
            )
        if req.method_id != AGENT_METHOD.id:
            raise AcpError.invalid_params(f"methodId: ama has no sign-in method {clip(req.method_id)!r}")
        if self._reload is None:
            self.require_model()
            return w.Empty()
        config, model_id, why = self._reloaded(self._reload)
        _, peer, before = self._args
        self._args = (config, peer, model_id)
        if self._manager is not None and not self._manager.has_sessions():
            await self._manager.shutdown()  # built without a model (list/delete): build it again with one
            self._manager, self._lifecycle = None, None
        elif self._manager is not None:
            self._manager.default_model = model_id  # live sessions keep theirs; new ones get this
        log.info("authenticate: model %s (%s)%s", model_id, why, "" if before is None else f", was {before}")
        return w.Empty()

    def _reloaded(self, reload: Reload) -> tuple[Config, str, str]:
        """The configuration read again, with the model it now gives; `auth_required` while it gives none."""
        from ama_acp.errors import ConfigError

        try:
            config, model_id, why = reload()
        except ConfigError as exc:
            why = f"ama's configuration cannot be read: {exc}"
            raise AcpError.auth_required(why, self._methods_data()) from None
        if model_id is None:
            self._no_model_why = why
            log.info("authenticate: still no usable model (%s)", why)
            raise AcpError.auth_required(why, self._methods_data())
        return config, model_id, why

    async def new_session(self, req: w.NewSessionRequest) -> w.NewSessionResponse:
        self.require_model()
        manager = self.m
        opened = manager.open_session(req.cwd, req.additional_directories, req.mcp_servers)
        # The Session is built and announced after the response (manager.py: the first session/new of a fresh
        # process then waits for none of the session machinery's imports).
        defer(functools.partial(manager.finish_open, opened.session_id))
        return opened

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
        session = self.m.get(req.session_id)
        stats: dict[str, Any] = session.ctx.stats()
        stats["tasks"] = session.tasks.stats()  # each task of the `task` tool: its own meter and cost
        from ama_acp.session.tasks.figures import by_agent

        stats["external"] = {"byAgent": by_agent(stats["tasks"])}  # per external agent, earlier connections too
        return stats
