"""The `ama setup` flow in-process: the questions answered by a script (no terminal), the flags of the
non-interactive form, exit codes, and that a setup that does not finish writes nothing."""

from __future__ import annotations

import io as stdio
import os
import stat
import tomllib
from collections.abc import Callable, Iterator
from email.message import Message
from pathlib import Path

import pytest

from ama_acp.credentials import read_credentials
from ama_acp.setup.cli import run_setup
from ama_acp.setup.prompts import Io
from ama_conformance.servers.model import ScriptedModel
from tests.unit.test_setup_verify import Canned, unused_port

KEY = "sk-flow-test-0123456789"
Answer = str | Callable[[], str]


class Script:
    """Answers to the prompts, in order: (a piece of the prompt, the answer or a function raising)."""

    def __init__(self, *steps: tuple[str, Answer]) -> None:
        self.steps = list(steps)
        self.out: list[str] = []
        self.prompts: list[str] = []

    def _next(self, prompt: str) -> str:
        self.prompts.append(prompt)
        assert self.steps, f"unexpected prompt {prompt!r}; said so far:\n" + "\n".join(self.out)
        expected, answer = self.steps.pop(0)
        assert expected in prompt, f"expected a prompt with {expected!r}, got {prompt!r}"
        return answer() if callable(answer) else answer

    def io(self) -> Io:
        return Io(ask=self._next, secret=self._next, say=self.out.append)

    @property
    def text(self) -> str:
        return "\n".join(self.out + self.prompts)


def interrupt() -> str:
    raise KeyboardInterrupt


def eof() -> str:
    raise EOFError


class Paths:
    def __init__(self, tmp: Path) -> None:
        self.config = tmp / "cfg" / "config.toml"
        self.credentials = tmp / "private" / "credentials.toml"
        self.env = {"AMA_CREDENTIALS": str(self.credentials), "XDG_CONFIG_HOME": str(tmp / "xdg")}

    def flags(self) -> list[str]:
        return ["--config", str(self.config), "--credentials", str(self.credentials)]

    def nothing_written(self) -> bool:
        return not self.config.exists() and not self.credentials.exists()


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(tmp_path)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


def run(
    paths: Paths,
    script: Script,
    *argv: str,
    env: dict[str, str] | None = None,
    stdin: str = "",
    interactive: bool = True,
) -> int:
    return run_setup(
        [*argv, *paths.flags()],
        io=script.io(),
        env={**paths.env, **(env or {})},
        stdin=stdio.StringIO(stdin),
        interactive=interactive,
    )


# --- interactive ----------------------------------------------------------------------------------------------


def test_a_custom_server_with_a_key(paths: Paths, model: ScriptedModel, capsys: pytest.CaptureFixture[str]) -> None:
    script = Script(
        ("Provider", "3"),
        ("URL", model.openai_url),
        ("name", ""),
        ("need an API key", "y"),
        ("Paste the API key", KEY),
        ("Model", "2"),
        ("Context window", ""),
        ("Write?", ""),
    )
    assert run(paths, script) == 0, script.text
    cfg = tomllib.loads(paths.config.read_text())
    assert cfg["model"] == "local/gpt-4.1"
    assert cfg["providers"]["local"] == {"kind": "openai", "base_url": model.openai_url, "api_key_env": "LOCAL_API_KEY"}
    assert cfg["models"] == [{"id": "local/gpt-4.1"}]
    assert KEY not in paths.config.read_text()
    assert read_credentials(paths.credentials) == {"LOCAL_API_KEY": KEY}
    assert stat.S_IMODE(os.stat(paths.credentials).st_mode) == 0o600
    captured = capsys.readouterr()
    said = script.text + captured.out + captured.err
    assert KEY not in said
    assert "Stored LOCAL_API_KEY" in said and "ama doctor" in said
    assert "Anthropic" in said and "OpenAI" in said and "DeepSeek" in said and "Google Gemini" in said


def test_a_builtin_provider_offers_its_catalog_with_its_default_preselected(paths: Paths, model: ScriptedModel) -> None:
    script = Script(("Provider", "openai"), ("Paste", KEY), ("Model", ""), ("Write?", "y"))
    env = {"OPENAI_BASE_URL": model.openai_url}
    assert run(paths, script, env=env) == 0, script.text
    assert tomllib.loads(paths.config.read_text()) == {"model": "openai/gpt-5"}
    assert read_credentials(paths.credentials) == {"OPENAI_API_KEY": KEY}
    listed = script.text
    assert "openai/gpt-4.1" in listed and "anthropic/" not in listed
    default_line = next(line for line in script.prompts if line.startswith("Model"))
    number = next(line for line in script.out if line.strip().endswith("openai/gpt-5  (GPT-5)")).split(")")[0].strip()
    assert f"[{number}]" in default_line


