"""`[client] program_status` in the config (ama_acp/config.py) and how `ama acp-client` picks its program status mode
(`program_status_mode` in ama_acp/client/terminal/cli.py): the flag, else the config, else auto."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from ama_acp.client.terminal.cli import program_status_mode
from ama_acp.config import ConfigError, parse_config


def test_program_status_defaults_to_auto() -> None:
    assert parse_config("").client.program_status == "auto"
    assert parse_config("[client]\n").client.program_status == "auto"
    assert parse_config('model = "m"\n').client.program_status == "auto"


@pytest.mark.parametrize("mode", ["auto", "on", "off"])
def test_program_status_modes_are_accepted(mode: str) -> None:
    assert parse_config(f'[client]\nprogram_status = "{mode}"\n').client.program_status == mode


@pytest.mark.parametrize(
    "value", ['"ON"', '"yes"', '"true"', '""', '"auto "', '"detect"', "true", "false", "1", '["on"]', "{}"]
)
def test_any_other_value_is_an_error_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[client]\nprogram_status = {value}\n", "/home/me/.config/ama/config.toml")
    assert "client.program_status" in str(info.value)
    assert str(info.value).startswith("/home/me/.config/ama/config.toml: ")


@pytest.mark.parametrize("key", ["colour", "program-status", "programStatus", "Program_status"])
def test_an_unknown_key_under_client_is_an_error(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f'[client]\n{key} = "on"\n')
    assert key in str(info.value)


def test_client_must_be_a_table() -> None:
    with pytest.raises(ConfigError, match="client"):
        parse_config('client = "on"\n')


# --- program_status_mode -------------------------------------------------------------------------------------


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An XDG config home of our own, so no config of the machine's is read; AMA_CONFIG (explicit) unset."""
    home = tmp_path / "xdg"
    (home / "ama").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AMA_CONFIG", raising=False)
    return home


def args(program_status: str | None = None, config: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(program_status=program_status, config=None if config is None else str(config))


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


BROKEN = '[client]\nprogram_status = "sometimes"\n'


@pytest.mark.parametrize("flag", ["auto", "on", "off"])
def test_the_flag_wins(config_home: Path, tmp_path: Path, flag: str) -> None:
    named = write(tmp_path / "named.toml", '[client]\nprogram_status = "on"\n')
    write(config_home / "ama" / "config.toml", '[client]\nprogram_status = "off"\n')
    err = io.StringIO()
    assert program_status_mode(args(flag, named), err) == flag
    assert program_status_mode(args(flag), err) == flag
    assert err.getvalue() == ""


def test_the_flag_wins_even_over_a_malformed_config(config_home: Path, tmp_path: Path) -> None:
    named = write(tmp_path / "named.toml", BROKEN)
    err = io.StringIO()
    assert program_status_mode(args("off", named), err) == "off"
    assert err.getvalue() == ""


@pytest.mark.parametrize("mode", ["auto", "on", "off"])
def test_without_the_flag_the_named_config_decides(config_home: Path, tmp_path: Path, mode: str) -> None:
    write(config_home / "ama" / "config.toml", '[client]\nprogram_status = "on"\n')  # not read: --config given
    named = write(tmp_path / "named.toml", f'[client]\nprogram_status = "{mode}"\n')
    err = io.StringIO()
    assert program_status_mode(args(None, named), err) == mode
    assert err.getvalue() == ""


def test_without_the_flag_the_default_config_decides(config_home: Path) -> None:
    write(config_home / "ama" / "config.toml", '[client]\nprogram_status = "off"\n')
    err = io.StringIO()
    assert program_status_mode(args(), err) == "off"
    assert err.getvalue() == ""


def test_no_config_at_all_is_auto(config_home: Path) -> None:
    err = io.StringIO()
    assert program_status_mode(args(), err) == "auto"
    assert err.getvalue() == ""


def test_a_config_without_a_client_table_is_auto(config_home: Path) -> None:
    write(config_home / "ama" / "config.toml", 'mode = "read_only"\n')
    assert program_status_mode(args(), io.StringIO()) == "auto"


@pytest.mark.parametrize("text", [BROKEN, "[client\n", '[client]\ncolour = "on"\n', 'mode = "reckless"\n'])
def test_a_malformed_named_config_is_an_error(config_home: Path, tmp_path: Path, text: str) -> None:
    named = write(tmp_path / "named.toml", text)
    err = io.StringIO()
    with pytest.raises(ConfigError) as info:
        program_status_mode(args(None, named), err)
    assert str(named) in str(info.value)
    assert err.getvalue() == ""


def test_a_named_config_that_does_not_exist_is_an_error(config_home: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        program_status_mode(args(None, tmp_path / "missing.toml"), io.StringIO())


@pytest.mark.parametrize("text", [BROKEN, "[client\n", '[client]\ncolour = "on"\n', 'mode = "reckless"\n'])
def test_a_malformed_default_config_is_a_warning_and_auto(config_home: Path, text: str) -> None:
    path = write(config_home / "ama" / "config.toml", text)
    err = io.StringIO()
    assert program_status_mode(args(), err) == "auto"
    warning = err.getvalue()
    assert warning.startswith("ama acp-client: ignoring the config (") and warning.endswith("program status is auto\n")
    assert str(path) in warning
    assert warning.count("\n") == 1


NOT_UTF8 = b'[client]\nprogram_status = "\xff\xfe"\n'


def test_a_default_config_that_is_not_utf8_is_a_warning_and_auto(config_home: Path) -> None:
    write(config_home / "ama" / "config.toml", NOT_UTF8)
    err = io.StringIO()
    assert program_status_mode(args(), err) == "auto"
    assert "ignoring the config" in err.getvalue()


def test_a_named_config_that_is_not_utf8_is_a_config_error(config_home: Path, tmp_path: Path) -> None:
    named = write(tmp_path / "named.toml", NOT_UTF8)
    with pytest.raises(ConfigError):
        program_status_mode(args(None, named), io.StringIO())


@pytest.mark.parametrize(
    "table",
    [
        "coalesce_window_ms = -1",
        "coalesce_window_ms = 1001",
        "coalesce_max_chars = 0",
        "coalesce_max_chars = 10_000_001",
        'coalesce_window_ms = "fast"',
        "unknown = 1",
    ],
)
def test_a_stream_setting_out_of_range_or_unknown_is_an_error(table: str) -> None:
    with pytest.raises(ConfigError, match="stream"):
        parse_config(f"[stream]\n{table}\n")


def test_stream_defaults() -> None:
    cfg = parse_config("")
    assert cfg.stream.coalesce_window_ms == 20.0 and cfg.stream.coalesce_max_chars == 16_384
