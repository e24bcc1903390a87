"""A person behind a proxy: `HTTP_PROXY` in ama's environment carries its model requests (providers/exchange.py
sends those through httpx, whose proxy rules people know), and without one a request goes straight to the server
(httpcore) — both through a real `ama -p` process against servers on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys

from tests.support.harness import Ama, clean_env, local_config
from tests.support.web_server import WebServer

KEY = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def _sse(text: str) -> list[bytes]:
    return [
        b'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "%s"}}]}\n\n' % text.encode(),
        b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]


def _ask(ama: Ama, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ama_acp", "-p", "hi", "--data-dir", str(ama.data), "--config", str(ama.config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ama.workspace,
        env=clean_env(ama.tmp, env),
    )


def test_a_proxy_named_in_the_environment_carries_the_model_request(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ama = Ama(tmp_path)
    base = "http://models.example.test/v1"  # a name only the proxy knows: a request sent straight would fail
    ama.config.write_text(local_config(base), encoding="utf-8")
    with WebServer() as proxy:
        proxy.route(f"{base}/chat/completions", content_type="text/event-stream", chunks=lambda: _sse("via the proxy"))
        out = _ask(ama, {**KEY, "HTTP_PROXY": proxy.url("")})
    assert out.returncode == 0, out.stderr
    assert "via the proxy" in out.stdout
    [hit] = proxy.requests
    assert (hit.method, hit.path) == ("POST", f"{base}/chat/completions")  # the absolute form a proxy is sent
    assert hit.headers["authorization"] == "Bearer test-key-abcdefgh"
    assert hit.headers["user-agent"].startswith("ama/")


def test_without_a_proxy_the_request_goes_straight_to_the_server(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ama = Ama(tmp_path)
    with WebServer() as server:
        server.route("/v1/chat/completions", content_type="text/event-stream", chunks=lambda: _sse("straight"))
        ama.config.write_text(local_config(server.url("/v1")), encoding="utf-8")
        out = _ask(ama, KEY)
    assert out.returncode == 0, out.stderr
    assert "straight" in out.stdout
    [hit] = server.requests
    assert (hit.method, hit.path) == ("POST", "/v1/chat/completions")
    assert hit.headers["user-agent"].startswith("ama/")  # ama's name, whichever way the request went
