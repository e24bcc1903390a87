"""`[compaction] retention_days` in the config file (docs/configuration.md, docs/sessions.md "Handoff retention"):
the default, the values read, and a hostile or mistyped value is a ConfigError naming the setting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.config import Config, parse_config
from ama_acp.errors import ConfigError


def test_the_default_is_two_days() -> None:
    assert parse_config("").compaction.retention_days == 2
    assert parse_config("[compaction]\nkeep_tokens = 10\n").compaction.retention_days == 2
    assert Config().compaction.retention_days == 2


@pytest.mark.parametrize("days", [0, 1, 2, 30, 36_500])
def test_values_are_read(days: int) -> None:
    assert parse_config(f"[compaction]\nretention_days = {days}\n").compaction.retention_days == days


@pytest.mark.parametrize(
    "value",
    ["-1", "36501", "99999999999999999999", "2.5", "nan", "true", '"two"', "[2]", "{ days = 2 }"],
)
def test_a_bad_value_is_a_config_error_naming_the_setting(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[compaction]\nretention_days = {value}\n", "cfg.toml")
    assert "retention_days" in str(info.value) and str(info.value).startswith("cfg.toml: ")


@given(st.integers())
def test_property_any_integer_is_read_or_refused_by_name(days: int) -> None:
    try:
        cfg = parse_config(f"[compaction]\nretention_days = {days}\n")
    except ConfigError as exc:
        assert not 0 <= days <= 36_500 and "retention_days" in str(exc)
    else:
        assert cfg.compaction.retention_days == days and 0 <= days <= 36_500
