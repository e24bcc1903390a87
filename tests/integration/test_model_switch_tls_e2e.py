"""A model switch between a plain-http provider (a local model server) and an https one, in one session
(providers/tls.py meets the model switch): each request goes out with its own provider's TLS — the https one's
verified, trusting the CA that SSL_CERT_FILE names and failing closed on any other, the http one's none —, the
conversation carries over from one provider to the other, and the meter follows the model's window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ama_acp.client.connection import AgentProcess
from tests.support.harness import Ama, agent_text, kinds, local_config, run_ama, usage_updates
from tests.support.json_values import session_id
from tests.support.llm_server import LLMServer, TlsLLMServer
from tests.support.tls_certs import tls_server

pytestmark = pytest.mark.anyio

KEY = {"LOCAL_TEST_KEY": "test-key-abcdefgh"}


def _configure(ama: Ama, plain: LLMServer, secure: TlsLLMServer) -> None:
    """`local/m` on the plain-http server (window 100,000, no retry), `secure/b` on the https one (50,000, two
    retries: a certificate failure must still not be retried)."""
    ama.config.write_text(
        local_config(
            plain.openai_url,
            tail=f"""
[providers.secure]
kind = "openai"
base_url = "{secure.openai_url}"
api_key_env = "LOCAL_TEST_KEY"
max_retries = 2

[[models]]
id = "secure/b"
context_window = 50000
""",
        )
    )


async def _open(conn: AgentProcess, ama: Ama) -> str:
    await conn.initialize()
    sid = session_id(await conn.request("session/new", {"cwd": str(ama.workspace), "mcpServers": []}))
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid))
    return sid


async def _switch(conn: AgentProcess, sid: str, model: str) -> None:
    start = len(conn.updates_for(sid))
    await conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": model})
    await conn.wait_for(lambda: "usage_update" in kinds(conn, sid)[start:])


def _said(conn: AgentProcess, sid: str, since: int) -> str:
    return "".join(u["content"]["text"] for u in conn.updates_for(sid, "agent_message_chunk")[since:])


async def test_a_switch_to_an_https_model_trusts_the_ca_ssl_cert_file_names_and_back(tmp_path: Path) -> None:
    server_tls, ca = tls_server(tmp_path, "localhost")
    (tmp_path / "ca.pem").write_text(ca)
    ama = Ama(tmp_path)
    with LLMServer() as plain, TlsLLMServer(server_tls) as secure:
        _configure(ama, plain, secure)
        plain.enqueue({"text": "from http", "usage": {"input": 900, "output": 4}}, {"text": "http again"})
        secure.enqueue({"text": "from https", "usage": {"input": 1200, "output": 4}})
        # A process of its own: the verified context is made once per process, from its environment.
        env = {**KEY, "SSL_CERT_FILE": str(tmp_path / "ca.pem")}
        async with run_ama(ama, env=env, process=True) as conn:
            sid = await _open(conn, ama)
            assert (await conn.prompt(sid, "first", timeout=20))["stopReason"] == "end_turn"
            await _switch(conn, sid, "secure/b")
            said = len(conn.updates_for(sid, "agent_message_chunk"))
            assert (await conn.prompt(sid, "second", timeout=20))["stopReason"] == "end_turn"
            assert _said(conn, sid, said) == "from https"
            assert usage_updates(conn, sid)[-1]["size"] == 50_000
            await _switch(conn, sid, "local/m")
            assert (await conn.prompt(sid, "third", timeout=20))["stopReason"] == "end_turn"
            assert agent_text(conn, sid).endswith("http again")
    assert [r.body["model"] for r in plain.requests] == ["m", "m"]
    assert [r.body["model"] for r in secure.requests] == ["b"]
    carried = str(secure.requests[0].body["messages"])
    assert "first" in carried and "from http" in carried  # the conversation went over to the https provider
    assert "from https" in str(plain.requests[1].body["messages"])  # and came back


async def test_a_switch_to_an_https_model_whose_ca_is_not_trusted_fails_closed_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    server_tls, _ = tls_server(tmp_path, "localhost")
    ama = Ama(tmp_path)
    with LLMServer() as plain, TlsLLMServer(server_tls) as secure:
        _configure(ama, plain, secure)
        plain.enqueue({"text": "from http"}, {"text": "still here"})
        secure.enqueue({"text": "never read"})
        async with run_ama(ama, env=KEY) as conn:
            sid = await _open(conn, ama)
            await conn.prompt(sid, "first", timeout=20)
            await _switch(conn, sid, "secure/b")
            said = len(conn.updates_for(sid, "agent_message_chunk"))
            assert (await conn.prompt(sid, "second", timeout=20))["stopReason"] == "end_turn"
            told = _said(conn, sid, said)
            assert "Cannot trust secure" in told and "SSL_CERT_FILE" in told and "Retrying" not in told
            await _switch(conn, sid, "local/m")
            assert (await conn.prompt(sid, "third", timeout=20))["stopReason"] == "end_turn"
            assert agent_text(conn, sid).endswith("still here")
    assert secure.requests == [] and secure.pending == 1  # no request crossed the failed handshake
    assert len(plain.requests) == 2
    assert "third" in str(plain.requests[1].body["messages"])
