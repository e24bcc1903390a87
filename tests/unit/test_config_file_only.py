"""Settings the config file may not make (docs/configuration.md "Files and directories"): `data_dir` and
`config_path` come only from the command line and the environment, and a file that sets them is a ConfigError
naming the file, the line and what to use instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from ama_acp.config import load_config, parse_config
from ama_acp.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('data_dir = "/tmp/elsewhere"\n', 1),
        ('model = "a/b"\n# the sessions\n"data_dir" = "/x"\n[providers.x]\nkind = "openai"\n', 3),
        ("model = 'a/b'\ndata_dir.sub = 1\n", 2),
        ('[providers.x]\nkind = "openai"\n\n[data_dir]\npath = "/x"\n', 4),
        # A look-alike inside a multi-line string is not the line that sets it.
        ('model = """\ndata_dir = 1\n"""\ndata_dir = "/x"\n', 4),
    ],
)
def test_data_dir_is_refused_naming_the_file_the_line_and_the_way(text: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "/home/p/.config/ama/config.toml")
    message = str(info.value)
    assert message.startswith("/home/p/.config/ama/config.toml: `data_dir`"), message
    assert f"(at line {line})" in message and "--data-dir" in message and "AMA_DATA_DIR" in message


def test_config_path_is_refused_the_same_way() -> None:
    with pytest.raises(ConfigError, match=r"cfg: `config_path` \(at line 2\).*--config.*AMA_CONFIG"):
        parse_config('model = "a/b"\nconfig_path = "/x"\n', "cfg")


def test_a_data_dir_key_in_a_table_is_an_unknown_key_there() -> None:
    with pytest.raises(ConfigError, match=r"unknown field `data_dir`.*providers"):
        parse_config('[providers.x]\ndata_dir = "/x"\n', "cfg")


def test_many_look_alikes_still_give_a_clear_error() -> None:
    text = "".join(f"[t{i}]\ndata_dir = 1\n" for i in range(2000)) + "[data_dir]\n"
    with pytest.raises(ConfigError, match=r"`data_dir` cannot be set in a config file: use --data-dir"):
        parse_config(text, "cfg")


def test_the_data_dir_still_comes_from_the_flag_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "a/b"\n', encoding="utf-8")
    assert load_config(str(config), str(tmp_path / "flag"), {}).data_dir == str(tmp_path / "flag")
    env = {"AMA_DATA_DIR": str(tmp_path / "env")}
    assert load_config(str(config), None, env).data_dir == str(tmp_path / "env")
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert load_config(str(config), None, env).data_dir == str(tmp_path / "xdg" / "ama")
