"""One secret rule (ama_acp/secrets.py) for session files, logs and commands' environments."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ama_acp import secrets
from ama_acp.config import Config, ProviderConfig
from ama_acp.providers.endpoints import BUILTIN_ENDPOINTS
from ama_acp.redact import REDACTED, Redactor
from ama_acp.tools.workspace import command_env

SECRET = [
    "GITHUB_TOKEN",
    "GITHUB_TOKEN_RW",
    "TOKEN",
    "AWS_SESSION_TOKEN",
    "OPENAI_API_KEY",
    "APIKEY",
    "MY_APIKEY",
    "X_API_KEY_2",
    "CLIENT_SECRET",
    "AWS_SECRET_ACCESS_KEY",
    "DB_PASSWORD",
    "PGPASSWORD",
    "MYSQL_PASSWD",
    "DB_PASS",
    "DB_PWD",
    "SMTP_PW",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_PRIVATE_KEY",
    "npm_config_token",
    "githubToken",
    "VAULT_ACCESS_TOKEN",
    "GPG_PASSPHRASE",
]
ORDINARY = [
    "PATH",
    "HOME",
    "PWD",
    "OLDPWD",
    "PASSTHROUGH",
    "GIT_PASSTHROUGH_MODE",
    "TOKENIZERS_PARALLELISM",
    "MAX_TOKENS",
    "KEYBOARD",
    "SSH_AUTH_SOCK",
    "TERM",
    "LANG",
    "COMPASS_HOME",
    "BYPASS_CACHE",
]


@pytest.mark.parametrize("name", SECRET)
def test_secret_looking_names(name):
    assert secrets.is_secret_name(name)


@pytest.mark.parametrize("name", ORDINARY)
def test_ordinary_names_are_not_secret(name):
    assert not secrets.is_secret_name(name)


def test_every_built_in_providers_key_variable_is_secret_by_name():
    for name in [e.api_key_env for e in BUILTIN_ENDPOINTS.values()]:
        assert secrets.is_secret_name(name), name


def test_a_configured_api_key_env_is_secret_whatever_its_name(monkeypatch):
    monkeypatch.setattr(secrets, "_configured", set())
    assert not secrets.is_secret("LOCAL_KEY")
    secrets.register_config(Config(providers={"local": ProviderConfig(api_key_env="LOCAL_KEY")}))
    assert secrets.is_secret("LOCAL_KEY")


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789abc", min_size=1, max_size=30))
def test_commands_and_session_files_agree_on_every_name(name):
    """Whatever the name: its value reaches commands exactly when it is not redacted from session files."""
    assume(name not in ("PATH", "TERM", "PAGER", "GIT_PAGER", "GIT_TERMINAL_PROMPT"))  # set for every command
    value = "v4lue-" + "x" * 10
    env = {name: value, "PATH": "/bin"}
    passed = name in command_env(env) and command_env(env)[name] == value
    redacted = REDACTED.encode() in Redactor.from_environ(env).redact_line(json.dumps({"text": value}).encode())
    assert passed != redacted


def test_the_secret_values_are_taken_out_of_commands_and_lines(monkeypatch):
    monkeypatch.setattr(secrets, "_configured", set())
    secrets.register_secret_names(["LOCAL_KEY"])
    env = {
        "GITHUB_TOKEN_RW": "ghp_rw_0123456789",
        "DB_PASS": "hunter2hunter2",
        "TOKEN": "plain-token-value",
        "APIKEY": "apikey-value-123",
        "LOCAL_KEY": "local-key-value-1",
        "PASSTHROUGH": "keep-this-value",
        "PATH": "/usr/bin",
    }
    child = command_env(env)
    assert set(child) >= {"PASSTHROUGH", "PATH"}
    assert not {"GITHUB_TOKEN_RW", "DB_PASS", "TOKEN", "APIKEY", "LOCAL_KEY"} & set(child)
    redactor = Redactor.from_environ(env)
    line = json.dumps({"out": " ".join(f"{k}={v}" for k, v in env.items())}).encode()
    text = redactor.redact_line(line).decode()
    for name in ("GITHUB_TOKEN_RW", "DB_PASS", "TOKEN", "APIKEY", "LOCAL_KEY"):
        assert env[name] not in text
    assert "keep-this-value" in text


def test_a_line_too_deep_to_walk_is_still_redacted():
    redactor = Redactor(["s3cr3t-value-99"])
    line = ("[" * 3000 + '"s3cr3t-value-99"' + "]" * 3000).encode()
    out = redactor.redact_line(line)
    assert b"s3cr3t-value-99" not in out and REDACTED.encode() in out
