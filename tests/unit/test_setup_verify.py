"""`ama setup`'s one cheap request, against real HTTP servers on 127.0.0.1: the suite's scripted model (which
lists models), a tiny server answering whatever a test tells it, and a port nobody listens on."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ama_acp.setup import choices as c
from ama_acp.setup.verify import MAX_MESSAGE, models_url, parse_models, verify
from ama_conformance.servers.model import MODELS, ScriptedModel

KEY = "sk-test-verify-0123456789"


class Canned:
    """Answers every GET with `status` and `body` after `delay` seconds; records the headers it got."""

    def __init__(self, status: int = 200, body: bytes | str | dict[str, Any] = b"{}", delay: float = 0.0) -> None:
        self.status, self.delay = status, delay
        self.body = (
            json.dumps(body).encode() if isinstance(body, dict) else body if isinstance(body, bytes) else body.encode()
        )
        self.seen: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.answer_to(self.headers)
                owner.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                if owner.delay:
                    time.sleep(owner.delay)
                self.send_response(owner.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(owner.body)))
                self.end_headers()
                try:
                    self.wfile.write(owner.body)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def answer_to(self, headers: Message) -> None:
        """Before each answer: a subclass may choose its status and body by the request's headers."""

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def canned() -> Iterator[Callable[..., Canned]]:
    made: list[Canned] = []

    def make(status: int = 200, body: bytes | str | dict[str, Any] = b"{}", delay: float = 0.0) -> Canned:
        server = Canned(status, body, delay)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert isinstance(port, int)
    return port


def custom(url: str, key_variable: str | None = "LOCAL_API_KEY") -> c.ProviderOption:
    return c.custom_option("local", url, key_variable)


def test_an_openai_compatible_server_lists_its_models_and_gets_the_key_as_bearer() -> None:
    with ScriptedModel() as model:
        verdict = verify(custom(model.openai_url), KEY)
        assert verdict.ok and verdict.models == MODELS and "the key works" in verdict.message
        assert model.requests[0].path == "/v1/models"
        assert model.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_anthropic_gets_x_api_key_and_a_version() -> None:
    with ScriptedModel() as model:
        option = c.builtin_option("anthropic", {"ANTHROPIC_BASE_URL": model.anthropic_url})
        assert models_url(option) == model.url + "/v1/models"
        verdict = verify(option, KEY)
        headers = model.requests[0].headers
        assert verdict.ok and headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in headers


def test_a_server_without_a_key_gets_no_auth_header() -> None:
    with ScriptedModel() as model:
        verdict = verify(custom(model.openai_url, None), None)
        assert verdict.ok and "the server answers" in verdict.message
        assert "authorization" not in model.requests[0].headers


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_says_so_and_where_to_get_another(canned: Callable[..., Canned], status: int) -> None:
    server = canned(status, {"error": {"message": f"Incorrect API key provided: {KEY}"}})
    option = c.builtin_option("openai", {"OPENAI_BASE_URL": server.url + "/v1"})
    verdict = verify(option, KEY)
    assert not verdict.ok and verdict.refused
    assert verdict.message == (
        f"the key was refused (HTTP {status}): check it, or create a new one at https://platform.openai.com/api-keys"
    )
    custom_verdict = verify(custom(server.url + "/v1"), KEY)
    assert custom_verdict.refused and "127.0.0.1" in custom_verdict.message and KEY not in custom_verdict.message


def test_an_unreachable_port_is_cannot_reach() -> None:
    port = unused_port()
    verdict = verify(custom(f"http://127.0.0.1:{port}/v1"), KEY)
    assert not verdict.ok and not verdict.refused
    assert verdict.message.startswith(f"cannot reach 127.0.0.1:{port}: ")
    assert "refused" in verdict.message.lower()


def test_a_server_that_does_not_answer_in_time(canned: Callable[..., Canned]) -> None:
    server = canned(200, b"{}", delay=2.0)
    started = time.monotonic()
    verdict = verify(custom(server.url), KEY, timeout=0.3)
    assert not verdict.ok and verdict.message == f"cannot reach {server.url[7:]}: no answer within 0.3 s"
    assert time.monotonic() - started < 1.5


def test_another_status_shows_the_servers_words_shortened_cleaned_and_without_the_key(
    canned: Callable[..., Canned],
) -> None:
    hostile = "\x1b[2J\x1b]0;pwned\x07 model overloaded for " + KEY + " " + "x" * 500
    server = canned(503, {"error": {"message": hostile}})
    verdict = verify(custom(server.url), KEY)
    assert not verdict.ok and not verdict.refused
    assert verdict.message.startswith(f"{server.url[7:]} answered HTTP 503: ")
    assert KEY not in verdict.message and "[the key]" in verdict.message
    assert "\x1b" not in verdict.message and "\x07" not in verdict.message
    assert len(verdict.message) < len(server.url) + 40 + MAX_MESSAGE and verdict.message.endswith("…")


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ({"error": "no such route"}, "no such route"),
        ({"detail": "Not Found"}, "Not Found"),
        ({"message": "bad gateway"}, "bad gateway"),
        (b"<html>plain text error</html>", "<html>plain text error</html>"),
        (b"", None),
    ],
)
def test_error_bodies_in_the_shapes_servers_use(
    canned: Callable[..., Canned], body: bytes | dict[str, Any], shown: str | None
) -> None:
    verdict = verify(custom(canned(404, body).url), None)
    assert not verdict.ok
    assert verdict.message.endswith(f"HTTP 404: {shown}" if shown else "HTTP 404")


def test_a_redirect_is_not_followed(canned: Callable[..., Canned]) -> None:
    server = canned(302, b"")
    verdict = verify(custom(server.url), KEY)
    assert not verdict.ok and "HTTP 302" in verdict.message and len(server.seen) == 1


def test_an_ok_body_that_is_not_a_model_list_is_still_ok(canned: Callable[..., Canned]) -> None:
    for body in (b"not json", b"[1, 2]", json.dumps({"data": "x"}).encode(), b"[" * 100_000):
        verdict = verify(custom(canned(200, body).url), KEY)
        assert verdict.ok and verdict.models == () and "no model list" in verdict.message


def test_hostile_model_ids_are_left_out() -> None:
    body = {
        "data": [
            {"id": "good-1"},
            {"id": "bad id"},
            {"id": "\x1b[31m"},
            {"id": 7},
            "x",
            {"id": "x" * 300},
            {"id": "good-1"},
            {"id": "Qwen/Qwen3-8B"},
        ]
    }
    assert parse_models(json.dumps(body).encode()) == ("good-1", "Qwen/Qwen3-8B")


def test_a_huge_body_is_not_read_past_the_cap(canned: Callable[..., Canned]) -> None:
    server = canned(200, b'{"data": [' + b'{"id": "m"},' * 500_000 + b'{"id": "m"}]}')
    verdict = verify(custom(server.url), KEY)
    assert verdict.ok and verdict.models == ()
