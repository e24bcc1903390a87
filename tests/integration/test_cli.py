"""The command line (README.md "Command line"): -p, models, sessions, --version, config errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.harness import Ama, clean_env


def ama_cli(
    ama: Ama, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ama_acp", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd or ama.workspace,
        # The test's config (it names the demo model: ama never picks it by itself); --config still wins.
        env=clean_env(ama.tmp, {"AMA_CONFIG": str(ama.config), **(env or {})}),
    )


def test_version(tmp_path):
    out = ama_cli(Ama(tmp_path), "--version")
    assert out.returncode == 0 and out.stdout.startswith("ama ")


def test_print_mode_json_and_text(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ama.workspace / "test_calc.py").write_text("")
    out = ama_cli(ama, "-p", "fix it", "--output-format", "json", "--data-dir", str(ama.data))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["stopReason"] == "end_turn" and result["model"] == "scripted/demo"
    assert "Fixed" in result["answer"]
    assert result["usage"]["totalTokens"] > 0
    assert set(result["context"]) == {"tokens", "window", "percent"} and result["context"]["window"] == 200_000
    assert result["cache"]["state"] in ("cold", "warm", "unknown")  # seed 001_: the stats' `cache` section
    # Nobody to ask in -p mode: the edit was refused, the file is unchanged, and stderr says so.
    assert (ama.workspace / "calc.py").read_text().endswith("a - b\n")
    assert "refused" in out.stderr
    text = ama_cli(ama, "-p", "fix it", "--data-dir", str(ama.data))
    assert text.returncode == 0 and "Let me look at the code first." in text.stdout
    assert "\n\nFound it" in text.stdout  # assistant messages are separate paragraphs


def test_mode_acp_and_print_exclude_each_other(tmp_path):
    out = ama_cli(Ama(tmp_path), "--mode", "acp", "-p", "x")
    assert out.returncode == 2 and "exclude" in out.stderr


def test_malformed_config_is_a_clear_error_naming_the_line(tmp_path):
    ama = Ama(tmp_path)
    ama.config.write_text('model = "a/b"\n[providers.x\nkind = "openai"\n')
    out = ama_cli(ama, "--mode", "acp", "--config", str(ama.config))
    assert out.returncode == 2 and "line 2" in out.stderr and out.stdout == ""


def test_a_config_file_that_sets_the_data_dir_is_refused(tmp_path):
    """Someone other than the person may write the config file; the data directory holds their sessions."""
    ama = Ama(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    ama.config.write_text(f'model = "scripted/demo"\ndata_dir = "{elsewhere}"\n')
    out = ama_cli(ama, "-p", "fix it", "--config", str(ama.config))
    assert out.returncode == 2 and out.stdout == ""
    assert f"{ama.config}: `data_dir` (at line 2) cannot be set in a config file" in out.stderr
    assert "--data-dir" in out.stderr and "AMA_DATA_DIR" in out.stderr
    assert not elsewhere.exists() and not (tmp_path / "xdg-data").exists()
    report = json.loads(ama_cli(ama, "doctor", "--json", "--no-network").stdout)
    assert "`data_dir` (at line 2)" in report["config"]["error"] and report["promptWouldWork"] is False


def test_models_lists_the_catalog_and_config_models(tmp_path):
    ama = Ama(tmp_path)
    ama.config.write_text('[[models]]\nid = "local/tiny"\ncontext_window = 4096\n')
    out = ama_cli(ama, "models", "--json", "--config", str(ama.config))
    rows = {r["id"]: r for r in json.loads(out.stdout)}
    assert rows["local/tiny"]["contextWindow"] == 4096 and rows["local/tiny"]["price"] is None
    assert rows["anthropic/claude-sonnet-4-5"]["contextWindow"] == 200_000
    assert rows["anthropic/claude-sonnet-4-5"]["credentials"] is False
    keyed = ama_cli(ama, "models", "--json", env={"ANTHROPIC_API_KEY": "sk-ant-xxxxxxxx"})
    assert {r["id"]: r for r in json.loads(keyed.stdout)}["anthropic/claude-sonnet-4-5"]["credentials"] is True
    table = ama_cli(ama, "models")
    assert "openai/gpt-4.1" in table.stdout and "window" in table.stdout


def test_sessions_list_show_delete(tmp_path):
    ama = Ama(tmp_path)
    (ama.workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    sid = json.loads(ama_cli(ama, "-p", "fix it", "--output-format", "json", "--data-dir", str(ama.data)).stdout)[
        "sessionId"
    ]
    listed = json.loads(ama_cli(ama, "sessions", "list", "--json", "--data-dir", str(ama.data)).stdout)
    assert [s["sessionId"] for s in listed] == [sid] and listed[0]["title"] == "fix it"
    shown = ama_cli(ama, "sessions", "show", sid, "--data-dir", str(ama.data))
    assert "[user] fix it" in shown.stdout and "Read calc.py" in shown.stdout
    assert ama_cli(ama, "sessions", "delete", sid, "--data-dir", str(ama.data)).returncode == 0
    missing = ama_cli(ama, "sessions", "show", sid, "--data-dir", str(ama.data))
    assert missing.returncode == 1 and "no session" in missing.stderr


def test_print_mode_takes_a_prompt_that_is_not_utf8(tmp_path):
    """argv is the OS's bytes: a byte that is not UTF-8 (a lone surrogate in Python) is shown as U+FFFD,
    and the turn is answered and saved instead of ending in a traceback."""
    ama = Ama(tmp_path)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ama_acp",
            "-p",
            b"caf\xff".decode("utf-8", "surrogateescape"),
            "--output-format",
            "json",
            "--data-dir",
            str(ama.data),
            "--config",
            str(ama.config),
        ],
        capture_output=True,
        timeout=60,
        cwd=ama.workspace,
        env=clean_env(ama.tmp, None),
    )
    assert out.returncode in (0, 1), out.stderr
    assert b"Traceback" not in out.stderr
    result = json.loads(out.stdout)
    files = list((ama.data / "sessions").rglob("*.jsonl"))
    assert len(files) == 1 and "caf\ufffd" in files[0].read_text(encoding="utf-8")
    assert result["sessionId"]


def test_print_mode_without_a_usable_model_says_what_to_do_instead_of_running_the_demo(tmp_path):
    ama = Ama(tmp_path)
    ama.config.write_text("", encoding="utf-8")  # nothing names a model, and no key is anywhere
    out = ama_cli(ama, "-p", "fix it", "--data-dir", str(ama.data))
    assert out.returncode == 2
    assert "ama setup" in out.stderr and out.stdout == ""
    assert not (ama.data / "sessions").exists() or not list((ama.data / "sessions").glob("*.jsonl"))
