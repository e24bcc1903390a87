"""`BackgroundServer`: an HTTP server on a host and port (0: any free one) serving in a daemon thread, so it runs
beside any event loop; the scripted model (model_server.py) and the tests' model servers are built on it.

It serves one connection at a time as it comes (`handle_request`, each handled in a thread of its own) rather than
with `serve_forever`, which polls for its shutdown flag: every close would wait out that interval. `close()` wakes
the waiting accept with a connection of its own instead, which says nothing, so its handler reads end-of-file and
ends at once.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class OwnedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler still streaming must not hold up close()
    owner: Any

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up mid-request (a reset, a broken pipe: an agent cancelling, a test's hostile client)
        # is how connections end here, not an error: the default prints its traceback into the run's stderr.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class BackgroundServer:
    """Subclasses name their `handler_class`; handlers reach this object as `self.server.owner`."""

    handler_class: type[BaseHTTPRequestHandler]
    thread_name = "model-server"

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._closing = threading.Event()  # set by close(): wakes handlers that wait or stream
        self._httpd: OwnedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://{self._host}:{self._httpd.server_address[1]}"

    @property
    def openai_url(self) -> str:
        """Base URL for an OpenAI client (what OPENAI_BASE_URL expects)."""
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """Base URL for an Anthropic client (what ANTHROPIC_BASE_URL expects; it appends /v1/messages)."""
        return self.url

    def start(self) -> Self:
        self._httpd = OwnedHTTPServer((self._host, self._port), self.handler_class)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._serve, args=(self._httpd,), name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def _serve(self, httpd: OwnedHTTPServer) -> None:
        while not self._closing.is_set():
            httpd.handle_request()

    def close(self) -> None:
        self._closing.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None and self._thread is not None:
            # The wake. Should the server be unreachable (its socket broken), the join below gives the thread its
            # 5 s and leaves it, a daemon, to the end of the process: nothing of a server that cannot be reached
            # is left to close but its socket.
            with contextlib.suppress(OSError):
                socket.create_connection((self._host, httpd.server_address[1]), timeout=1).close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if httpd is not None:
            httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
