"""The test tools over streamable HTTP (or SSE) on 127.0.0.1: the official SDK's server, in a thread of the test's
process by default, or in a subprocess.

`running_http_server()` serves toolset.py's `MCPServer` app with uvicorn on a real socket of 127.0.0.1 and yields
its URL. By default in a thread of the test's own process (its own event loop): the SDK is imported once per
pytest process (ama's in-process MCP client imports it anyway), where a subprocess costs ~0.8 s of CPU a start.
The wire is the same: a real socket, the SDK's server code. What differs in a thread: `pid` and `environ` answer
for the test's process, `MCP_TEST_DIR` is the only variable of `env` it takes (toolset.py `test_dir`), `crash`
fails its call instead of ending the process, and nothing the server logs reaches the test process's handlers
(ama's log, when ama runs in-process): a server process wrote it to a stderr nobody read.

`process=True` starts `python -m tests.support.mcp_servers.http_server --transport http|sse`, which binds a free
port on 127.0.0.1, prints `PORT <n>` on stdout and serves until killed: for a test whose subject is the server's
process (kill it mid-call like a server that goes away, its exit).
"""

from __future__ import annotations

import argparse
import logging
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[bytes] | None  # None for a server in a thread of the test's process


@contextmanager
def running_http_server(
    transport: str = "http",
    *,
    env: dict[str, str] | None = None,
    start_timeout: float = 20.0,
    process: bool = False,
) -> Iterator[HttpServer]:
    if process:
        with _server_process(transport, env=env, start_timeout=start_timeout) as server:
            yield server
    else:
        with _server_thread(transport, env=env, start_timeout=start_timeout) as server:
            yield server


def _path(transport: str) -> str:
    return "/mcp" if transport == "http" else "/sse"


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


class _FromThread(logging.Filter):
    """Drops the records logged from one thread (the server's), whatever the logger."""

    def __init__(self, thread: threading.Thread) -> None:
        super().__init__()
        self.thread = thread

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread.ident


@contextmanager
def _quiet_thread(thread: threading.Thread) -> Iterator[None]:
    """Keeps what one thread logs away from every handler: a logger's own filters decide before any handler (its
    own or an ancestor's) is called, so each logger is given one (the root, and those that exist: the server's
    modules are imported, and their loggers made, before its thread starts)."""
    quiet = _FromThread(thread)
    existing = list(logging.Logger.manager.loggerDict.values())  # one step: no thread adds a logger meanwhile
    loggers = [logging.getLogger()] + [logger for logger in existing if isinstance(logger, logging.Logger)]
    for logger in loggers:
        logger.addFilter(quiet)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(quiet)


@contextmanager
def _server_thread(transport: str, *, env: dict[str, str] | None, start_timeout: float) -> Iterator[HttpServer]:
    import anyio
    import uvicorn

    from tests.support.mcp_servers.toolset import build_server

    unknown = set(env or {}) - {"MCP_TEST_DIR"}
    if unknown:
        raise ValueError(f"a server in the test's process takes no environment but MCP_TEST_DIR: {sorted(unknown)}")
    test_dir = (env or {}).get("MCP_TEST_DIR")
    # MCPServer's constructor calls logging.basicConfig (a handler on the root logger, where it has none): that is
    # the server process's business, not the test process's.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        server = build_server("httpserver", test_dir=Path(test_dir) if test_dir else None, in_process=True)
        app = server.streamable_http_app() if transport == "http" else server.sse_app()
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    sock = _listening_socket()
    # No log config (uvicorn's would reconfigure the test process's logging), no access log (URLs carry tokens in
    # some tests), and a bounded wait for open connections at the end.
    config = uvicorn.Config(
        app, log_config=None, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5
    )
    userver = uvicorn.Server(config)
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            anyio.run(userver.serve, [sock])
        except BaseException as exc:  # reported by the waits below
            failed.append(exc)

    thread = threading.Thread(target=serve, name=f"mcp-{transport}-test-server", daemon=True)
    try:
        with _quiet_thread(thread):
            thread.start()
            deadline = time.monotonic() + start_timeout
            while not userver.started:  # polling a condition (uvicorn's flag) with a deadline
                if failed or not thread.is_alive():
                    raise RuntimeError(f"the HTTP test server did not start: {failed!r}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the HTTP test server did not start within {start_timeout} s")
                time.sleep(0.005)
            port = sock.getsockname()[1]
            try:
                yield HttpServer(url=f"http://127.0.0.1:{port}{_path(transport)}", process=None)
            finally:
                userver.should_exit = True
                thread.join(timeout=30)
        if thread.is_alive():
            raise RuntimeError("the HTTP test server did not stop within 30 s")
    finally:
        userver.should_exit = True
        sock.close()


@contextmanager
def _server_process(transport: str, *, env: dict[str, str] | None, start_timeout: float) -> Iterator[HttpServer]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_servers.http_server", "--transport", transport],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + start_timeout
        # The first line is the port: wait for it to be readable with the deadline, then read it.
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=start_timeout):
                raise RuntimeError(f"the HTTP test server printed no port within {start_timeout} s")
        line = proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the HTTP test server did not start: {line!r}")
        port = int(line.split()[1])
        _wait_listening(port, deadline)
        yield HttpServer(url=f"http://127.0.0.1:{port}{_path(transport)}", process=proc)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_listening(port: int, deadline: float) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # polling a condition (the port accepts) with a deadline


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["http", "sse"], default="http")
    ns = parser.parse_args()

    import anyio
    import uvicorn

    from tests.support.mcp_servers.toolset import build_server

    server = build_server("httpserver")
    app: Any = server.streamable_http_app() if ns.transport == "http" else server.sse_app()
    sock = _listening_socket()
    sys.stdout.write(f"PORT {sock.getsockname()[1]}\n")
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
