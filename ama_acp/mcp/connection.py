"""Everything that touches the `mcp` SDK: transports, the client session, a call and its failures.

Imported by the hub only when a session has servers, so a session without servers never loads the SDK
(and pydantic, httpx2 and the rest behind it).
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from typing import IO, Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import BaseModel, ValidationError

from ama_acp.errors import ToolError
from ama_acp.mcp.config import McpServerSpec
from ama_acp.mcp.results import McpCallResult, map_result
from ama_acp.mcp.stdio import stdio_transport
from ama_acp.secrets import is_secret

log = logging.getLogger("ama.mcp")

STDERR_TAIL_LINES = 20
MAX_STDERR_LINE = 1000  # characters kept of one stderr line (a server may print a megabyte without a newline)
# Variables a server needs to find its tools and speak the person's language, beyond the SDK's base
# (HOME, LOGNAME, PATH, SHELL, TERM, USER). Everything else of ama's environment — API keys first — stays out.
EXTRA_INHERITED_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TMPDIR", "TZ", "XDG_RUNTIME_DIR")

Streams = tuple[ObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


def child_environment(spec: McpServerSpec) -> dict[str, str]:
    """The server process's environment: a minimal safe base, with the spec's env over it (as given).

    The base is the SDK's `get_default_environment()` plus locale and temp variables, minus anything
    `ama_acp.secrets` calls secret; ama's own keys never reach an editor-configured server.
    """
    base = get_default_environment()
    for name in EXTRA_INHERITED_ENV:
        value = os.environ.get(name)
        if value is not None:
            base[name] = value
    base = {k: v for k, v in base.items() if not is_secret(k)}
    return base | dict(spec.env)


# A server's stderr is read at a bounded rate, so one that floods it cannot pin a core (each read of a full pipe
# wakes the event loop; a flooder refills it as fast as it is read). Per interval: at most STDERR_READ_BUDGET
# bytes are read (past it the pipe is left alone until the interval ends, so the flooder's writes block: it is
# slowed, not ama), and of those only STDERR_KEEP_BUDGET are decoded into lines; the rest are counted, not kept.
STDERR_INTERVAL = 1.0
STDERR_READ_BUDGET = 4 * 1024 * 1024
STDERR_KEEP_BUDGET = 64 * 1024
STDERR_CHUNK = 1024 * 1024
STDERR_PIPE_SIZE = 1024 * 1024  # asked of Linux (F_SETPIPE_SZ), so one read takes more per wake-up


class StderrTail:
    """Reads a server's stderr pipe at a bounded rate and keeps its last lines (for the log when the server
    fails); what is over the rate is dropped and counted (`dropped`), and the tail says so."""

    def __init__(self, server: str = "") -> None:
        self.server = server
        self.lines: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.dropped = 0  # bytes read but not kept (over STDERR_KEEP_BUDGET in an interval)
        self._window_dropped = 0
        self._partial = ""
        self.read_fd, write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        with suppress(AttributeError, OSError):  # Linux only; the default (64 KiB) works too, in smaller reads
            fcntl.fcntl(self.read_fd, fcntl.F_SETPIPE_SZ, STDERR_PIPE_SIZE)
        # The child's end: handed to the process as its stderr, closed here once the process has it.
        self.writer: IO[str] | None = os.fdopen(write_fd, "w")
        self.ended = anyio.Event()
        self._closed = False

    def close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def pump(self) -> None:
        window_end = anyio.current_time() + STDERR_INTERVAL
        read = kept = 0
        try:
            while True:
                await anyio.wait_readable(self.read_fd)
                now = anyio.current_time()
                if read >= STDERR_READ_BUDGET and now < window_end:
                    await anyio.sleep(window_end - now)  # the rate limit itself: the pipe waits, and so does its writer
                    now = anyio.current_time()
                if now >= window_end:
                    self._end_window()
                    window_end, read, kept = now + STDERR_INTERVAL, 0, 0
                try:
                    chunk = os.read(self.read_fd, STDERR_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                read += len(chunk)
                kept += self._keep(chunk, max(0, STDERR_KEEP_BUDGET - kept))
        except (OSError, anyio.ClosedResourceError):
            pass  # the pipe was closed under the read: the tail so far is what there is
        finally:
            self._end_window()
            if self._partial:
                self._push(self._partial)
                self._partial = ""
            self.ended.set()

    def _keep(self, chunk: bytes, room: int) -> int:
        """Keep what of `chunk` fits in `room` bytes, drop the rest; returns the bytes kept."""
        if room:
            self._feed(chunk[:room].decode("utf-8", "replace"))
        if len(chunk) > room:
            self._drop(len(chunk) - room)
        return min(room, len(chunk))

    def _drop(self, count: int) -> None:
        if not self.dropped:
            log.warning(
                "MCP server %r floods its stderr: keeping at most %d KiB of it a second",
                self.server,
                STDERR_KEEP_BUDGET // 1024,
            )
        self.dropped += count
        self._window_dropped += count

    def _end_window(self) -> None:
        if self._window_dropped:
            if self._partial:  # cut where the dropping began: not a line of its own
                self._push(self._partial + "…")
                self._partial = ""
            self._push(f"[{self._window_dropped} bytes of stderr left out]")
            self._window_dropped = 0

    def _feed(self, text: str) -> None:
        pieces = (self._partial + text).split("\n")
        self._partial = pieces.pop()
        if len(self._partial) > MAX_STDERR_LINE:
            self._push(self._partial)
            self._partial = ""
        for line in pieces[-STDERR_TAIL_LINES:]:  # the tail keeps no more; a chunk of short lines is cut here
            self._push(line)

    def _push(self, line: str) -> None:
        line = line.rstrip("\r")
        self.lines.append(line if len(line) <= MAX_STDERR_LINE else line[: MAX_STDERR_LINE - 1] + "…")

    def close(self) -> None:
        """Release both ends. Call after the pump task has finished."""
        self.close_writer()
        if not self._closed:
            self._closed = True
            os.close(self.read_fd)


@asynccontextmanager
async def _http_transport(spec: McpServerSpec) -> AsyncIterator[Streams]:
    # The headers go on the client, so every request (POST, GET stream, DELETE) carries them.
    client = create_mcp_http_client(headers=dict(spec.headers) or None)
    async with client, streamable_http_client(spec.url or "", http_client=client) as streams:
        yield streams  # type: ignore[misc]


def transport(
    spec: McpServerSpec, *, cwd: str | None, stderr: StderrTail | None
) -> AbstractAsyncContextManager[Streams]:
    """The SDK transport for a spec (entered by the caller, in the server's own task)."""
    if spec.transport == "stdio":
        assert stderr is not None and stderr.writer is not None
        return _stdio(spec, cwd, stderr.writer)
    if spec.transport == "http":
        return _http_transport(spec)
    return sse_client(spec.url or "", headers=dict(spec.headers) or None)


def _stdio(spec: McpServerSpec, cwd: str | None, stderr: IO[str]) -> AbstractAsyncContextManager[Streams]:
    from ama_acp.tools.programs import find_program, safe_path

    env = child_environment(spec)
    # The command by absolute path (tools/programs.py): a bare name never finds an `npx` the project ships
    # through a relative PATH entry, since the server runs in the project. The inherited PATH (not one the
    # editor set for this server) is held to the same rule, so `#!/usr/bin/env node` finds no project node.
    roots = (cwd,) if cwd else ()
    found = find_program(spec.command or "", workspace_roots=roots, cwd=cwd, path=env.get("PATH", os.defpath))
    if found.path is None:
        raise ToolError(found.why_not())  # the server's problem: "did not start: …" (hub._describe)
    if not any(name == "PATH" for name, _ in spec.env):
        env["PATH"] = safe_path(env.get("PATH", os.defpath), roots)
    # ama's own stdio transport, not the SDK's stdio_client: a bounded line reader and a bounded stop (mcp/stdio.py).
    return stdio_transport(found.path, list(spec.args), env=env, cwd=cwd, stderr=stderr)


async def open_session(stack: AsyncExitStack, streams: Streams, *, on_message: MessageHandlerFnT) -> ClientSession:
    read, write = streams
    session = ClientSession(
        read,
        write,
        message_handler=on_message,
        client_info=types.Implementation(name="ama", version=_version()),
    )
    return await stack.enter_async_context(session)


def _version() -> str:
    try:
        return importlib.metadata.version("ama-acp")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def is_tools_changed(message: IncomingMessage) -> bool:
    return isinstance(message, types.ToolListChangedNotification)


async def list_tools(session: ClientSession, *, max_pages: int = 20) -> list[dict[str, object]]:
    """Every page of tools/list, as JSON (by alias), at most `max_pages`."""
    return await _paged(lambda params: session.list_tools(params=params), "tools", max_pages)


async def _paged(
    page: Callable[[types.PaginatedRequestParams | None], Awaitable[Any]],
    field: str,
    max_pages: int,
    enough: int | None = None,
) -> list[dict[str, object]]:
    """The entries (`field` of each page: "tools", "prompts") of a listing the server pages, as JSON by alias,
    page after page while it gives a cursor: at most `max_pages` (a cursor that never ends is a bug on the
    server's side, not a reason to loop forever), and no page more once past `enough`."""
    entries: list[dict[str, object]] = []
    cursor: str | None = None
    for _ in range(max_pages):
        result = await page(types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        entries.extend(_dump(e) for e in getattr(result, field))
        cursor = result.next_cursor
        if not cursor or (enough is not None and len(entries) > enough):
            break
    return entries


async def call_tool(
    session: ClientSession, server: str, tool: str, arguments: dict[str, object], timeout: float
) -> McpCallResult:
    """One tools/call. Raises ToolError for every way it can fail; cancellation propagates.

    The SDK's `read_timeout_seconds` bounds the wait for the answer and, when it passes, sends
    `notifications/cancelled` itself; a cancellation of the caller's scope sends it too (shielded, bounded).
    """
    try:
        result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
    except _FAILURES as exc:
        raise _failure(exc, server, repr(tool), timeout) from None
    return map_result(_dump(result))


_FAILURES = (
    MCPError,
    ValidationError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    RuntimeError,
    TimeoutError,
)


def _failure(exc: Exception, server: str, what: str, timeout: float) -> ToolError:
    """The ToolError, worded for the model and the person, for one way a request to a server failed."""
    if isinstance(exc, MCPError):
        if exc.code == REQUEST_TIMEOUT:
            return ToolError(f"MCP server {server!r} did not answer {what} within {timeout:g} s")
        if exc.code == CONNECTION_CLOSED:
            return ToolError(f"MCP server {server!r} closed its connection during {what} (did it crash?)")
        return ToolError(f"MCP server {server!r} answered {what} with an error: {_clip(exc.message)}")
    if isinstance(exc, ValidationError):
        return ToolError(f"MCP server {server!r} answered {what} with a result that is not MCP")
    if isinstance(exc, TimeoutError):
        return ToolError(f"MCP server {server!r} did not answer {what} within {timeout:g} s")
    if isinstance(exc, RuntimeError):
        # The SDK's checks on the result: structured content against the tool's output schema, a result
        # that asks for input ama cannot give.
        return ToolError(f"MCP server {server!r}: {_clip(str(exc))}")
    return ToolError(f"MCP server {server!r} is not connected")


def _dump(result: BaseModel) -> dict[str, object]:
    """A result of the SDK's as JSON, by alias, without the fields the server left out."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _asked(server: str, what: str, timeout: float, request: Awaitable[BaseModel]) -> dict[str, object]:
    """One request's result as JSON within `timeout`; ToolError for every way it can fail."""
    try:
        with anyio.fail_after(timeout):
            return _dump(await request)
    except _FAILURES as exc:
        raise _failure(exc, server, what, timeout) from None


def offers(session: ClientSession) -> tuple[bool, bool]:
    """Whether the server advertised prompts, and resources, in its initialize answer."""
    caps = session.server_capabilities
    return (caps is not None and caps.prompts is not None, caps is not None and caps.resources is not None)


def is_prompts_changed(message: IncomingMessage) -> bool:
    return isinstance(message, types.PromptListChangedNotification)


async def list_prompts(session: ClientSession, *, enough: int, max_pages: int = 20) -> list[dict[str, object]]:
    """The pages of prompts/list, as JSON, until `enough` entries (more is a server to cut, not to read on)."""
    return await _paged(lambda params: session.list_prompts(params=params), "prompts", max_pages, enough)


async def get_prompt(
    session: ClientSession, server: str, name: str, arguments: dict[str, str], timeout: float
) -> dict[str, object]:
    """One prompts/get, as JSON. ToolError for every way it can fail; cancellation propagates."""
    return await _asked(server, f"the prompt {name!r}", timeout, session.get_prompt(name, arguments or None))


async def list_resources(
    session: ClientSession, server: str, timeout: float
) -> tuple[list[dict[str, object]], list[dict[str, object]] | None]:
    """The first page of resources/list and of resources/templates/list (None: the server has no templates), as
    JSON. ToolError for every way resources/list can fail."""
    listed = await _asked(server, "resources/list", timeout, session.list_resources())
    templates: list[dict[str, object]] | None = None
    try:
        with anyio.fail_after(timeout):
            raw = _dump(await session.list_resource_templates()).get("resourceTemplates")
        templates = raw if isinstance(raw, list) else None
    except _FAILURES as exc:  # templates are optional: a server without them answers "method not found"
        log.debug("MCP server %r: no resource templates (%s)", server, _clip(str(exc)))
    resources = listed.get("resources")
    return (resources if isinstance(resources, list) else []), templates


async def read_resource(session: ClientSession, server: str, uri: str, timeout: float) -> dict[str, object]:
    """One resources/read, as JSON. ToolError for every way it can fail; cancellation propagates."""
    return await _asked(server, f"resources/read of {_clip(uri, 200)!r}", timeout, session.read_resource(uri))


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
