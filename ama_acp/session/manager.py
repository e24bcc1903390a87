"""The live sessions of one connection, and what they share: config, catalog, tools, store, the peer.

session/new is answered from what this module imports itself (the id, the modes, the options) and the session's
file, made before the answer with a few small modules (session/store/early.py: one exclusive create and one
write), so an id the editor holds always names a session a later process can load; the session machinery
(session.py and everything it imports, ~50 ms of imports), the file's two fsyncs and the MCP servers come after
the response (`open_session`, then `finish_open`), so the first session/new of a fresh ama does not wait for
server.py's preload thread to import them.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ama_acp.config import Config, Price
from ama_acp.conversation.messages import Usage
from ama_acp.errors import StoreError
from ama_acp.rpc.dispatch import defer
from ama_acp.rpc.errors import AcpError
from ama_acp.session import options
from ama_acp.session.options import SessionSetup
from ama_acp.session.store.cwd import normal_cwd
from ama_acp.wire import types as w
from ama_acp.wire.warning import takes_notices, warning

if TYPE_CHECKING:  # imported lazily at run time (startup and session/new time), so for annotations only
    from ama_acp.conversation.tools import ToolSpec
    from ama_acp.providers.base import Provider
    from ama_acp.providers.catalog import ModelInfo
    from ama_acp.rpc.dispatch import JSONValue
    from ama_acp.rpc.peer import Params
    from ama_acp.session.commands import Commands
    from ama_acp.session.learnt_windows import LearntWindows
    from ama_acp.session.live import Session
    from ama_acp.session.runtime import Spawn
    from ama_acp.session.store.early import Reserved
    from ama_acp.session.store.entries import Header
    from ama_acp.session.store.handover import Answer
    from ama_acp.session.store.session_store import SessionStore
    from ama_acp.tools.base import Tool

log = logging.getLogger(__name__)

# The thought level a new Session starts at (SessionSetup's default): what session/new answers before the Session
# exists. announce_open sends the session's own options right after, and a test checks the two agree.
OPENING_THOUGHT_LEVEL = options.DEFAULT_THOUGHT_LEVEL


def new_session_id() -> str:
    """store.new_session_id's format (`ses_` + epoch milliseconds in hex + 48 random bits), made here so that
    session/new imports neither the store nor `secrets` and `shutil` (~25 ms); a test checks the two agree."""
    return f"ses_{time.time_ns() // 1_000_000:012x}{os.urandom(6).hex()}"


def prepare_first_prompt(config: Config, model_id: str | None) -> None:
    """What the first prompt of `model_id` does once per process, done ahead (server.py's preload thread calls
    it, through Handlers.prepare_first_prompt): its provider built (the provider's modules imported) and, when
    that provider talks HTTP, httpcore imported (providers/exchange.py: a model request goes straight over it, not
    through httpx's client layer) and, for an https URL, the verified TLS context made (the CA bundle: ~60 ms; a plain http
    URL's requests never load it). Nothing is kept but the modules and that process-wide context: each session
    builds its own provider."""
    if not model_id:  # no usable model yet: sign-in first, and which provider it will be is not known
        return
    from ama_acp.context.request_size import estimate_request
    from ama_acp.providers.resolve import FailingProvider, provider_config, provider_for_model, split_model_id

    # As the session's provider_for does (the catalog entry only adds headers). A configuration problem, a
    # missing key: a provider that fails with a message, and no HTTP to prepare.
    provider = provider_for_model(config, model_id, None, estimate_request)
    if isinstance(provider, FailingProvider):
        return
    pcfg = provider_config(config, split_model_id(model_id)[0])  # a valid id: provider_for_model checked it
    if pcfg is None or pcfg.kind == "scripted":
        return
    import httpcore  # noqa: F401

    from ama_acp.providers import tls

    if not tls.plain_http(str(getattr(provider, "base_url", ""))):
        tls.ssl_context()  # cached for the process (functools.cache): what each request's client is built with


PRUNE_AFTER_S = 1.0  # handoff retention at a session's start waits this long (prune_handoffs_soon): past a cold start


def _folder(path: object, field: str) -> str:
    """`path`, when it names an existing folder absolutely; else the request's error, naming its `field`."""
    if not isinstance(path, str) or not path or not os.path.isabs(path):
        raise AcpError.invalid_params(f"{field}: must be an absolute path, got {path!r}")
    if not os.path.isdir(path):
        raise AcpError.invalid_params(f"{field}: no such directory {path!r}")
    return path


class _Opening(NamedTuple):
    """A session/new answered whose Session is not built yet: what building it needs, as it was asked."""

    cwd: str
    dirs: list[str]
    mcp_servers: list[dict[str, object]]
    mode: str
    model_id: str
    created_at: str | None = None  # None: when the Session is built
    # session/new's file, made before its answer (session/store/early.py), or why it could not be
    file: Reserved | StoreError | OSError | None = None


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
        # Ids session/new gave whose Session is built after the response (finish_open) or by the first request
        # that names one (live, get), whichever comes first.
        self._opening: dict[str, _Opening] = {}
        self.client_caps = w.ClientCapabilities()
        self._commands: Commands | None = None
        self.spawn: Spawn | None = None  # the connection's task group (MCP servers live there); None under ama -p
        self._tools: dict[str, Tool] = {}  # built-in tools made so far, by name (tool)
        self._tool_specs: list[ToolSpec] | None = None
        self._store: SessionStore | None = None
        self._skill_problems: set[str] = set()  # told to the person once a process (shaping/skills.py)
        self._learnt: LearntWindows | None = None
        # Sessions another ama took over (session/handover.py): id → its pid, for the error of a later request.
        self.handed_over: dict[str, int] = {}
        self.handover_listening = False

    # --- shared services used by sessions -----------------------------------------------------------------

    @property
    def commands(self) -> Commands:
        if self._commands is None:  # first needed by the first session's announce_open, after session/new
            from ama_acp.session.commands import default_commands

            self._commands = default_commands()
        return self._commands

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            from ama_acp.session.store.session_store import SessionStore

            self._store = SessionStore(self.config.data_dir)
        return self._store

    def _agents(self) -> dict[str, str]:
        return {name: a.description for name, a in self.config.agents.items()}

    def tool(self, name: str) -> Tool | None:
        """The built-in tool `name`, made (its module imported) by its first call in this process."""
        if name not in self._tools:
            from ama_acp.tools.registry import make_tool

            made = make_tool(name, self.config.web, self._agents())
            if made is None:
                return None
            self._tools[name] = made
        return self._tools[name]

    def tool_specs(self) -> list[ToolSpec]:
        if self._tool_specs is None:  # the tools' own declarations, without importing their modules (issue 41)
            from ama_acp.tools.registry import declared_specs

            self._tool_specs = declared_specs(self._agents())
        return self._tool_specs

    def model_info(self, model_id: str) -> ModelInfo | None:
        return self.catalog.get(model_id)

    def context_window(self, model_id: str) -> int | None:
        """The config's window, else the catalog's, else the one the model's server states (asked the first
        time, in the background: session/learnt_windows.py)."""
        info = self.catalog.get(model_id)
        if info is not None and info.context_window is not None:
            return info.context_window
        return self._learnt_windows().window(model_id, self.spawn)

    def _learnt_windows(self) -> LearntWindows:
        if self._learnt is None:
            from ama_acp.session.learnt_windows import LearntWindows

            self._learnt = LearntWindows(self.config, self._window_learnt)
        return self._learnt

    def _window_learnt(self, model_id: str) -> None:
        """A server stated `model_id`'s window: each live session of that model takes it now (the reporter sent no
        usage_update while it was unknown: D3). An idle one tells its editor at once — the meter appears without
        waiting for a prompt; a busy one with its turn's next update (E1), never inside a streamed reply."""
        for session in self.sessions.values():
            if session.model_id == model_id and not session.closed:
                session.ctx.model_changed(model_id, model_id)
                if not session.busy and self.spawn is not None:
                    self.spawn(session.report_usage)

    def price(self, model_id: str, usage: Usage | None) -> Price | None:
        """The catalog's price for one request (long-context tiers depend on the usage); injected into the
        session's billing, so the context package never imports the catalog."""
        from ama_acp.providers.catalog import price_for

        info = self.catalog.get(model_id)
        price = price_for(info, usage) if info else None
        return price if price is not None or self._learnt is None else self._learnt.price(model_id)

    def provider_for(self, model_id: str) -> Provider:
        from ama_acp.context.request_size import estimate_request
        from ama_acp.providers.resolve import provider_for_model

        return provider_for_model(self.config, model_id, self.catalog.get(model_id), estimate_request)

    def model_choices(self, current: str) -> list[tuple[str, str]]:
        """Models worth offering: those whose provider has credentials, configured ones, and the current."""
        from ama_acp.credentials import key_source
        from ama_acp.providers.resolve import has_credentials

        # One look at the credentials file for the whole list (a stat each), one answer per provider.
        keys = key_source()
        usable: dict[str, bool] = {}
        seen: dict[str, str] = {}
        for info in self.catalog.all():
            if info.provider not in usable:
                usable[info.provider] = has_credentials(self.config, info.provider, keys)
            if info.id == current or usable[info.provider]:
                seen[info.id] = info.name or info.id
        seen.setdefault(current, current)
        return list(seen.items())

    async def send_update(self, session_id: str, update: w.SessionUpdate) -> None:
        await self.peer.notify("session/update", w.SessionNotification(session_id=session_id, update=update))

    async def client_request(self, method: str, params: Params, timeout: float | None = None) -> object:
        return await self.peer.request(method, params, timeout=timeout)

    # --- lifecycle ----------------------------------------------------------------------------------------

    def get(self, session_id: str) -> Session:
        session = self.live(session_id)
        if session is None:
            from ama_acp.session.tasks.stored import refuse

            if (asker := self.handed_over.get(session_id)) is not None:
                from ama_acp.session.handover import handed_over_error

                raise handed_over_error(session_id, asker)
            raise refuse(session_id) or AcpError.session_not_found(session_id)  # a task's session is restricted
        return session

    def live(self, session_id: str) -> Session | None:
        """The live session with this id, built now if session/new answered it and it is not built yet."""
        opening = self._opening.pop(session_id, None)
        if opening is not None:
            # Popped before building: a build that raises (a bug) is reported once, never half-done twice.
            return self._build(session_id, opening)
        return self.sessions.get(session_id)

    def register(self, session: Session) -> None:
        """A session built elsewhere (a load, a resume) joins the live ones under its id."""
        self.sessions[session.id] = session
        self.handed_over.pop(session.id, None)  # taken back

    def has_sessions(self) -> bool:
        return bool(self.sessions or self._opening)

    def check_dirs(self, cwd: str, additional: list[str] | None) -> list[str]:
        _folder(cwd, "cwd")
        dirs: list[str] = []
        for i, d in enumerate(additional or []):
            # One spelling, as the cwd has: `/x/proj/` is the cwd `/x/proj`, not a second root.
            d = normal_cwd(_folder(d, f"additionalDirectories[{i}]"))
            if d != cwd and d not in dirs:
                dirs.append(d)
        return dirs

    def new_session(self, cwd: str, additional: list[str] | None, mcp_servers: list[dict[str, object]]) -> Session:
        """A session built at once (`ama -p`, tests). session/new goes through open_session instead."""
        return self._build(new_session_id(), self._opening_for(cwd, additional, mcp_servers))

    def open_session(
        self, cwd: str, additional: list[str] | None, mcp_servers: list[dict[str, object]]
    ) -> w.NewSessionResponse:
        """session/new's answer, from the request's directories (checked now: a bad one is this request's error)
        and the config; the Session is built by `finish_open`, which the caller runs once the answer is out, or
        by the first request that names the id. Safe because nothing before the response needs the Session:
        the client knows the id only from this answer, every path that takes an id goes through `live` (or
        `get`, `close`, `shutdown`), and what the Session would add (commands, its options again, the meter,
        an MCP server's problems) is sent after the response anyway (E4)."""
        opening = self._opening_for(cwd, additional, mcp_servers)
        session_id = new_session_id()
        self._opening[session_id] = self._reserve(session_id, opening)
        return w.NewSessionResponse(
            session_id=session_id,
            modes=options.mode_state(opening.mode),
            config_options=options.config_options(
                opening.mode, opening.model_id, self.model_choices(opening.model_id), OPENING_THOUGHT_LEVEL
            ),
        )

    async def finish_open(self, session_id: str) -> None:
        """After session/new's response: the Session built (if no request did it first) and announced."""
        session = self.live(session_id)
        if session is not None and not session.closed:  # closed already: a session/close came first
            await session.announce_open()

    def _opening_for(self, cwd: str, additional: list[str] | None, mcp_servers: list[dict[str, object]]) -> _Opening:
        # One spelling of the folder for the session's whole life, whoever opens it (session/new, `ama -p`): the
        # live session, its file's header and its tools' roots all hold `/x/proj`, however the client wrote it.
        cwd = normal_cwd(cwd)
        dirs = self.check_dirs(cwd, additional)
        return _Opening(cwd, dirs, mcp_servers, self.config.mode, self.default_model)

    def _reserve(self, session_id: str, opening: _Opening) -> _Opening:
        """The session's file made now, before session/new's answer gives its id out: a process killed before
        the Session is built still leaves a session the next one loads (issue 39 point 6). The few modules it
        needs only (session/store/early.py); a failure is kept for the build, which tells the person."""
        from ama_acp.session.store.early import reserve
        from ama_acp.session.store.entries import Header, utc_now

        created_at = utc_now()
        header = Header(
            session_id=session_id, cwd=opening.cwd, additional_directories=opening.dirs, created_at=created_at
        )
        try:
            made: Reserved | StoreError | OSError = reserve(Path(self.config.data_dir), header)
        except (StoreError, OSError) as exc:
            made = exc
        return opening._replace(created_at=created_at, file=made)

    def _build(self, session_id: str, opening: _Opening) -> Session:
        from ama_acp.session.live import Session
        from ama_acp.session.store.entries import Header

        cwd, dirs = opening.cwd, opening.dirs
        setup = SessionSetup(session_id, cwd, dirs, opening.mode, opening.model_id, created_at=opening.created_at)
        session = Session(self, setup)
        # Registered before anything that can fail: from here on the id names a live session, whatever happens
        # to its file or its MCP servers (both failures are told to the person; neither ends the session).
        self.sessions[session_id] = session
        self._create_file(
            session,
            Header(session_id=session_id, cwd=cwd, additional_directories=dirs, created_at=session.created_at),
            opening.file,
        )
        self.connect_mcp(session, opening.mcp_servers)
        return session

    def _create_file(self, session: Session, header: Header, made: Reserved | StoreError | OSError | None) -> None:
        """The session's file (`made` before session/new's answer: taken over; None: created now), or (when it
        cannot be made or written) an unsaved session: `cannot_save` logs why once, without a traceback, and the
        person is told at the next update (docs/sessions.md "Unsaved sessions")."""
        from ama_acp.session.store.entries import ModelEntry
        from ama_acp.session.store.session_store import SessionWriteError

        store = self.store
        try:
            if isinstance(made, StoreError | OSError):
                raise made
            session.journal.attach(store.create(header) if made is None else store.adopt(made))
        except OSError as exc:  # SessionWriteError: the sessions path, the disk, a limit, a read-only folder
            session.journal.cannot_save(exc)
        except StoreError as exc:  # SessionExists / SessionBusy: the name is taken, or locked by another process
            session.journal.cannot_save(SessionWriteError(store.path(session.id), str(exc), exc))
        else:
            session.persist(ModelEntry(model_id=session.model_id))  # a failure here: cannot_save as well

    def connect_mcp(self, session: Session, servers: list[dict[str, object]]) -> None:
        """Start the session's MCP servers in the background, once the opening response is out (so nothing
        about them reaches the client before the session id does): the open never waits for them."""
        from ama_acp.session.mcp import start
        from ama_acp.session.store.entries import McpServersEntry

        self.prune_handoffs_soon(session.id)  # every open (new, load, resume) comes through here
        self._serve_handover()  # another ama may ask for it (docs/sessions.md "Sessions open elsewhere")
        if why := session.tool_ctx.unsandboxed:  # no Landlock here (sandbox/): said once, as the session opens
            self._tell_soon(session, f"The commands ama runs are not sandboxed: {why}.", "Sandbox")
        elif session.tool_ctx.sandboxed:
            from ama_acp.sandbox import WORKSPACE_WRITE, own_files_exposed

            folders = [session.cwd, *session.additional_directories]
            own = own_files_exposed(folders) if self.config.sandbox.mode == WORKSPACE_WRITE else None
            if own is not None:
                log.warning("ama's own files (%s) are inside session %s's folders", own, session.id)
                self._tell_soon(
                    session,
                    f"ama's own files ({own}) are inside this session's folders, where the sandbox lets commands "
                    "write: a command could change ama itself. Run ama from an install outside the project "
                    '(`uv tool install`, `pipx`), or set `[sandbox] mode = "read-only"` here.',
                    "Sandbox",
                )
        for problem in [p.text() for p in session.skills.problems if p.text() not in self._skill_problems]:
            self._skill_problems.add(problem)
            self._tell_soon(session, f"A skill was skipped: {problem}", "Skills")

        try:
            mcp = start(session, servers)
        except Exception as exc:  # the SDK missing, or a bug: the session goes on without the editor's servers
            log.exception("session %s: its MCP servers could not be started", session.id)
            self._tell_soon(
                session,
                f"The MCP servers could not be started ({type(exc).__name__}: {exc}); "
                "the session goes on without their tools.",
            )
            return
        if mcp is None:
            return
        session.tools.connect(mcp)
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

    def _tell_soon(self, session: Session, text: str, title: str = "MCP servers") -> None:
        """A warning to the person about something that went wrong while the session was built: after the
        response being written (E4), else in the background; under `ama -p` (no task group) the log has it."""
        update = warning(takes_notices(self.client_caps), title, text)

        async def tell() -> None:
            if not session.closed:
                await session.send(update)

        try:
            defer(tell)
        except LookupError:
            if self.spawn is not None:
                self.spawn(tell)

    async def close(self, session_id: str) -> None:
        self.live(session_id)  # a session still opening is built first: its file exists, as after any session/new
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        session.cancel()
        await session.wait_idle()  # the cancelled prompt answers before the close does (R88)
        await session.release()

    async def shutdown(self) -> None:
        for session_id in list(self._opening):  # built, so that every id session/new gave has its file
            try:
                self.live(session_id)
            except Exception:  # a bug building one must not keep the others' files and servers open
                log.exception("session %s could not be built at shutdown", session_id)
        import anyio

        sessions = list(self.sessions.values())
        for session in sessions:
            session.cancel()

        async def release(session: Session) -> None:
            try:
                await session.release()
            except Exception:  # one session's servers or file must not keep the others' open
                log.exception("session %s could not be released at shutdown", session.id)

        # Side by side: each session's MCP servers may take their whole stop time (a server that ignores SIGTERM),
        # and one after another that would add up past the second ama has to exit.
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(release, session)

    # --- handover to another ama process (docs/sessions.md "Sessions open elsewhere") ------------------------

    def _serve_handover(self) -> None:
        """This process's handover socket (session/store/handover.py), once, in the connection's task group; none
        under `ama -p` (a one-shot run holds its session for one turn: a loader is told to wait)."""
        spawn = self.spawn
        if self.handover_listening or spawn is None:
            return
        self.handover_listening = True
        from ama_acp.session.store.handover import Listener

        listener = Listener()

        async def serve() -> None:
            try:
                listener.open()
            except OSError as exc:  # not Linux, the name taken: a loader elsewhere is told to close the session here
                log.info("no handover socket (another ama cannot take this process's sessions over): %s", exc)
                return
            await listener.serve(self.hand_over)

        spawn(serve)

    async def hand_over(self, session_id: str, asker: int) -> Answer:
        """The answer to another ama asking for `session_id`: released when it is open here with no turn running
        (its file let go before the answer, so the asker's open finds the lock free), else why not. Nothing
        awaits between the busy check and the session leaving the live ones: no prompt can start in between."""
        session = self.sessions.get(session_id)
        if session is None or session.closed:
            return "not-held"
        if session.busy:
            return "busy"
        del self.sessions[session_id]
        self.handed_over[session_id] = asker
        session.closed = True
        session.journal.hand_over()  # its lock goes now; the editor and the MCP servers after the answer
        log.info("session %s handed over to ama pid %d", session_id, asker)
        if self.spawn is not None:
            self.spawn(functools.partial(self._handed_over, session, asker))
        return "released"

    async def _handed_over(self, session: Session, asker: int) -> None:
        """The editor here told once, then the session's MCP servers and sandbox stopped."""
        from ama_acp.session.handover import notice

        try:
            await self.send_update(session.id, notice(self.client_caps, asker))
        finally:
            try:
                await session.release()
            except Exception:  # its MCP servers' stop failed: logged, as at a shutdown
                log.exception("session %s could not be released after its handover", session.id)

    def prune_handoffs_soon(self, session_id: str) -> None:
        """Handoff retention at a session's start (docs/sessions.md "Handoff retention"): in a worker thread, in
        the background, PRUNE_AFTER_S after the opening response is out; a failure is logged and the session goes on. Under
        `ama -p` (no task group) retention runs after compactions only."""
        spawn = self.spawn
        if spawn is None:
            return
        days = self.config.compaction.retention_days

        async def prune() -> None:
            import anyio

            # Not beside the first answer: listing and stat-ing every session's folder (hundreds, for a person who
            # has used ama a while) would compete with it for the interpreter. A connection that ends first
            # cancels it; the next start prunes.
            await anyio.sleep(PRUNE_AFTER_S)
            try:
                removed = await anyio.to_thread.run_sync(lambda: self.store.prune_handoffs(days, except_id=session_id))
            except Exception:  # a bug of ours (prune_handoffs handles the disk's errors): never the session's
                log.exception("handoff retention at the start of session %s failed", session_id)
                return
            if removed:
                log.info("handoff retention: removed %d handoff folder(s) of other sessions", removed)

        async def begin() -> None:
            spawn(prune)

        try:
            defer(begin)
        except LookupError:  # not under the RPC peer: start now
            spawn(prune)
