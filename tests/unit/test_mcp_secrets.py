"""Credentials the editor passes to MCP servers (env, headers) are redacted like ama's own secrets
(session/mcp.py `secret_values`, secrets.register_secret_values), and only those: a PYTHONPATH stays."""

from __future__ import annotations

from pathlib import Path

from ama_acp.mcp.config import McpServerSpec, parse_servers
from ama_acp.redact import Redactor
from ama_acp.secrets import secret_values as process_secrets
from ama_acp.session.mcp import secret_values
from ama_acp.session.store.session_store import SessionStore

TOKEN = "sk-mcp-abcdefghijklmnop"
BEARER = "eyJhbGciOiJIUzI1NiJ9.payload.sig"


def specs() -> list[McpServerSpec]:
    servers, problems = parse_servers(
        [
            {
                "name": "files",
                "command": "srv",
                "args": [],
                "env": [{"name": "GITHUB_TOKEN", "value": TOKEN}, {"name": "PYTHONPATH", "value": "/work/project"}],
            },
            {
                "type": "http",
                "name": "web",
                "url": "http://127.0.0.1:1/mcp",
                "headers": [{"name": "Authorization", "value": f"Bearer {BEARER}"}, {"name": "Accept", "value": "x/y"}],
            },
        ]
    )
    assert not problems
    return servers


def test_only_credentials_are_secret_values() -> None:
    values = secret_values(specs())
    assert TOKEN in values and f"Bearer {BEARER}" in values and BEARER in values
    assert "/work/project" not in values and "x/y" not in values


def test_registered_values_reach_the_process_redactor_and_the_session_file(tmp_path: Path) -> None:
    from ama_acp.conversation.messages import TextPart, UserMessage
    from ama_acp.secrets import register_secret_values
    from ama_acp.session.store import entries as en

    store = SessionStore(tmp_path)  # no redactor given: the process's, which learns registered values
    writer = store.create(en.Header(session_id="ses_mcpsecrets1", cwd=str(tmp_path)))
    register_secret_values(secret_values(specs()))
    assert TOKEN in process_secrets({}) and BEARER in process_secrets({})
    writer.append(en.MessageEntry(message=UserMessage(content=[TextPart(f"env says {TOKEN} and {BEARER}")])))
    writer.close()
    text = (tmp_path / "sessions" / "ses_mcpsecrets1.jsonl").read_text()
    assert TOKEN not in text and BEARER not in text and "[redacted]" in text
    assert Redactor(process_secrets({})).redact(f"x {TOKEN}") == "x [redacted]"