def test_a_refused_key_is_asked_again(paths: Paths, canned_refusing_then_ok: Canned) -> None:
    server = canned_refusing_then_ok
    script = Script(
        ("Provider", "custom"),
        ("URL", server.url + "/v1"),
        ("name", "box"),
        ("need an API key", "yes"),
        ("Paste", "sk-wrong-key-000"),
        ("Paste", KEY),
        ("Model", "box/m1"),
        ("Context window", ""),
        ("Write?", ""),
    )
    assert run(paths, script) == 0, script.text
    assert "the key was refused (HTTP 401)" in script.text and "sk-wrong-key-000" not in script.text
    assert read_credentials(paths.credentials) == {"BOX_API_KEY": KEY}


class RefusingThenOk(Canned):
    """401 to every key but KEY, which gets a list of one model."""

    def answer_to(self, headers: Message) -> None:
        self.status = 401 if headers.get("authorization") != f"Bearer {KEY}" else 200
        self.body = b'{"data": [{"id": "m1"}]}' if self.status == 200 else b'{"error": "bad key"}'


@pytest.fixture
def canned_refusing_then_ok() -> Iterator[Canned]:
    server = RefusingThenOk(401, {"error": "bad key"})
    yield server
    server.close()


def test_bad_answers_are_asked_again(paths: Paths, model: ScriptedModel) -> None:
    script = Script(
        ("Provider", "9"),
        ("Provider", "nope"),
        ("Provider", "3"),
        ("URL", "ftp://x"),
        ("URL", "http://u:p@h/v1"),
        ("URL", model.openai_url),
        ("name", "Openai"),
        ("name", "openai"),
        ("name", "mine"),
        ("need an API key", "maybe"),
        ("need an API key", ""),
        ("Model", "bad id"),
        ("Model", "mine/my-model"),
        ("Context window", ""),
        ("Write?", "y"),
    )
    assert run(paths, script) == 0, script.text
    text = script.text
    assert "http:// or https://" in text and "user or password" in text and "built-in provider" in text
    cfg = tomllib.loads(paths.config.read_text())
    assert cfg["model"] == "mine/my-model" and "api_key_env" not in cfg["providers"]["mine"]
    assert "not in the list" in text
    assert not paths.credentials.exists()  # no key, nothing to store


def test_an_unreachable_server_offers_a_new_url(paths: Paths, model: ScriptedModel) -> None:
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    script = Script(
        ("Provider", "3"),
        ("URL", dead),
        ("name", ""),
        ("need an API key", "n"),
        ("u to change the URL", "u"),
        ("URL", model.openai_url),
        ("Model", "1"),
        ("Context window", ""),
        ("Write?", ""),
    )
    assert run(paths, script) == 0, script.text
    assert "cannot reach 127.0.0.1" in script.text
    assert tomllib.loads(paths.config.read_text())["providers"]["local"]["base_url"] == model.openai_url


def test_quitting_after_a_failed_check_writes_nothing(paths: Paths) -> None:
    script = Script(
        ("Provider", "3"),
        ("URL", f"http://127.0.0.1:{unused_port()}/v1"),
        ("name", ""),
        ("need an API key", "n"),
        ("q to quit", "q"),
    )
    assert run(paths, script) == 1 and paths.nothing_written()


def test_saving_without_the_check_then_typing_a_model(paths: Paths) -> None:
    script = Script(
        ("Provider", "3"),
        ("URL", f"http://127.0.0.1:{unused_port()}/v1"),
        ("name", ""),
        ("need an API key", "n"),
        ("s to save", "s"),
        ("Model (as", "qwen3-coder"),
        ("Context window", ""),
        ("Write?", ""),
    )
    assert run(paths, script) == 0
    assert tomllib.loads(paths.config.read_text())["model"] == "local/qwen3-coder"


@pytest.mark.parametrize("at", range(6))
def test_ctrl_c_at_any_prompt_writes_nothing(
    paths: Paths, model: ScriptedModel, capsys: pytest.CaptureFixture[str], at: int
) -> None:
    answers: list[tuple[str, Answer]] = [
        ("Provider", "3"),
        ("URL", model.openai_url),
        ("name", ""),
        ("need an API key", "y"),
        ("Paste", KEY),
        ("Model", "1"),
        ("Context window", ""),
        ("Write?", ""),
    ]
    answers[at] = (answers[at][0], interrupt)
    assert run(paths, Script(*answers)) == 130
    assert paths.nothing_written()
    assert "nothing was written" in capsys.readouterr().err


