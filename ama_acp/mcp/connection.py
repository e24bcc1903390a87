"""Everything that touches the `mcp` SDK: transports, the client session, a call and its failures.

Imported by the hub only when a session has servers, so a session without servers never loads the SDK
(and pydantic, httpx2 and the rest behind it).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import signal
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from typing import IO, Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from ama_acp.errors import ToolError
from ama_acp.mcp.config import McpServerSpec
from ama_acp.mcp.results import McpCallResult, map_result
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


class StderrTail:
    """Reads a server's stderr pipe and keeps its last lines (for the log when the server fails)."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._partial = ""
        self.read_fd, write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        # The child's end: handed to the process as its stderr, closed here once the process has it.
        self.writer: IO[str] | None = os.fdopen(write_fd, "w")
        self.ended = anyio.Event()
        self._closed = False

    def close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def pump(self) -> None:
        try:
            while True:
                await anyio.wait_readable(self.read_fd)
                try:
                    chunk = os.read(self.read_fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                self._feed(chunk.decode("utf-8", "replace"))
        except (OSError, anyio.ClosedResourceError):
            pass  # the pipe was closed under the read: the tail so far is what there is
        finally:
            if self._partial:
                self._push(self._partial)
                self._partial = ""
            self.ended.set()

    def _feed(self, text: str) -> None:
        pieces = (self._partial + text).split("\n")
        self._partial = pieces.pop()
        if len(self._partial) > MAX_STDERR_LINE:
            self._push(self._partial)
            self._partial = ""
        for line in pieces:
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


GROUP_TERM_TIMEOUT = 2.0  # after SIGTERM to what is left of a stopped server's process group, before SIGKILL


def server_group(stderr: StderrTail) -> int | None:
    """The process group of the stdio server just started with this stderr pipe: its pid, since the SDK starts
    it with `start_new_session`. Found through /proc (the child of ama whose fd 2 is our pipe), because the SDK
    does not expose its process; None where there is no /proc or the child cannot be told apart."""
    try:
        pipe = f"pipe:[{os.fstat(stderr.read_fd).st_ino}]"
        me = os.getpid()
        children: set[int] = set()
        for task in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{task}/children", encoding="ascii") as f:
                children.update(int(pid) for pid in f.read().split())
    except (OSError, ValueError):
        return None
    for pid in children:
        try:
            if os.readlink(f"/proc/{pid}/fd/2") == pipe and os.getpgid(pid) == pid:
                return pid
        except OSError:
            continue
    return None


async def end_group(pgid: int, timeout: float = GROUP_TERM_TIMEOUT) -> None:  # noqa: ASYNC109 - a grace period
    """End what is left of a stopped stdio server's process group: SIGTERM, then SIGKILL after `timeout`.

    The SDK kills the group only when the server itself does not exit after its stdin closes; a server that
    exits on EOF leaves its helpers running (a wrapper's child, a worker it spawned), orphans of ama. Called
    once the transport has closed, so the server itself is gone; a group with no member left is ESRCH. Its
    pgid cannot have been reused meanwhile while any member lives (the kernel keeps a pid in use as a pgid).
    """
    with anyio.CancelScope(shield=True):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            return  # nothing left (or nothing of ours)
        log.info("MCP server process group %d: helpers were left after the server stopped; terminated", pgid)
        with anyio.move_on_after(timeout):
            while True:
                if not _group_running(pgid):
                    return
                await anyio.sleep(0.02)  # polling the group's end (no event tells it), bounded by the timeout above
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _group_running(pgid: int) -> bool:
    """Whether a member of the group is still running. A killed helper is a zombie until whoever inherited it
    reaps it (in a container, a PID 1 that reaps slowly or never): zombies do not count, so through /proc; where
    there is none, the group exists until every member is reaped."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = []
    if not entries:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(") ", 1)[1].split()  # after the command name: state, ppid, pgrp, …
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


@asynccontextmanager
async def _http_transport(spec: McpServerSpec) -> AsyncIterator[Streams]:
    # The headers go on the client, so every request (POST, GET stream, DELETE) carries them.
    client = create_mcp_http_client(headers=dict(spec.headers) or None)
    async with client, streamable_http_client(spec.url or "", http_client=client) as streams:
        yield streams  # type: ignore[misc]


def transport(spec: McpServerSpec, *, cwd: str | None, stderr: StderrTail | None) -> AbstractAsyncContextManager[Any]:
    """The SDK transport for a spec (entered by the caller, in the server's own task)."""
    if spec.transport == "stdio":
        assert stderr is not None and stderr.writer is not None
        params = StdioServerParameters(
            command=spec.command or "", args=list(spec.args), env=child_environment(spec), cwd=cwd
        )
        return stdio_client(params, errlog=stderr.writer)  # type: ignore[arg-type]
    if spec.transport == "http":
        return _http_transport(spec)
    return sse_client(spec.url or "", headers=dict(spec.headers) or None)


async def open_session(stack: AsyncExitStack, streams: Any, *, on_message: MessageHandlerFnT) -> ClientSession:
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


async def list_tools(session: ClientSession, *, max_pages: int = 20) -> list[dict[str, Any]]:
    """Every page of tools/list, as JSON (by alias), at most `max_pages` (a cursor that never ends is a bug
    on the server's side, not a reason to loop forever)."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(max_pages):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await session.list_tools(params=params)
        tools.extend(tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    return tools


async def call_tool(
    session: ClientSession, server: str, tool: str, arguments: dict[str, Any], timeout: float
) -> McpCallResult:
    """One tools/call. Raises ToolError for every way it can fail; cancellation propagates.

    The SDK's `read_timeout_seconds` bounds the wait for the answer and, when it passes, sends
    `notifications/cancelled` itself; a cancellation of the caller's scope sends it too (shielded, bounded).
    """
    try:
        result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            raise ToolError(f"MCP server {server!r} did not answer {tool!r} within {timeout:g} s") from None
        if exc.code == CONNECTION_CLOSED:
            raise ToolError(f"MCP server {server!r} closed its connection during {tool!r} (did it crash?)") from None
        raise ToolError(f"MCP server {server!r} answered {tool!r} with an error: {_clip(exc.message)}") from None
    except ValidationError:
        raise ToolError(f"MCP server {server!r} answered {tool!r} with a result that is not MCP") from None
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        raise ToolError(f"MCP server {server!r} is not connected") from None
    except RuntimeError as exc:
        # The SDK's checks on the result: structured content against the tool's output schema, a result
        # that asks for input ama cannot give.
        raise ToolError(f"MCP server {server!r}: {_clip(str(exc))}") from None
    return map_result(result.model_dump(by_alias=True, mode="json", exclude_none=True))


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
