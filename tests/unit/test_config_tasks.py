"""`[tasks]` and `[agents.NAME]` in the config file (docs/configuration.md "Delegation"): the defaults, the values
read, and every value ama cannot use — external agents included, until they are supported — a ConfigError
naming the setting."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.config import Config, parse_config
from ama_acp.errors import ConfigError
from tests.support.hypothesis_profiles import examples


def test_the_defaults() -> None:
    cfg = parse_config("")
    assert cfg.tasks.max_parallel == 3 and cfg.tasks.timeout == 600
    assert cfg.agents == {} and Config().agents == {}


def test_an_agent_is_read() -> None:
    cfg = parse_config(
        '[tasks]\nmax_parallel = 2\ntimeout = 30\n[agents.rev-1]\nmodel = "local/m"\ntools = ["read_file"]\n'
        'instructions = "be brief"\ndescription = "reviews"\n'
    )
    agent = cfg.agents["rev-1"]
    assert (cfg.tasks.max_parallel, cfg.tasks.timeout) == (2, 30)
    assert (agent.model, agent.tools, agent.instructions, agent.description) == (
        "local/m",
        ["read_file"],
        "be brief",
        "reviews",
    )


@pytest.mark.parametrize("key", ['command = "other-agent"', 'args = ["--acp"]', 'env = { A = "1" }'])
def test_an_external_agent_is_refused_until_supported(key: str) -> None:
    with pytest.raises(ConfigError, match=r"agents\.ext: `command`, `args` and `env` .* not yet supported"):
        parse_config(f"[agents.ext]\n{key}\n")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[agents.general]\n", "built-in"),
        ("[agents.explore]\nmodel = 'x/y'\n", "built-in"),
        ('[agents.a]\ntools = ["task"]\n', "cannot start tasks"),
        ('[agents.a]\ntools = [""]\n', r"agents\.a\.tools\[0\]"),
        ("[agents.a]\nsurprise = 1\n", "surprise"),
        ("[tasks]\nmax_parallel = 0\n", "tasks.max_parallel"),
        ("[tasks]\nmax_parallel = 33\n", "tasks.max_parallel"),
        ("[tasks]\ntimeout = 0\n", "tasks.timeout"),
        ("[tasks]\ntimeout = 'long'\n", "timeout"),
        ("[tasks]\nparallel = 2\n", "parallel"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_it(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_config(text)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


@settings(max_examples=examples(300))
@given(st.text(max_size=80))
def test_any_agent_name_is_accepted_or_refused_by_name(name: str) -> None:
    """Whatever the key of `[agents.…]`, the file is read or refused with a ConfigError — never another error."""
    text = f"[agents.{json.dumps(name)}]\n"
    try:
        cfg = parse_config(text)
    except ConfigError as exc:
        assert str(exc).startswith("config: ")
        assert not (NAME.fullmatch(name) and name not in ("general", "explore"))
    else:
        assert NAME.fullmatch(name) and name not in ("general", "explore")
        assert list(cfg.agents) == [name]
