"""The test tools over streamable HTTP (or SSE) on 127.0.0.1, in a subprocess.

`python -m tests.support.mcp_servers.http_server --transport http|sse` binds a free port on 127.0.0.1,
prints `PORT <n>` on stdout and serves until killed. `running_http_server()` starts it and yields its URL;
a subprocess (not a thread) so a test can kill it mid-call like a server that goes away.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def running_http_server(
    transport: str = "http", *, env: dict[str, str] | None = None, start_timeout: float = 20.0
) -> Iterator[HttpServer]:
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
        path = "/mcp" if transport == "http" else "/sse"
        _wait_listening(port, deadline)
        yield HttpServer(url=f"http://127.0.0.1:{port}{path}", process=proc)
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
    app = server.streamable_http_app() if ns.transport == "http" else server.sse_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sys.stdout.write(f"PORT {sock.getsockname()[1]}\n")
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
