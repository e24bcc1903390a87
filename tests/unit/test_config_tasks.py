"""`[tasks]` and `[agents.NAME]` in the config file (docs/configuration.md "Delegation"): the defaults, the values
read, and every value ama cannot use (external agents' `command`, `args` and `env` included) a ConfigError
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


def test_an_external_agent_is_read() -> None:
    cfg = parse_config('[agents.ext]\ncommand = "other-agent"\nargs = ["--acp"]\nenv = { OTHER_API_KEY = "k" }\n')
    agent = cfg.agents["ext"]
    assert (agent.command, agent.args, agent.env) == ("other-agent", ["--acp"], {"OTHER_API_KEY": "k"})


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('args = ["--acp"]', r"agents\.ext: `args` and `env` belong to an external agent"),
        ('env = { A = "1" }', r"agents\.ext: `args` and `env` belong to an external agent"),
        ('command = "x"\nmodel = "a/b"', r"agents\.ext: an external agent .* remove `model`"),
        ('command = "x"\ntools = ["read_file"]', r"agents\.ext: an external agent"),
        ('command = " "', r"agents\.ext\.command must be"),
        ('command = "a\\u0000b"', r"agents\.ext\.command must be"),
        ('command = "x"\nargs = ["a\\u0000"]', r"agents\.ext\.args\[0\]"),
        ('command = "x"\nenv = { "A B" = "1" }', r"agents\.ext\.env: 'A B' is not"),
        ('command = "x"\nenv = { K = "s\\u0000cret" }', r"agents\.ext\.env\.K: a value"),
    ],
)
def test_a_bad_external_agent_is_refused_naming_the_key(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        parse_config(f"[agents.ext]\n{text}\n")
    assert "cret" not in str(caught.value)  # an env value (a key, maybe) is never quoted back


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")


def toml_string(text: str) -> str:
    """A TOML basic string holding `text` exactly (control characters and DEL escaped)."""
    body = "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or c == "\x7f" else "\\" + c if c in '"\\' else c for c in text)
    return f'"{body}"'


@settings(max_examples=examples(200))
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=4), st.lists(st.text(max_size=20)))
def test_any_external_env_and_args_are_read_or_refused_by_name(env: dict[str, str], args: list[str]) -> None:
    """Whatever `env` and `args` hold, the file is read (every name a variable name, no NUL anywhere) or refused
    with a ConfigError naming the key — never another error."""
    table = ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in env.items())
    listed = ", ".join(toml_string(a) for a in args)
    text = f'[agents.ext]\ncommand = "agent"\nargs = [{listed}]\nenv = {{ {table} }}\n'
    ok = all(ENV_NAME.fullmatch(k) and "\0" not in v for k, v in env.items()) and all("\0" not in a for a in args)
    try:
        cfg = parse_config(text)
    except ConfigError as exc:
        assert not ok and "agents.ext" in str(exc)
    else:
        assert ok and cfg.agents["ext"].env == env and cfg.agents["ext"].args == args


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