def test_eof_at_a_prompt_is_exit_1_and_writes_nothing(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(paths, Script(("Provider", eof))) == 1
    assert paths.nothing_written() and "nothing was written" in capsys.readouterr().err


def test_declining_to_write(paths: Paths, model: ScriptedModel) -> None:
    script = Script(
        ("Provider", "3"),
        ("URL", model.openai_url),
        ("name", ""),
        ("need", ""),
        ("Model", "1"),
        ("Context window", ""),
        ("Write?", "n"),
    )
    assert run(paths, script) == 1 and paths.nothing_written()


def test_a_key_in_the_environment_is_offered_and_a_stored_one_kept(paths: Paths, model: ScriptedModel) -> None:
    env = {"OPENAI_BASE_URL": model.openai_url, "OPENAI_API_KEY": KEY}
    script = Script(
        ("Provider", "2"), ("OPENAI_API_KEY is set in the environment", ""), ("Model", "openai/gpt-4.1"), ("Write?", "")
    )
    assert run(paths, script, env=env) == 0, script.text
    assert read_credentials(paths.credentials) == {"OPENAI_API_KEY": KEY}
    before = paths.credentials.stat().st_mtime_ns
    script = Script(("Provider", "2"), ("already stored", "y"), ("Model", ""), ("Write?", ""))
    assert run(paths, script, env={"OPENAI_BASE_URL": model.openai_url}) == 0, script.text
    assert paths.credentials.stat().st_mtime_ns == before  # nothing new to store
    assert "Kept the key already stored" in script.text
    assert model.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_an_existing_config_keeps_its_settings_and_comments(paths: Paths, model: ScriptedModel) -> None:
    paths.config.parent.mkdir(parents=True)
    paths.config.write_text('# mine\nmode = "read_only"\n\n[compaction]\nenabled = false  # keep\n')
    script = Script(
        ("Provider", "3"),
        ("URL", model.openai_url),
        ("name", ""),
        ("need", "n"),
        ("Model", "1"),
        ("Context window", ""),
        ("Write?", ""),
    )
    assert run(paths, script) == 0, script.text
    text = paths.config.read_text()
    assert text.startswith('# mine\nmode = "read_only"\nmodel = "local/conformance-model"\n')
    assert "enabled = false  # keep" in text


# --- non-interactive ------------------------------------------------------------------------------------------


def test_flags_only_with_the_key_on_stdin(paths: Paths, model: ScriptedModel) -> None:
    script = Script()
    code = run(
        paths,
        script,
        "--provider",
        "custom",
        "--base-url",
        model.openai_url,
        "--api-key-stdin",
        "--model",
        "gpt-4.1",
        stdin=KEY + "\n",
        interactive=False,
    )
    assert code == 0, script.text
    assert tomllib.loads(paths.config.read_text())["model"] == "local/gpt-4.1"
    assert read_credentials(paths.credentials) == {"LOCAL_API_KEY": KEY}
    assert script.prompts == []


def test_the_key_from_a_named_variable_and_a_custom_key_variable(paths: Paths, model: ScriptedModel) -> None:
    code = run(
        paths,
        Script(),
        "--provider",
        "custom",
        "--base-url",
        model.openai_url,
        "--name",
        "gpu",
        "--api-key-env",
        "MY_GPU_KEY",
        "--model",
        "gpu/gpt-4.1",
        env={"MY_GPU_KEY": KEY},
        interactive=False,
    )
    assert code == 0
    assert tomllib.loads(paths.config.read_text())["providers"]["gpu"]["api_key_env"] == "MY_GPU_KEY"
    assert read_credentials(paths.credentials) == {"MY_GPU_KEY": KEY}


def test_a_builtin_provider_defaults_its_model_and_reads_its_own_variable(paths: Paths, model: ScriptedModel) -> None:
    env = {"ANTHROPIC_BASE_URL": model.anthropic_url, "ANTHROPIC_API_KEY": KEY}
    assert run(paths, Script(), "--provider", "anthropic", "--yes", env=env, interactive=False) == 0
    assert tomllib.loads(paths.config.read_text()) == {"model": "anthropic/claude-sonnet-4-5"}
    assert read_credentials(paths.credentials) == {"ANTHROPIC_API_KEY": KEY}
    assert model.requests[0].headers["x-api-key"] == KEY


def test_a_server_listing_one_model_needs_no_model_flag(paths: Paths, canned_refusing_then_ok: Canned) -> None:
    server = canned_refusing_then_ok
    code = run(
        paths,
        Script(),
        "--base-url",
        server.url,
        "--name",
        "one",
        "--api-key-env",
        "K",
        env={"K": KEY},
        interactive=False,
    )
    assert code == 0 and tomllib.loads(paths.config.read_text())["model"] == "one/m1"


def test_a_refused_key_is_exit_1_and_writes_nothing(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    server = Canned(401, {"error": "no"})
    try:
        code = run(
            paths,
            Script(),
            "--provider",
            "custom",
            "--base-url",
            server.url,
            "--api-key-stdin",
            "--model",
            "m",
            stdin=KEY,
            interactive=False,
        )
    finally:
        server.close()
    err = capsys.readouterr().err
    assert code == 1 and paths.nothing_written()
    assert "the key was refused (HTTP 401)" in err and KEY not in err


def test_no_verify_writes_without_a_request(paths: Paths) -> None:
    dead = f"http://127.0.0.1:{unused_port()}/v1"
    code = run(
        paths,
        Script(),
        "--provider",
        "custom",
        "--base-url",
        dead,
        "--no-key",
        "--no-verify",
        "--model",
        "m",
        interactive=False,
    )
    assert code == 0
    assert tomllib.loads(paths.config.read_text())["providers"]["local"] == {"kind": "openai", "base_url": dead}
    assert not paths.credentials.exists()


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {}, "--provider is needed"),
        (["--provider", "nope"], {}, "unknown provider 'nope'"),
        (["--provider", "custom", "--no-key"], {}, "--base-url is needed"),
        (["--provider", "custom", "--base-url", "gopher://h"], {}, "--base-url: the URL must start with"),
        (["--provider", "custom", "--base-url", "http://h", "--name", "Bad"], {}, "a provider name is"),
        (["--provider", "custom", "--base-url", "http://h"], {}, "no key for"),
        (["--provider", "openai"], {}, "--api-key-stdin"),
        (["--provider", "openai", "--base-url", "http://h"], {}, "go with --provider custom only"),
        (["--provider", "openai", "--no-key"], {}, "go with --provider custom only"),
        (["--provider", "custom", "--no-key", "--api-key-stdin"], {}, "--no-key excludes"),
        (["--provider", "openai", "--api-key-env", "NOT_SET_ANYWHERE"], {}, "NOT_SET_ANYWHERE is not set"),
        (["--provider", "openai", "--api-key-env", "1BAD"], {}, "environment variable name"),
        (["--provider", "custom", "--base-url", "http://h", "--no-key", "--no-verify"], {}, "--model is needed"),
        (["--provider", "openai", "--model", "anthropic/x", "--no-verify"], {"OPENAI_API_KEY": KEY}, "model of"),
        (["--provider", "openai", "--api-key-stdin"], {}, "the key on stdin: the key is empty"),
    ],
)
def test_a_missing_or_bad_flag_is_exit_2_with_the_message(
    paths: Paths, capsys: pytest.CaptureFixture[str], argv: list[str], env: dict[str, str], message: str
) -> None:
    assert run(paths, Script(), *argv, env=env, interactive=False) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert paths.nothing_written()


