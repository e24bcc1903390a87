"""`ama doctor` as a person runs it: a subprocess with an environment that holds nothing of the real home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ama_conformance.servers.model import ScriptedModel
from tests.support.harness import clean_env

KEY = "sk-doctor-e2e-9f8e7d6c5b4a3210"


def doctor(tmp: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env(tmp, {"AMA_CREDENTIALS": str(tmp / "credentials.toml"), **(extra or {})})
    out = subprocess.run(
        [sys.executable, "-m", "ama_acp", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp,
        env=env,
    )
    assert KEY not in out.stdout + out.stderr, "a key's value reached the output"
    assert "Traceback" not in out.stderr, out.stderr
    return out


@pytest.fixture
def server():
    with ScriptedModel() as s:
        yield s


def configure(tmp: Path, server: ScriptedModel) -> Path:
    """What `ama setup` leaves for a local OpenAI-compatible server: a config naming the key's variable and a
    0600 credentials file holding it."""
    config = tmp / "config.toml"
    config.write_text(
        'model = "local/gpt-4.1"\n\n[providers.local]\nkind = "openai"\n'
        f'base_url = "{server.openai_url}"\napi_key_env = "LOCAL_API_KEY"\n'
    )
    creds = tmp / "credentials.toml"
    creds.write_text(f'[keys]\nLOCAL_API_KEY = "{KEY}"\n')
    creds.chmod(0o600)
    return config


def test_nothing_configured_exits_1_with_the_hint(tmp_path):
    out = doctor(tmp_path)
    assert out.returncode == 1, out.stdout
    assert "model: none usable" in out.stdout and "ama setup" in out.stdout
    assert "result: a prompt would not work: no usable model" in out.stdout
    assert not (tmp_path / "xdg-data").exists() and not (tmp_path / "credentials.toml").exists()  # wrote nothing


def test_a_config_and_credentials_for_a_local_server_exit_0(tmp_path, server):
    config = configure(tmp_path, server)
    out = doctor(tmp_path, "--config", str(config))
    assert out.returncode == 0, out.stdout
    assert f"config file: {config} (found)" in out.stdout
    assert "holds LOCAL_API_KEY" in out.stdout and "key LOCAL_API_KEY: set in the credentials file" in out.stdout
    assert "model: local/gpt-4.1 (from config; key LOCAL_API_KEY)" in out.stdout
    assert f"provider local (openai, {server.openai_url}, key LOCAL_API_KEY): answers (HTTP 200" in out.stdout
    assert out.stdout.rstrip().endswith("result: a prompt would work")
    assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_json_parses_and_holds_no_key(tmp_path, server):
    config = configure(tmp_path, server)
    out = doctor(tmp_path, "--config", str(config), "--json")
    assert out.returncode == 0, out.stdout
    report = json.loads(out.stdout)
    assert report["promptWouldWork"] is True and report["model"]["id"] == "local/gpt-4.1"
    assert report["credentials"]["keys"] == ["LOCAL_API_KEY"] and report["credentials"]["mode"] == "0600"
    assert [p["result"] for p in report["providers"]] == ["ok"]


def test_a_refused_or_unreachable_provider_exits_1(tmp_path, server):
    config = configure(tmp_path, server)
    url = server.openai_url
    server.close()  # nothing listens there any more
    out = doctor(tmp_path, "--config", str(config))
    assert out.returncode == 1 and "cannot reach it" in out.stdout, out.stdout
    offline = doctor(tmp_path, "--config", str(config), "--no-network")
    assert offline.returncode == 0 and "not checked (--no-network)" in offline.stdout
    assert url in out.stdout


def test_a_malformed_config_is_reported_not_a_crash(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('model = "a/b"\n[providers.x\n')
    out = doctor(tmp_path, "--config", str(config), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert "line 2" in report["config"]["error"] and report["promptWouldWork"] is False


def test_keys_in_the_environment_are_named_never_shown(tmp_path, server):
    out = doctor(
        tmp_path,
        "--no-network",
        extra={"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY + "-2", "OPENAI_BASE_URL": server.openai_url},
    )
    assert out.returncode == 0, out.stdout
    assert "key OPENAI_API_KEY: set in the environment" in out.stdout
    assert "key ANTHROPIC_API_KEY: set in the environment" in out.stdout
    assert "model: anthropic/claude-sonnet-4-5 (ANTHROPIC_API_KEY is set in the environment)" in out.stdout
