"""ama's own stdio transport for MCP servers: the process, a bounded line reader, a writer, a bounded stop.

Written here rather than taken from `mcp.client.stdio` for two reasons:
- The SDK's reader re-splits its whole buffer on every read, quadratic in a line's length with no bound on
  its memory (see mcp/lines.py), and it cannot be configured. Ours hands the SDK's `ClientSession` the same
  memory streams the SDK's transport would, fed by `LineSplitter` (16 MiB a line; past it the server fails).
- The SDK's shutdown waits 2 s after closing stdin, 2 s after SIGTERM and 2 s for the reap: a server that
  ignores both keeps ama from exiting for 4–6 s. Here the whole stop is bounded well under a second
  (`STOP_GRACE` + `TERM_GRACE`), so ama exits within 1 s of stdin EOF whatever its servers do.

The server runs in a session and process group of its own; once it is gone, whatever is left of its group (the
children a wrapper such as `npx` or `uvx` started) is stopped too.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import IO

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ama_acp.mcp.lines import MAX_LINE_BYTES, LineSplitter, LineTooLong

__all__ = ["STOP_GRACE", "TERM_GRACE", "end_group", "stdio_transport"]

log = logging.getLogger("ama.mcp")

# After stdin closes, how long a server has to exit by itself (the MCP spec's first step).
STOP_GRACE = 0.25
# After SIGTERM to its process group, before SIGKILL.
TERM_GRACE = 0.25
# After SIGKILL, how long to wait for the event loop to see the death (only an unkillable process runs it out).
REAP_TIMEOUT = 0.25
# How long the writer may take to pass on what the session already handed it, before stdin closes.
FLUSH_TIMEOUT = 0.1
READ_CHUNK = 65536

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


def parse_line(line: bytes) -> SessionMessage | Exception:
    """One line of the server's stdout: a message, or the error that says why it is not one."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError (invalid JSON, invalid UTF-8, not JSON-RPC)
        return exc


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    stderr: IO[str] | int,
    line_limit: int = MAX_LINE_BYTES,
) -> AsyncIterator[Streams]:
    """Start the server; yield the session's streams (what the SDK's `ClientSession` reads and writes). Raises OSError
    when the program cannot be started. On exit (cancelled or not, shielded) the server is stopped: stdin
    closed, SIGTERM to its group after `STOP_GRACE`, SIGKILL after `TERM_GRACE`, and what is left of its group
    after it is gone ended too."""
    process = await anyio.open_process(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    # No await between the spawn and the task group's `finally`: a cancellation there would leak the process.
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(line_limit)
        async with read_send:
            try:
                while True:
                    chunk = await process.stdout.receive(READ_CHUNK)
                    try:
                        lines = splitter.feed(chunk)
                    except LineTooLong as exc:
                        await read_send.send(exc)
                        return
                    for line in lines:
                        if line.strip():  # a blank line is no message and no garbage either
                            await read_send.send(parse_line(line))
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return  # the server closed its stdout, or the session is gone

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_receive:
                async for message in write_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading (it may still be alive): the session must see the connection end
            # rather than wait forever for an answer to what could not be sent.
            await read_send.aclose()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_receive, write_send
        finally:
            with anyio.CancelScope(shield=True):
                read_receive.close()
                write_send.close()
                with anyio.move_on_after(FLUSH_TIMEOUT):
                    await writer_done.wait()
                await stop_process(process)
                await end_group(process.pid)
            tg.cancel_scope.cancel()


async def stop_process(process: anyio.abc.Process) -> None:
    """Stdin closed, then SIGTERM to the group, then SIGKILL: every wait bounded (shield it from cancellation)."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, STOP_GRACE):
        _signal_group(process.pid, signal.SIGTERM)
        if not await _exited(process, TERM_GRACE):
            _signal_group(process.pid, signal.SIGKILL)
            if not await _exited(process, REAP_TIMEOUT):
                log.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    # The asyncio subprocess transport stays open (and warns when collected) while a survivor holds a pipe;
    # nothing public closes it.
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError, ProcessLookupError):
            close()


async def _exited(process: anyio.abc.Process, timeout: float) -> bool:  # a grace period
    """Whether the process exited within `timeout`, by polling its return code (not `wait()`: on asyncio it also
    waits for the pipes' EOF, which a helper holding them delays without end)."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)  # polling the exit (the child watcher sets returncode), bounded by the deadline
    return True


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def end_group(pgid: int, timeout: float = TERM_GRACE) -> None:  # a grace period
    """End what is left of a stopped stdio server's process group: SIGTERM, then SIGKILL after `timeout`.

    A server that exits on EOF leaves its helpers running (a wrapper's child, a worker it spawned), orphans of
    ama. Called once the server itself is gone; a group with no member left is ESRCH. Its pgid cannot have been
    reused meanwhile while any member lives (the kernel keeps a pid in use as a pgid).
    """
    with anyio.CancelScope(shield=True):
        if not _group_running(pgid):
            return
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
        _signal_group(pgid, signal.SIGKILL)


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