def test_a_config_that_does_not_parse_is_exit_2_before_any_question(
    paths: Paths, capsys: pytest.CaptureFixture[str]
) -> None:
    paths.config.parent.mkdir(parents=True)
    paths.config.write_text('model = "a/b"\n[providers.x\n')
    assert run(paths, Script()) == 2  # no answer was needed: the script has none
    assert "line 2" in capsys.readouterr().err
    assert paths.config.read_text() == 'model = "a/b"\n[providers.x\n' and not paths.credentials.exists()


def test_a_credentials_file_that_does_not_parse_is_exit_2_and_kept(
    paths: Paths, capsys: pytest.CaptureFixture[str]
) -> None:
    paths.credentials.parent.mkdir(parents=True)
    paths.credentials.write_text("keys = 3\n")
    assert run(paths, Script()) == 2
    assert "[keys] must be a table" in capsys.readouterr().err
    assert paths.credentials.read_text() == "keys = 3\n" and not paths.config.exists()


def test_flags_answer_their_questions_in_the_interactive_form(paths: Paths, model: ScriptedModel) -> None:
    code = run(
        paths,
        Script(),
        "--base-url",
        model.openai_url,
        "--name",
        "srv",
        "--model",
        "srv/gpt-4o-mini",
        "--api-key-env",
        "SRV_KEY",
        env={"SRV_KEY": ""},
    )
    assert code == 2  # an empty variable is not a key: said, not asked
    script = Script(("need an API key", "n"), ("Context window", ""), ("Write?", ""))
    assert run(paths, script, "--base-url", model.openai_url, "--name", "srv", "--model", "srv/gpt-4o-mini") == 0
    assert tomllib.loads(paths.config.read_text())["model"] == "srv/gpt-4o-mini"


def test_notes_about_the_environment(paths: Paths, model: ScriptedModel) -> None:
    script = Script()
    env = {"OPENAI_BASE_URL": model.openai_url, "OPENAI_API_KEY": "sk-other-value-999", "AMA_MODEL": "x/y"}
    code = run(
        paths,
        script,
        "--provider",
        "openai",
        "--api-key-stdin",
        "--model",
        "gpt-4.1",
        env=env,
        stdin=KEY,
        interactive=False,
    )
    assert code == 0
    text = script.text
    assert "also set in this environment, with another value" in text and "AMA_MODEL is set" in text
    assert KEY not in text and "sk-other-value-999" not in text
