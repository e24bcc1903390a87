"""One session's MCP servers: started together in the background, each in its own task, so a server that
hangs, dies or babbles costs its own tools and nothing else.

Lifecycle of a server: `starting` → `ready` (initialize and tools/list answered within the start bound) →
`failed` (it exited, its connection broke, it sent garbage, or it did not answer in time; reported once) or
`closed` (aclose). Its tools are offered only while it is `ready`.

Process lifetime: stdio servers run in their own process group (the SDK starts them with
`start_new_session`). `aclose()` — and cancellation of the task running `run()` — closes each server's stdin,
waits up to 2 s, then SIGTERMs and, 2 s later, SIGKILLs the whole group (the SDK's shutdown, shielded from
cancellation, every wait bounded). If ama itself is SIGKILLed nothing runs: the server sees EOF on its stdin,
which the MCP spec tells servers to treat as the end; a server that ignores it outlives ama.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio
import anyio.to_thread
import msgspec

from ama_acp.errors import ToolError
from ama_acp.mcp.config import McpServerSpec
from ama_acp.mcp.lines import LineTooLong
from ama_acp.mcp.prompts import MAX_PROMPTS_PER_SERVER, McpPrompt, prompts_from_listing
from ama_acp.mcp.resources import ResourceText, listing, listing_lines, read_text
from ama_acp.mcp.results import McpCallResult
from ama_acp.mcp.scrub import scrub_urls
from ama_acp.mcp.tools import McpTool, cap_declarations, tools_from_listing

if TYPE_CHECKING:
    from anyio.abc import ObjectReceiveStream
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.client.session import ClientSession, IncomingMessage
    from mcp.shared.message import SessionMessage

    from ama_acp.mcp.connection import StderrTail

__all__ = ["McpHub", "ServerProblem", "ServerState"]

log = logging.getLogger("ama.mcp")

ServerState = Literal["starting", "ready", "failed", "closed"]
_T = TypeVar("_T")

DEFAULT_START_TIMEOUT = 30.0
DEFAULT_CALL_TIMEOUT = 120.0
# aclose() waits this long for every server to stop. A stdio server's stop is bounded well below it (stdin
# closed, 0.25 s, SIGTERM to the group, 0.25 s, SIGKILL: mcp/stdio.py), so ama exits within 1 s of stdin EOF;
# this is reached only by something the kill cannot end.
CLOSE_TIMEOUT = 1.0
# A server's `notifications/tools/list_changed` are coalesced: one re-list at a time, and at most one a
# RELIST_INTERVAL; the notifications that come meanwhile make one more re-list, not one each.
RELIST_INTERVAL = 1.0
# Lines on a server's output that are not JSON-RPC, before it counts as broken. One stray banner line should
# not cost a person their server; a stream of them is not a server speaking MCP.
GARBAGE_LIMIT = 5
# How long a failed server's stderr may take to reach its end before the problem is reported without it.
STDERR_DRAIN_TIMEOUT = 1.0


class ServerProblem(msgspec.Struct, frozen=True):
    server: str
    reason: str  # person-worded: "did not start: …", "crashed: …", "did not answer within 30 s", "sent garbage"
    stderr_tail: list[str]  # the last lines of its stderr (stdio), for the log


class _Server:
    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self.state: ServerState = "starting"
        self.tools: list[McpTool] = []
        self.session: ClientSession | None = None
        self.settled = anyio.Event()  # ready, failed or closed: what wait_ready waits for
        self.wake = anyio.Event()  # the server task has something to do: re-list, or end
        self.lost: str | None = None  # why the connection ended, once it has
        self.relist = False
        self.prompts: list[McpPrompt] = []
        self.offers_prompts = False  # the server advertised `prompts` (then `reprompt` re-lists them)
        self.offers_resources = False
        self.reprompt = False
        self.garbage = 0
        self.scope: anyio.CancelScope | None = None  # the server's whole life: aclose() cancels it
        self.watch: anyio.CancelScope | None = None  # the start bound's timer
        self.stderr_tail: list[str] = []

    @property
    def name(self) -> str:
        return self.spec.name

    def ended(self) -> bool:
        # A method, not `lost is not None` inline: the pump sets `lost` while this task awaits.
        return self.lost is not None

    def poke(self) -> None:
        self.wake.set()


class McpHub:
    def __init__(
        self,
        specs: list[McpServerSpec],
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        cwd: str | None = None,
        on_problem: Callable[[ServerProblem], Awaitable[None]] | None = None,
        on_tools_changed: Callable[[], Awaitable[None]] | None = None,
        on_notice: Callable[[str, str, str], Awaitable[None]] | None = None,
        on_prompts_changed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._servers = [_Server(spec) for spec in specs]
        self._call_timeout = call_timeout
        self._start_timeout = start_timeout
        self._cwd = cwd
        self._on_problem = on_problem
        self._on_tools_changed = on_tools_changed
        # (server, topic, sentence): something the person should know, once per server and topic ("tools", "prompts")
        self._on_notice = on_notice
        self._on_prompts_changed = on_prompts_changed
        self._version = 0
        self._by_wire: dict[str, McpTool] = {}
        self._running = False
        self._closing = False
        self._finished = anyio.Event()

    # -- what the session reads ---------------------------------------------------------------------------

    def tools(self) -> list[McpTool]:
        """The ready servers' tools: server order, then each server's own order."""
        return [tool for server in self._servers if server.state == "ready" for tool in server.tools]

    def tool(self, wire_name: str) -> McpTool | None:
        return self._by_wire.get(wire_name)

    def prompts(self) -> list[McpPrompt]:
        """The ready servers' prompts (docs/commands.md "MCP prompts and resources"), in server order."""
        return [prompt for server in self._servers if server.state == "ready" for prompt in server.prompts]

    def resource_servers(self) -> list[str]:
        """The ready servers that advertised resources."""
        return [server.name for server in self._servers if server.state == "ready" and server.offers_resources]

    async def get_prompt(self, prompt: McpPrompt, arguments: dict[str, str]) -> dict[str, object]:
        """prompts/get, as JSON; ToolError (worded for the person) for a server gone, slow or answering garbage."""
        from ama_acp.mcp import connection

        server, session = self._ready_server(prompt.server)
        return await self._guarded(
            server.name, connection.get_prompt(session, server.name, prompt.name, arguments, self._call_timeout)
        )

    async def list_resources(self, server_name: str | None) -> str:
        """Every ready server's resources and templates (or one server's), as lines the model reads."""
        from ama_acp.mcp import connection

        names = self.resource_servers() if server_name is None else [server_name]
        if server_name is not None and server_name not in self.resource_servers():
            raise ToolError(f"MCP server {server_name!r} is not running or offers no resources")
        blocks: list[tuple[str, list[str]]] = []
        for name in names:
            try:
                session = self._ready_server(name)[1]
                listed, templates = await self._guarded(
                    name, connection.list_resources(session, name, self._call_timeout)
                )
            except ToolError as exc:
                blocks.append((name, [f"- ({exc})"]))
                continue
            blocks.append((name, listing_lines(name, listed, templates)))
        return listing(blocks)

    async def read_resource(self, server_name: str, uri: str) -> ResourceText:
        from ama_acp.mcp import connection

        if server_name not in self.resource_servers():
            raise ToolError(f"MCP server {server_name!r} is not running or offers no resources")
        server, session = self._ready_server(server_name)
        raw = await self._guarded(server.name, connection.read_resource(session, server.name, uri, self._call_timeout))
        return read_text(raw, uri)

    @property
    def call_timeout(self) -> float:
        """Seconds one tools/call may take (`[mcp] call_timeout`); the caller's own deadline must not be shorter."""
        return self._call_timeout

    @property
    def version(self) -> int:
        """Changes whenever tools() does."""
        return self._version

    def servers(self) -> list[tuple[str, str]]:
        return [(server.name, server.state) for server in self._servers]

    async def wait_ready(self, timeout: float) -> list[str]:
        """Wait until every server is ready or failed, at most `timeout` s; the names still starting."""
        with anyio.move_on_after(max(0.0, timeout)):
            for server in self._servers:
                await server.settled.wait()
        return [server.name for server in self._servers if server.state == "starting"]

    # -- running ------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Start every server, each in its own task, and serve until aclose() (or until none is left).
        Never raises but for cancellation; problems go to on_problem, once per server."""
        if self._running or self._closing:
            return
        self._running = True
        try:
            # The SDK (pydantic, httpx2, …) takes a second or more to import on a busy machine; in a thread,
            # so the event loop goes on answering the editor meanwhile.
            await anyio.to_thread.run_sync(importlib.import_module, "ama_acp.mcp.connection")
            async with anyio.create_task_group() as tg:
                for server in self._servers:
                    tg.start_soon(self._serve, server)
        finally:
            for server in self._servers:
                if server.state in ("starting", "ready"):
                    server.state = "closed"
                server.settled.set()
            self._finished.set()

    async def aclose(self) -> None:
        """Stop every server and wait for it (bounded): no process, no connection left. Idempotent; safe
        before run(), during start, and from any task."""
        self._closing = True
        for server in self._servers:
            if server.scope is not None:
                server.scope.cancel()
        if self._running:
            with anyio.move_on_after(CLOSE_TIMEOUT, shield=True) as scope:
                await self._finished.wait()
            if scope.cancelled_caught:
                log.warning("MCP servers did not stop within %g s", CLOSE_TIMEOUT)
        for server in self._servers:
            if server.state in ("starting", "ready"):
                server.state = "closed"
            server.settled.set()
        if self._by_wire:
            self._rebuild()

    async def call(self, wire_name: str, arguments: object) -> McpCallResult:
        """Call a tool by its wire name. ToolError (worded for the model and the person) for a server that is
        gone, crashes mid-call, times out or answers garbage; cancellation propagates, and the SDK sends
        `notifications/cancelled` for the request."""
        tool = self._by_wire.get(wire_name)
        if tool is None:
            raise ToolError(f"there is no MCP tool {wire_name!r} (its server may have stopped)")
        server, session = self._ready_server(tool.server)
        if not isinstance(arguments, dict):
            raise ToolError(f"the arguments for {wire_name!r} are not an object")
        from ama_acp.mcp import connection

        return await self._guarded(
            server.name, connection.call_tool(session, server.name, tool.name, arguments, self._call_timeout)
        )

    async def _guarded(self, server: str, request: Awaitable[_T]) -> _T:
        """A request's ToolError as it is; anything else (a bug, the SDK's surprise) logged and made one."""
        try:
            return await request
        except ToolError:
            raise
        except Exception as exc:
            log.exception("an MCP request to server %r failed unexpectedly", server)
            raise ToolError(f"MCP server {server!r}: the request failed unexpectedly ({type(exc).__name__})") from None

    def _ready_server(self, name: str) -> tuple[_Server, ClientSession]:
        """The named server and its session, when it is ready; a ToolError otherwise."""
        server = next((s for s in self._servers if s.name == name), None)
        session = server.session if server is not None else None
        if server is None or server.state != "ready" or session is None:
            raise ToolError(f"MCP server {name!r} is not running")
        return server, session

    # -- one server's life ----------------------------------------------------------------------------------

    async def _serve(self, server: _Server) -> None:
        from ama_acp.mcp import connection

        stderr = connection.StderrTail(server.name) if server.spec.transport == "stdio" else None
        reason: str | None = None
        try:
            with anyio.CancelScope() as scope:
                server.scope = scope
                if self._closing:
                    scope.cancel()
                reason = await self._life(server, stderr)
            reason = server.lost or reason
        except Exception as exc:
            reason = server.lost or _describe(exc, server.spec, starting=server.state == "starting")
            log.debug("MCP server %r ended with %r", server.name, exc, exc_info=True)
        except BaseException:
            self._end(server, "closed")  # cancelled from outside: the session is going away
            raise
        finally:
            if stderr is not None:
                server.stderr_tail = list(stderr.lines)
                stderr.close()
        if self._closing:
            self._end(server, "closed")
            return
        self._end(server, "failed")
        await self._report(server, reason)

    async def _report(self, server: _Server, reason: str | None) -> None:
        """Say once why a server failed: to the log, to whoever lists the tools, and to on_problem."""
        problem = ServerProblem(server.name, reason or "stopped", server.stderr_tail)
        log.warning(
            "MCP server %r %s%s",
            server.name,
            problem.reason,
            "".join(f"\n  stderr: {line}" for line in problem.stderr_tail),
        )
        await self._notify_tools_changed()
        if server.prompts:
            await self._notify(self._on_prompts_changed)
        if self._on_problem is not None:
            try:
                await self._on_problem(problem)
            except Exception:
                log.exception("reporting the problem of MCP server %r failed", server.name)

    async def _life(self, server: _Server, stderr: StderrTail | None) -> str | None:
        """The server's connection from start to end; returns why it ended (None: asked to close)."""
        async with anyio.create_task_group() as side:
            if stderr is not None:
                side.start_soon(stderr.pump)
            side.start_soon(self._start_bound, server)
            try:
                return await self._connected(server, stderr)
            finally:
                with anyio.CancelScope(shield=True):
                    if stderr is not None:
                        # The process is gone (the transport's exit stops it): its stderr ends soon, and
                        # what it said last is usually why it failed. Not worth a wait when closing.
                        stderr.close_writer()
                        if not self._closing:
                            with anyio.move_on_after(STDERR_DRAIN_TIMEOUT):
                                await stderr.ended.wait()
                side.cancel_scope.cancel()
        return None  # reached only if the task group swallowed an exception, which it does not

    async def _start_bound(self, server: _Server) -> None:
        """Fail a server that has not answered initialize and tools/list in time. Failed here, before its
        teardown (which may take seconds), so wait_ready() hears of it at the bound."""
        with anyio.CancelScope() as server.watch:
            await anyio.sleep(self._start_timeout)
            if server.state == "starting" and not self._closing:
                server.lost = server.lost or f"did not answer within {self._start_timeout:g} s of starting"
                server.state = "failed"
                server.settled.set()
                if server.scope is not None:
                    server.scope.cancel()

    async def _connected(self, server: _Server, stderr: StderrTail | None) -> str | None:
        from ama_acp.mcp import connection

        async with AsyncExitStack() as stack:
            # The transport's exit stops the server and what it left in its process group (mcp/stdio.py).
            streams = await stack.enter_async_context(connection.transport(server.spec, cwd=self._cwd, stderr=stderr))
            if stderr is not None:
                stderr.close_writer()  # the child holds its own copy; ours would keep the pipe from ending
            send, receive = anyio.create_memory_object_stream["SessionMessage | Exception"](0)
            pumps = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(pumps.cancel_scope.cancel)
            pumps.start_soon(self._pump, server, streams[0], send)

            async def on_message(message: IncomingMessage) -> None:
                if connection.is_tools_changed(message):
                    server.relist = True
                    server.poke()
                elif connection.is_prompts_changed(message):
                    server.reprompt = True
                    server.poke()

            session = await connection.open_session(stack, (receive, streams[1]), on_message=on_message)
            await session.initialize()
            # Before `ready`: the resource tools are declared from the version the tools' rebuild sets.
            server.offers_prompts, server.offers_resources = connection.offers(session)
            raw_tools = await connection.list_tools(session)
            if server.lost is not None:
                return server.lost
            if server.state != "starting":  # the start bound passed while tools/list was answered
                return server.lost
            if server.watch is not None:
                server.watch.cancel()  # started: the start bound no longer applies
            server.session = session
            server.state = "ready"
            notice = self._set_tools(server, raw_tools)
            server.settled.set()
            log.info("MCP server %r ready with %d tools", server.name, len(server.tools))
            await self._notify_tools_changed()
            await self._notice(server, notice)
            if server.offers_prompts:
                await self._list_prompts(server, session)
            last_relist = -RELIST_INTERVAL
            while True:
                await server.wake.wait()
                server.wake = anyio.Event()
                if server.ended():
                    return server.lost
                if server.relist or server.reprompt:
                    # Coalesced: however many notifications came, one re-list, at most one a RELIST_INTERVAL.
                    await self._wait_unless_ended(server, last_relist + RELIST_INTERVAL)
                    if server.ended():
                        return server.lost
                    relist, reprompt = server.relist, server.reprompt and server.offers_prompts
                    server.relist = server.reprompt = False
                    last_relist = anyio.current_time()
                    if relist:
                        await self._relist(server, session)
                    if reprompt:
                        await self._list_prompts(server, session)

    async def _wait_unless_ended(self, server: _Server, until: float) -> None:
        """Until the clock reaches `until`, or the server's connection ends (the pokes meanwhile only mark
        another re-list)."""
        with anyio.move_on_after(until - anyio.current_time()):
            while not server.ended():
                await server.wake.wait()
                server.wake = anyio.Event()
        if server.ended():
            server.poke()

    async def _pump(
        self,
        server: _Server,
        source: ObjectReceiveStream[SessionMessage | Exception],
        sink: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Between the transport and the session: notices the connection ending (the SDK says so to nobody)
        and counts what is not JSON-RPC."""
        garbage = False
        too_long: LineTooLong | None = None
        try:
            async with sink:
                async for item in source:
                    if isinstance(item, LineTooLong):
                        too_long = item
                        break
                    if isinstance(item, Exception):
                        server.garbage += 1
                        log.warning(
                            "MCP server %r sent something that is not JSON-RPC: %s",
                            server.name,
                            _clip(scrub_urls(str(item))),
                        )
                        if server.garbage >= GARBAGE_LIMIT:
                            garbage = True
                            break
                        continue
                    await sink.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            ended = "the process exited" if server.spec.transport == "stdio" else "the connection closed"
            if too_long is not None:
                reason = str(too_long)
            elif garbage:
                reason = "sent garbage: its output is not JSON-RPC"
            elif server.state == "ready":
                reason = f"crashed: {ended}"
            else:
                reason = f"did not start: {ended}"
            self._lose(server, reason)

    def _lose(self, server: _Server, reason: str) -> None:
        """The connection ended: withdraw the tools now (a call in flight fails on its own)."""
        if server.lost is None and not self._closing:
            server.lost = reason
        if server.state == "ready" and not self._closing:
            server.state = "failed"
            self._rebuild()
        server.poke()

    async def _relist(self, server: _Server, session: ClientSession) -> None:
        from ama_acp.mcp import connection

        try:
            with anyio.fail_after(self._start_timeout):
                raw_tools = await connection.list_tools(session)
        except Exception as exc:  # TimeoutError, MCPError, a listing that does not validate
            log.warning(
                "MCP server %r: re-listing its tools failed (%s); keeping the old list",
                server.name,
                _clip(scrub_urls(str(exc))),
            )
            return
        if server.state != "ready":
            return
        notice = self._set_tools(server, raw_tools)
        await self._notify_tools_changed()
        await self._notice(server, notice)

    async def _list_prompts(self, server: _Server, session: ClientSession) -> None:
        """prompts/list, bounded, into the server's prompts; a listing that fails keeps the old ones (logged, and
        told to the person once: the server's prompts are what a person looks for in the command menu)."""
        from ama_acp.mcp import connection

        try:
            with anyio.fail_after(self._start_timeout):
                raw = await connection.list_prompts(session, enough=MAX_PROMPTS_PER_SERVER)
        except Exception as exc:  # TimeoutError, MCPError, a listing that does not validate
            reason = _clip(scrub_urls(str(exc)), 200) or type(exc).__name__
            log.warning("MCP server %r: listing its prompts failed (%s)", server.name, reason)
            text = f"MCP server {server.name!r}: its prompts could not be listed ({reason})."
            await self._notice(server, text, topic="prompts")
            return
        if server.state != "ready":
            return
        taken = {p.command for other in self._servers if other is not server for p in other.prompts}
        server.prompts, dropped = prompts_from_listing(server.name, raw, taken)
        if dropped:  # one line for the log, however much a hostile listing left out
            more = f" (and {len(dropped) - 3} more)" if len(dropped) > 3 else ""
            log.warning("MCP server %r: prompts left out: %s%s", server.name, "; ".join(dropped[:3]), more)
        await self._notify(self._on_prompts_changed)

    async def _notify(self, callback: Callable[[], Awaitable[None]] | None) -> None:
        if callback is None:
            return
        try:
            await callback()
        except Exception:
            log.exception("an MCP change callback failed")

    def _set_tools(self, server: _Server, raw_tools: list[dict[str, object]]) -> str | None:
        """Offer the server's listed tools; a sentence for the person when some were too large to offer."""
        taken = {tool.wire_name for other in self._servers if other is not server for tool in other.tools}
        tools, dropped = tools_from_listing(server.name, raw_tools, taken)
        for line in dropped:
            log.warning("MCP server %r: %s", server.name, line)
        tools, notice = cap_declarations(server.name, tools)
        if notice is not None:
            log.warning("%s", notice)
        server.tools = tools
        self._rebuild()
        return notice

    async def _notice(self, server: _Server, text: str | None, topic: str = "tools") -> None:
        if text is None or self._on_notice is None:
            return
        try:
            await self._on_notice(server.name, topic, text)
        except Exception:
            log.exception("telling the person about MCP server %r failed", server.name)

    def _rebuild(self) -> None:
        self._by_wire = {tool.wire_name: tool for tool in self.tools()}
        self._version += 1

    def _end(self, server: _Server, state: ServerState) -> None:
        was_offered = server.state == "ready"
        server.session = None
        server.state = state
        server.settled.set()
        if was_offered:
            self._rebuild()

    async def _notify_tools_changed(self) -> None:
        await self._notify(self._on_tools_changed)


def _describe(exc: BaseException, spec: McpServerSpec, *, starting: bool) -> str:
    """A person-worded reason from whatever the SDK or the transport raised."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    prefix = "did not start" if starting else "failed"
    if isinstance(exc, OSError) and spec.transport == "stdio":
        return f"{prefix}: {exc.strerror or exc}: {spec.command}"
    # An HTTP error names the URL it failed on: shown and logged without its query, userinfo or key-shaped parts.
    text = scrub_urls(str(exc).strip()) or type(exc).__name__
    return f"{prefix}: {_clip(text, 300)}"


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
