"""A web server on 127.0.0.1 for web_fetch's tests: routes a test declares, over real HTTP (no network).

    with WebServer() as web:
        web.route("/page", body=b"<html>...", content_type="text/html")
        web.route("/moved", status=302, headers={"Location": "/page"})
        ...  # fetch web.url("/page")
        assert web.hits == ["/page"]

POST is answered as GET is, the request's body kept in its `Hit`. A route may also stream (`chunks`: an iterable of bytes, each flushed), wait before answering (`hold`: an Event
the handler waits on, bounded by the server's life) or be a function of the request (`handler`).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from ama_conformance.servers.background import OwnedHTTPServer


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    chunks: Callable[[], Iterable[bytes]] | None = None  # streamed without Content-Length
    hold: threading.Event | None = None  # the answer waits for it (or for the server to stop)


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes = b""
    method: str = "GET"


class WebServer:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        """`tls`: serve https with this server context (the names clients ask for by SNI land in `sni`)."""
        self.sni: list[str | None] = []
        self.routes: dict[str, Route] = {}
        self.requests: list[Hit] = []
        self.stopping = threading.Event()
        self.hit = threading.Event()  # set by every request, for tests that wait for the first
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                self._serve(b"")

            def do_POST(self) -> None:  # a model request's (tests of providers/exchange.py); the body is kept
                self._serve(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _serve(self, body: bytes) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append(Hit(self.path, headers, body, self.command))
                server.hit.set()
                route = server.routes.get(self.path.split("?", 1)[0])
                if route is None:
                    route = Route(status=404, body=b"<html><title>Nope</title><p>No such page here.</p></html>")
                if route.hold is not None:
                    while not (route.hold.is_set() or server.stopping.is_set()):
                        route.hold.wait(0.05)
                try:
                    self._answer(route)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client left (a cap, a cancel): what the test is about

            def _answer(self, route: Route) -> None:
                self.send_response(route.status)
                if route.content_type is not None:
                    self.send_header("Content-Type", route.content_type)
                for k, v in route.headers.items():
                    self.send_header(k, v)
                if route.chunks is None:
                    self.send_header("Content-Length", str(len(route.body)))
                    self.end_headers()
                    self.wfile.write(route.body)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in route.chunks():
                    if server.stopping.is_set():
                        return
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self.httpd = OwnedHTTPServer(("127.0.0.1", 0), Handler)  # quiet about a client that hung up
        self.httpd.daemon_threads = True
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def route(self, path: str, **kwargs: Any) -> Route:
        self.routes[path] = r = Route(**kwargs)
        return r

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    @property
    def hits(self) -> list[str]:
        return [h.path for h in self.requests]

    def __enter__(self) -> WebServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
