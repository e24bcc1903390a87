"""Script files for the scripted model are input like any other: decoded once, at load, into typed values."""

from __future__ import annotations

import pytest

from ama_acp.providers.scripted import ScriptError, load_script


def test_a_script_with_known_kinds_loads(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[reply]]\nstop = "max_tokens"\ntext = "x"\n[[reply]]\nfailure = { kind = "rate_limit" }\n')
    script = load_script(path)
    assert script.reply[0].stop == "max_tokens"
    assert script.reply[1].failure is not None and script.reply[1].failure.kind == "rate_limit"


@pytest.mark.parametrize(
    "body",
    ['[[reply]]\nstop = "whenever"\n', '[[reply]]\nfailure = { kind = "meltdown" }\n', "[[reply]]\nstop = 3\n"],
    ids=["unknown-stop", "unknown-failure-kind", "stop-not-a-string"],
)
def test_a_stop_or_failure_kind_ama_does_not_know_is_a_script_error_at_load(tmp_path, body):
    path = tmp_path / "s.toml"
    path.write_text(body)
    with pytest.raises(ScriptError, match="script"):
        load_script(path)
