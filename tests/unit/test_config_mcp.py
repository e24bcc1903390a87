"""`[mcp]` in the config file (docs/configuration.md): defaults, and a hostile or mistyped value is a ConfigError
naming the setting, never a bound the session would trip over later."""

from __future__ import annotations

import pytest

from ama_acp.config import parse_config
from ama_acp.errors import ConfigError


def test_defaults_without_a_table() -> None:
    cfg = parse_config("")
    assert cfg.mcp.start_timeout == 10.0 and cfg.mcp.call_timeout == 120.0


def test_values_are_read() -> None:
    cfg = parse_config("[mcp]\nstart_timeout = 2\ncall_timeout = 30.5\n")
    assert cfg.mcp.start_timeout == 2.0 and cfg.mcp.call_timeout == 30.5


@pytest.mark.parametrize(
    "table",
    [
        "start_timeout = -1",
        "start_timeout = nan",
        "start_timeout = inf",
        "call_timeout = 0",
        "call_timeout = -5",
        "call_timeout = nan",
        'call_timeout = "soon"',
        "unknown = 1",
    ],
)
def test_bad_values_are_config_errors(table: str) -> None:
    with pytest.raises(ConfigError, match="mcp"):
        parse_config(f"[mcp]\n{table}\n")
