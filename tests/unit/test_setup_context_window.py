"""The context window `ama setup` writes for a model (issue 25, point 3): read from the server's model list
(each server's shape, the values as hostile input), `--context-window N`, the interactive question, and the
one sentence when it stays unknown."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from ama_acp.providers.model_list import MAX_CONTEXT_LENGTH, context_length
from ama_acp.setup import choices as c
from ama_acp.setup.verify import parse_models, parse_windows
from tests.unit.test_setup_flow import Paths, Script, run
from tests.unit.test_setup_verify import Canned

OFF = "The context meter will be off for"


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(tmp_path)


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 32768}, 32768),  # vLLM
        ({"id": "a/m", "context_length": 200000, "pricing": {}}, 200000),  # OpenRouter
        ({"id": "m", "max_context_length": 131072, "loaded_context_length": 16384}, 16384),  # LM Studio, loaded
        ({"id": "m", "state": "not-loaded", "max_context_length": 131072}, 131072),  # LM Studio, not loaded
        ({"id": "m", "meta": {"n_ctx_train": 40960, "n_params": 1}}, 40960),  # llama.cpp's server
        ({"id": "m", "owned_by": "openai"}, None),  # OpenAI, Ollama: nothing stated
    ],
)
def test_each_servers_shape(entry: dict[str, object], window: int | None) -> None:
    assert context_length(entry) == window


@pytest.mark.parametrize(
    "value",
    [True, False, 0, -4096, 1.5, 32768.0, "32768", None, [32768], {"n": 1}, MAX_CONTEXT_LENGTH + 1, 10**400],
)
def test_a_value_that_is_not_a_window_is_none(value: object) -> None:
    assert context_length({"id": "m", "max_model_len": value}) is None
    assert context_length({"id": "m", "meta": {"n_ctx_train": value}}) is None


def test_a_broken_field_falls_through_to_the_next_and_odd_shapes_are_none() -> None:
    assert context_length({"max_model_len": "x", "context_length": 8192}) == 8192
    assert context_length({"meta": [1, 2]}) is None and context_length({"meta": "n_ctx_train"}) is None
    assert context_length(["max_model_len", 1]) is None and context_length(None) is None
    assert context_length({"max_model_len": MAX_CONTEXT_LENGTH}) == MAX_CONTEXT_LENGTH


def test_windows_are_keyed_by_the_checked_ids() -> None:
    body = json.dumps(
        {
            "data": [
                {"id": " m1 ", "max_model_len": 4096},
                {"id": "m1", "max_model_len": 8192},  # listed twice: the first figure counts
                {"id": "m2"},
                {"id": "bad id", "max_model_len": 4096},
                {"id": 7, "max_model_len": 4096},
                "junk",
            ]
        }
    ).encode()
    assert parse_models(body) == ("m1", "m2")
    assert parse_windows(body) == {"m1": 4096}
    assert parse_windows(b"not json") == {} and parse_windows(b'{"data": {}}') == {}


@pytest.mark.parametrize("text", ["", "0", "-1", "12.5", "128k", "32_768", "٣٢٧٦٨", str(MAX_CONTEXT_LENGTH + 1)])
def test_a_typed_window_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(c.SetupError, match="whole number of tokens"):
        c.check_context_window(text)


def test_a_typed_window() -> None:
    assert c.check_context_window(" 32768 ") == 32768


# --- the flow --------------------------------------------------------------------------------------------------


def listing(*entries: dict[str, object]) -> Canned:
    return Canned(body={"object": "list", "data": list(entries)})


def models_of(paths: Paths) -> list[dict[str, Any]]:
    models = tomllib.loads(paths.config.read_text()).get("models", [])
    assert isinstance(models, list)
    return models


def script_flags(server: Canned, *more: str) -> list[str]:
    url = server.url + "/v1"
    return ["--provider", "custom", "--base-url", url, "--name", "local", "--no-key", "--model", "m", *more]


def test_the_listed_window_is_written_without_a_question(paths: Paths) -> None:
    server = listing({"id": "m", "meta": {"n_ctx_train": 40960}})
    try:
        script = Script(("Write?", ""))
        assert run(paths, script, *script_flags(server)) == 0, script.text
    finally:
        server.close()
    assert models_of(paths) == [{"id": "local/m", "context_window": 40960}]
    assert "Context window of local/m: 40960 tokens" in script.text and OFF not in script.text


def test_the_flag_wins_over_the_listed_window(paths: Paths) -> None:
    server = listing({"id": "m", "max_model_len": 40960})
    try:
        assert run(paths, Script(), *script_flags(server, "--context-window", "16384"), interactive=False) == 0
    finally:
        server.close()
    assert models_of(paths) == [{"id": "local/m", "context_window": 16384}]


def test_a_bad_flag_is_exit_2_before_any_request(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    server = listing({"id": "m"})
    try:
        assert run(paths, Script(), *script_flags(server, "--context-window", "big"), interactive=False) == 2
        assert server.seen == []
    finally:
        server.close()
    assert "--context-window: a context window is a whole number of tokens" in capsys.readouterr().err
    assert paths.nothing_written()


def test_asked_when_the_list_states_none_and_asked_again_on_a_bad_answer(paths: Paths) -> None:
    server = listing({"id": "m"})
    try:
        script = Script(("Context window of local/m", "lots"), ("Context window", "65536"), ("Write?", ""))
        assert run(paths, script, *script_flags(server)) == 0, script.text
    finally:
        server.close()
    assert "whole number of tokens" in script.text and OFF not in script.text
    assert models_of(paths) == [{"id": "local/m", "context_window": 65536}]


def test_unknown_is_said_in_one_sentence_asked_or_not(paths: Paths) -> None:
    server = listing({"id": "m"})
    try:
        script = Script(("Context window", ""), ("Write?", ""))
        assert run(paths, script, *script_flags(server)) == 0, script.text
        said = [line for line in script.out if line.startswith(OFF)]
        assert said == [
            f"The context meter will be off for local/m, as its context window is unknown: run `ama setup "
            f"--context-window N` again, or add `context_window = N` (tokens) to its [[models]] entry in "
            f"{paths.config}."
        ]
        assert models_of(paths) == [{"id": "local/m"}]
        quiet = Script()
        assert run(paths, quiet, *script_flags(server), interactive=False) == 0
        assert [line for line in quiet.out if line.startswith(OFF)] == said
    finally:
        server.close()


def test_run_again_with_the_flag_sets_the_window_of_the_entry_in_place(paths: Paths) -> None:
    paths.config.parent.mkdir(parents=True)
    paths.config.write_text(
        '# mine\nmodel = "local/m"\n\n[[models]]\nid = "other/x"  # keep\n\n[[models]]\nid = "local/m"\nmax_output = 4096\n'
    )
    server = listing({"id": "m"})
    try:
        script = Script()
        assert run(paths, script, *script_flags(server, "--context-window", "32768"), interactive=False) == 0
    finally:
        server.close()
    text = paths.config.read_text()
    assert "# mine" in text and "# keep" in text  # edited in place, not rewritten
    assert models_of(paths) == [{"id": "other/x"}, {"id": "local/m", "max_output": 4096, "context_window": 32768}]
    assert not any(line.startswith(OFF) for line in script.out)


def test_a_catalog_model_is_not_asked_and_the_flag_overrides_its_window(paths: Paths) -> None:
    server = Canned(body={"data": [{"id": "gpt-4.1"}]})
    try:
        env = {"OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": "sk-window-test-0123456789"}
        flags = ["--provider", "openai", "--model", "gpt-4.1", "--yes"]
        quiet = Script()
        assert run(paths, quiet, *flags, env=env, interactive=False) == 0
        assert "models" not in tomllib.loads(paths.config.read_text())
        assert not any(line.startswith(OFF) for line in quiet.out)
        assert run(paths, Script(), *flags, "--context-window", "100000", env=env, interactive=False) == 0
    finally:
        server.close()
    assert models_of(paths) == [{"id": "openai/gpt-4.1", "context_window": 100000}]
