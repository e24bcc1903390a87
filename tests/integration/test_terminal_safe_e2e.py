"""What a person reads from ama's own commands, when a provider, a model or a session file puts terminal escapes
in its text (issue 23): `ama -p` (its answer, text and JSON), ama's log lines (stderr and the log file),
`ama sessions show/list`, and `ama doctor`'s warning about a config others can write. Real processes, the real
local model server; the controls are shown (`^[`, `<U+009B>`), never written raw."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from ama_acp.session.store import entries as en
from tests.support.harness import Ama, clean_env, local_config
from tests.support.llm_server import LLMServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
DSR = "\x1b[6n"
C1 = "\x9b6n"
RAW = ("\x1b", "\x07", "\x9b")


def run(box: Ama, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "ama_acp", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=box.workspace,
        env=clean_env(box.tmp, {"AMA_CONFIG": str(box.config), **(env or {})}),
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out


def no_raw(text: str) -> None:
    for ch in RAW:
        assert ch not in text, repr(text)


def test_print_mode_a_provider_error_and_a_model_answer_with_escapes(tmp_path: Path) -> None:
    box = Ama(tmp_path)
    with LLMServer() as llm:
        box.config.write_text(local_config(llm.openai_url, retries=1))
        answer = f"Here {OSC52} and {DSR} and {C1}\r\ndone"
        llm.enqueue(
            {"status": 500, "message": f"overloaded {OSC52} {DSR}"},
            {"text": answer, "usage": {"input": 10, "output": 5}},
        )
        out = run(
            box, "-p", "hi", "--data-dir", str(box.data), "--log-level", "warning", env={"LOCAL_TEST_KEY": "k" * 12}
        )
        # The JSON form: the same answer, escaped (JSON escapes C0; ama escapes C1 too).
        llm.enqueue({"text": answer, "usage": {"input": 10, "output": 5}})
        as_json = run(
            box, "-p", "hi", "--output-format", "json", "--data-dir", str(box.data), env={"LOCAL_TEST_KEY": "k" * 12}
        )
    assert out.returncode == 0, out.stderr
    no_raw(out.stdout)
    assert "Here ^[]52;c;cm0gLXJmIH4K^G and ^[[6n and <U+009B>6n\ndone" in out.stdout
    # The retry's log line on stderr quotes the provider's error, its controls made visible.
    no_raw(out.stderr)
    assert "overloaded ^[]52;c;cm0gLXJmIH4K^G ^[[6n" in out.stderr
    log = box.log_text()
    no_raw(log)
    assert "overloaded ^[]52;c;cm0gLXJmIH4K^G ^[[6n" in log
    no_raw(as_json.stdout)
    assert json.loads(as_json.stdout)["answer"] == answer  # the JSON keeps the answer as the model wrote it


def test_sessions_show_and_list_of_a_file_with_escapes(tmp_path: Path) -> None:
    box = Ama(tmp_path)
    with LLMServer() as llm:
        box.config.write_text(local_config(llm.openai_url))
        llm.enqueue({"text": f"stored {OSC52} answer", "usage": {"input": 10, "output": 5}})
        first = run(
            box, "-p", "hi", "--output-format", "json", "--data-dir", str(box.data), env={"LOCAL_TEST_KEY": "k" * 12}
        )
    sid = json.loads(first.stdout)["sessionId"]
    # A title as any writer of the file may leave it: escapes, a bidi override and a newline that forges a line.
    path = box.data / "sessions" / f"{sid}.jsonl"
    assert path.is_file(), list((box.data / "sessions").iterdir())
    title = f"evil {DSR}\u202e title\nforged line {C1}"
    with path.open("ab") as f:
        f.write(msgspec.json.encode(en.TitleEntry(title=title)) + b"\n")
    show = run(box, "sessions", "show", sid, "--data-dir", str(box.data))
    assert show.returncode == 0, show.stderr
    no_raw(show.stdout)
    assert "[assistant] stored ^[]52;c;cm0gLXJmIH4K^G answer" in show.stdout
    assert "title: evil ^[[6n<U+202E> title^Jforged line <U+009B>6n" in show.stdout
    assert "\nforged line" not in show.stdout
    listed = run(box, "sessions", "list", "--data-dir", str(box.data))
    assert listed.returncode == 0, listed.stderr
    no_raw(listed.stdout)
    assert "evil ^[[6n<U+202E> title^Jforged line <U+009B>6n" in listed.stdout
    assert listed.stdout.count("\n") == 1


def test_doctor_warns_about_a_config_others_can_write(tmp_path: Path) -> None:
    box = Ama(tmp_path)
    box.config.write_text('model = "scripted/demo"\n')
    os.chmod(box.config, 0o666)
    args = ("doctor", "--no-network", "--config", str(box.config))
    env = {"AMA_CREDENTIALS": str(tmp_path / "credentials.toml")}
    out = run(box, *args, env=env)
    assert f"warning: {box.config} is writable by group and others (mode 0666)" in out.stdout
    assert f"chmod go-w {box.config}" in out.stdout
    report = json.loads(run(box, *args, "--json", env=env).stdout)
    assert {"path": str(box.config), "mode": "0666", "problem": "writable by group and others", "owner": None} in (
        report["openPaths"]
    )
    os.chmod(box.config, 0o600)
    os.chmod(box.config.parent, stat.S_IMODE(box.config.parent.stat().st_mode) & ~0o022)
    quiet = run(box, *args, env=env)
    assert "writable" not in quiet.stdout, quiet.stdout
