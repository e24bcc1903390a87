"""`ama setup` as a person or a script runs it: a subprocess with the non-interactive flags against the suite's
local OpenAI-compatible server, then `ama -p` with no key in the environment (it comes from the credentials
file); a server that refuses the key, a port nobody listens on; and the interactive flow in a pseudo-terminal,
Ctrl-C included. Every path is inside tmp_path (XDG_CONFIG_HOME, XDG_DATA_HOME), never the real home."""

from __future__ import annotations

import os
import pty
import select
import signal
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from ama_acp.credentials import read_credentials
from ama_conformance.servers.model import ScriptedModel
from tests.support.harness import clean_env
from tests.unit.test_setup_verify import Canned, unused_port

KEY = "sk-e2e-setup-0123456789abcdef"


class Home:
    """One person's files, all in tmp: the default config and credentials paths under XDG_CONFIG_HOME."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.workspace = tmp / "ws"
        self.workspace.mkdir()
        self.env = {k: v for k, v in clean_env(tmp).items() if not k.endswith("_API_KEY")}
        self.env.pop("AMA_CREDENTIALS", None)
        self.config = tmp / "xdg-config" / "ama" / "config.toml"
        self.credentials = tmp / "xdg-config" / "ama" / "credentials.toml"

    def ama(self, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ama_acp", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.workspace,
            env={**self.env, **(env or {})},
        )

    def nothing_written(self) -> bool:
        return not self.config.exists() and not self.credentials.exists()


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


@pytest.fixture
def model():
    with ScriptedModel() as server:
        yield server


def test_a_script_sets_up_a_local_server_and_a_prompt_then_works_with_no_key_in_the_environment(home, model):
    out = home.ama(
        "setup", "--provider", "custom", "--base-url", model.openai_url, "--name", "local",
        "--api-key-stdin", "--model", "conformance-model", stdin=KEY + "\n",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert KEY not in out.stdout + out.stderr
    assert "ama doctor" in out.stdout

    config_text = home.config.read_text()
    assert KEY not in config_text
    cfg = tomllib.loads(config_text)
    assert cfg["model"] == "local/conformance-model"
    assert cfg["providers"]["local"] == {"kind": "openai", "base_url": model.openai_url, "api_key_env": "LOCAL_API_KEY"}
    assert stat.S_IMODE(home.credentials.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.credentials.parent.stat().st_mode) == 0o700
    assert read_credentials(home.credentials) == {"LOCAL_API_KEY": KEY}
    assert model.requests[0].path == "/v1/models" and model.requests[0].headers["authorization"] == f"Bearer {KEY}"

    answer = home.ama("-p", "hi")
    assert answer.returncode == 0, answer.stderr
    assert "Conformance reply." in answer.stdout
    chat = [r for r in model.requests if r.path.endswith("/chat/completions")]
    assert chat and chat[-1].headers["authorization"] == f"Bearer {KEY}"
    assert chat[-1].body["model"] == "conformance-model"
    assert KEY not in answer.stdout + answer.stderr


def test_a_builtin_provider_with_the_key_from_a_named_variable(home, model):
    env = {"OPENAI_BASE_URL": model.openai_url}
    out = home.ama("setup", "--provider", "openai", "--api-key-env", "MY_KEY", "--model", "gpt-4.1", "--yes",
                   env={**env, "MY_KEY": KEY})  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert tomllib.loads(home.config.read_text()) == {"model": "openai/gpt-4.1"}
    assert read_credentials(home.credentials) == {"OPENAI_API_KEY": KEY}
    answer = home.ama("-p", "hi", env=env)  # no OPENAI_API_KEY here: the credentials file has it
    assert answer.returncode == 0 and "Conformance reply." in answer.stdout, answer.stderr


def test_a_refused_key_is_exit_1_with_the_message_and_nothing_written(home):
    server = Canned(401, {"error": {"message": "invalid api key"}})
    try:
        out = home.ama("setup", "--provider", "custom", "--base-url", server.url + "/v1", "--api-key-stdin",
                       "--model", "m", stdin=KEY)  # fmt: skip
    finally:
        server.close()
    assert out.returncode == 1
    assert "the key was refused (HTTP 401): check it" in out.stderr and "nothing was written" in out.stderr
    assert KEY not in out.stdout + out.stderr
    assert home.nothing_written()


def test_an_unreachable_port_is_exit_1_and_nothing_written(home):
    port = unused_port()
    out = home.ama("setup", "--provider", "custom", "--base-url", f"http://127.0.0.1:{port}/v1", "--no-key",
                   "--model", "m")  # fmt: skip
    assert out.returncode == 1 and f"cannot reach 127.0.0.1:{port}" in out.stderr
    assert home.nothing_written()


def test_a_missing_flag_without_a_terminal_is_exit_2(home):
    out = home.ama("setup")
    assert out.returncode == 2 and "--provider is needed" in out.stderr and home.nothing_written()


# --- the interactive flow, in a pseudo-terminal ---------------------------------------------------------------


class _StillRunning(Exception):
    """A short wait for ama to exit ran out (interrupt() presses Ctrl-C again)."""


class Terminal:
    """`ama ARGS` with a pseudo-terminal as its controlling terminal (getpass reads /dev/tty)."""

    def __init__(self, home: Home, *args: str) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: exec at once (nothing else is safe after fork)
            try:
                os.chdir(home.workspace)
                os.execve(sys.executable, [sys.executable, "-m", "ama_acp", *args], home.env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self.seen = 0  # expect() looks only past what an earlier expect() matched
        self.status: int | None = None

    def _read(self, until: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            chunk = b""
        self.output += chunk
        return bool(chunk)

    def expect(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        needle = text.encode()
        while needle not in self.output[self.seen :]:
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"no {text!r} in the terminal; it shows:\n{self.text}")
        self.seen = self.output.index(needle, self.seen) + len(needle)

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def interrupt(self) -> int:
        """Ctrl-C, pressed again while nothing happens (as a person would), until ama exits; its exit status.

        A Ctrl-C that lands in the instant between `input()` writing its prompt and blocking in read is taken
        by Python's handler but only acted on when the read returns: a CPython limitation, which this test hit
        about one time in five. The thing under test is what ama does once interrupted, not that race."""
        for _ in range(5):
            os.write(self.fd, b"\x03")  # the terminal turns it into SIGINT for its foreground process group
            try:
                return self.wait(timeout=2.0)
            except _StillRunning:
                continue
        return self.wait()

    def wait(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                if timeout < 30.0:  # a short wait of interrupt(): the caller decides what comes next
                    raise _StillRunning
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError(f"ama setup did not exit; the terminal shows:\n{self.text}")
            self._read(min(deadline, time.monotonic() + 0.05))
        while self._read(time.monotonic() + 0.2):  # what it wrote last
            pass
        return self.status

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def terminal(home):
    made: list[Terminal] = []

    def start(*args: str) -> Terminal:
        made.append(Terminal(home, *args))
        return made[-1]

    yield start
    for t in made:
        t.close()


def test_the_interactive_flow_in_a_terminal(home, model, terminal):
    t = terminal("setup")
    t.expect("Provider: ")
    t.send("3\r")
    t.expect("URL (e.g. http://127.0.0.1:8080/v1): ")
    t.send(model.openai_url + "\r")
    t.expect("A short name for it [local]: ")
    t.send("\r")
    t.expect("Does the server need an API key? [y/N] ")
    t.send("y\r")
    t.expect("(not shown): ")
    t.send(KEY + "\r")
    t.expect("OK: the key works")
    t.expect("Model")
    t.send("local/gpt-4o-mini\r")
    t.expect("Context window of local/gpt-4o-mini in tokens (Enter if you do not know): ")  # the list states none
    t.send("128k\r")
    t.expect("a context window is a whole number of tokens")
    t.send("131072\r")
    t.expect("Write? [Y/n] ")
    t.send("\r")
    assert t.wait() == 0, t.text
    assert KEY not in t.text  # the key was not echoed, nor printed
    assert "Stored LOCAL_API_KEY in" in t.text and "ama doctor" in t.text
    assert "context meter will be off" not in t.text
    written = tomllib.loads(home.config.read_text())
    assert written["model"] == "local/gpt-4o-mini"
    assert written["models"] == [{"id": "local/gpt-4o-mini", "context_window": 131072}]
    assert read_credentials(home.credentials) == {"LOCAL_API_KEY": KEY}


@pytest.mark.parametrize("stop_at", ["(not shown): ", "Write? [Y/n] "])
def test_ctrl_c_in_the_terminal_leaves_no_files(home, model, terminal, stop_at):
    t = terminal("setup")
    t.expect("Provider: ")
    t.send("3\r")
    t.expect("URL")
    t.send(model.openai_url + "\r")
    t.expect("[local]: ")
    t.send("\r")
    t.expect("[y/N] ")
    t.send("y\r")
    if stop_at != "(not shown): ":
        t.expect("(not shown): ")
        t.send(KEY + "\r")
        t.expect("Model")
        t.send("1\r")
        t.expect("Context window")
        t.send("\r")
    t.expect(stop_at)
    assert t.interrupt() == 130, t.text
    assert "interrupted; nothing was written" in t.text
    assert home.nothing_written()
    assert not home.config.parent.exists() or not list(home.config.parent.iterdir())  # no temporary file either
