"""`ama models cache-probe MODEL` against the real local model server, which bills with prefix caching
(tests/support/prompt_cache.py): both dialects, a catalog whose minimum holds and one whose minimum does not."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ama_acp.catalog_cli import run_cache_probe
from ama_acp.config import Config, load_config
from tests.support.llm_server import LLMServer
from tests.support.prompt_cache import PromptCache


@pytest.fixture
def server() -> Iterator[LLMServer]:
    with LLMServer() as s:
        yield s


def _config(tmp_path: Path, server: LLMServer, min_tokens: int, server_min: int) -> Path:
    server.prompt_cache = PromptCache(ttl=300.0, min_tokens=server_min)
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
[providers.oa]
kind = "openai"
base_url = "{server.openai_url}"

[providers.an]
kind = "anthropic"
base_url = "{server.anthropic_url}"

[[models]]
id = "oa/m"
context_window = 32768
price = {{ input = 2.0, output = 8.0, cache_read = 0.5 }}
cache = {{ ttl_seconds = 600, min_tokens = {min_tokens} }}

[[models]]
id = "an/m"
context_window = 32768
price = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}
cache = {{ ttl_seconds = 300, min_tokens = {min_tokens} }}
""",
        encoding="utf-8",
    )
    return path


def _probe(path: Path, model: str, tmp_path: Path, *extra: str) -> int:
    """The probe with no gap between its requests unless `extra` gives one (the gap has a test of its own)."""

    def load(args: argparse.Namespace) -> Config:
        return load_config(args.config, str(tmp_path / "data"))

    return run_cache_probe([model, "--json", "--config", str(path), "--gap-ms", "0", *extra], load)


@pytest.mark.parametrize("model", ["oa/m", "an/m"])
def test_the_second_request_reads_the_prompt_from_the_cache_and_the_minimum_holds(
    model: str, server: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, server, min_tokens=1024, server_min=1024)
    server.enqueue({"text": "ok", "usage": "cache"}, {"text": "ok", "usage": "cache"})
    assert _probe(path, model, tmp_path) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # two identical requests
    first, second = server.prompt_cache.log if server.prompt_cache else []
    assert first["cache_read"] == 0
    assert second["cache_read"] >= 1024
    assert report["second"]["usage"]["cacheRead"] == second["cache_read"]
    verdicts = {v["fact"]: v for v in report["verdicts"]}
    assert verdicts["read"]["holds"] is True
    assert verdicts["minTokens"]["holds"] is True
    assert verdicts["lifetime"]["holds"] is None and "not checked" in verdicts["lifetime"]["text"]
    # The cost of the second request, and what it would have cost without the cache: less with it.
    assert report["second"]["cost"] < report["uncachedCost"]
    if model == "an/m":
        assert first["cache_write"] > 0  # Anthropic bills the write of the first request


def test_a_catalog_minimum_the_provider_does_not_keep_is_reported_as_not_holding(
    server: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The catalog claims 1,024 tokens, but this server only caches from 100,000: the prompt passes the catalog's
    # minimum and is not cached, so the catalog's fact does not hold for this server.
    path = _config(tmp_path, server, min_tokens=1024, server_min=100_000)
    server.enqueue({"text": "ok", "usage": "cache"}, {"text": "ok", "usage": "cache"})
    assert _probe(path, "oa/m", tmp_path) == 0
    report = json.loads(capsys.readouterr().out)
    verdicts = {v["fact"]: v for v in report["verdicts"]}
    assert verdicts["read"]["holds"] is False
    assert verdicts["minTokens"]["holds"] is False


def test_a_failed_request_ends_the_probe_with_status_1(
    server: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, server, min_tokens=1024, server_min=1024)
    server.enqueue({"status": 400, "message": "no such model"})
    assert _probe(path, "oa/m", tmp_path) == 1
    report = json.loads(capsys.readouterr().out)
    assert "no such model" in report["first"]["failure"]
    assert len(server.requests) == 1  # the second is not sent


def test_text_report_names_the_facts_and_says_the_lifetime_is_not_checked(
    server: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, server, min_tokens=1024, server_min=1024)
    server.enqueue({"text": "ok", "usage": "cache"}, {"text": "ok", "usage": "cache"})

    def load(args: argparse.Namespace) -> Config:
        return load_config(args.config, str(tmp_path / "data"))

    assert run_cache_probe(["an/m", "--config", str(path), "--gap-ms", "0"], load) == 0
    out = capsys.readouterr().out
    assert "catalog: lifetime 300 s, minimum 1,024 tokens" in out
    assert "minTokens: holds" in out
    assert "lifetime: not told — not checked" in out
    assert "without the cache the second request would have cost $" in out


def test_the_scripted_model_cannot_be_probed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")

    def load(args: argparse.Namespace) -> Config:
        return load_config(str(empty), str(tmp_path / "data"))

    assert run_cache_probe(["scripted/demo"], load) == 2
    assert "no prompt cache" in capsys.readouterr().err


# --- seed 001_'s options: --tokens, --gap-ms; 16 output tokens ----------------------------------------------------


@pytest.mark.parametrize("model", ["oa/m", "an/m"])
def test_the_two_requests_go_the_gap_apart_and_ask_for_16_output_tokens(
    model: str, server: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, server, min_tokens=1024, server_min=1024)
    server.enqueue({"text": "ok", "usage": "cache"}, {"text": "ok", "usage": "cache"})
    assert _probe(path, model, tmp_path, "--gap-ms", "300") == 0
    first, second = server.requests
    assert second.time - first.time >= 0.3
    assert first.body["max_tokens"] == 16 and second.body == first.body


def test_tokens_sets_the_prompts_size(server: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(tmp_path, server, min_tokens=1024, server_min=1024)
    server.enqueue({"text": "ok", "usage": "cache"}, {"text": "ok", "usage": "cache"})
    assert _probe(path, "oa/m", tmp_path, "--tokens", "6000") == 0
    report = json.loads(capsys.readouterr().out)
    assert 6000 <= report["promptEstimate"] < 6100  # the default for a 1,024 minimum is 2,048


@pytest.mark.parametrize("bad", [["--tokens", "0"], ["--tokens", "x"], ["--gap-ms", "-1"], ["--tokens", "10" * 9]])
def test_bad_tokens_or_gap_are_a_usage_error(bad: list[str], server: LLMServer, tmp_path: Path) -> None:
    path = _config(tmp_path, server, min_tokens=1024, server_min=1024)
    with pytest.raises(SystemExit) as exited:
        _probe(path, "oa/m", tmp_path, *bad)
    assert exited.value.code == 2 and not server.requests


def test_ama_models_help_names_cache_probe_and_its_options() -> None:
    """Through the real command: the catalog's help leads to the probe, whose help names the seed's options."""
    run = [sys.executable, "-m", "ama_acp", "models"]
    catalog = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "cache-probe" in catalog
    probe = subprocess.run([*run, "cache-probe", "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "--tokens" in probe.stdout and "--gap-ms" in probe.stdout
