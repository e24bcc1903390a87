"""`run_command`'s `outside_sandbox` (issue 38): its declaration, how the call's value is read — by the tool and
the approver alike, strictly — and the workspace's `confined` switch. Through the real pipes, with the person's
answers: tests/integration/test_sandbox_retry_e2e.py."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.config import SandboxConfig
from ama_acp.sandbox import Sandbox, kernel_abi, sandbox_state
from ama_acp.session.editor import unconfined
from ama_acp.tools.base import ToolError
from ama_acp.tools.common import validate
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.shell import OUTSIDE_SANDBOX, ShellArgs, ShellTool, outside_sandbox
from ama_acp.tools.workspace import LocalWorkspace
from tests.support.hypothesis_profiles import examples

ABI, WHY = kernel_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason=f"no Landlock here: {WHY}")


def test_the_declaration_offers_it_as_an_optional_boolean_the_person_grants() -> None:
    params = ShellTool.parameters
    properties, required = params["properties"], params["required"]
    assert isinstance(properties, dict) and isinstance(required, list)
    declared = properties[OUTSIDE_SANDBOX]
    assert isinstance(declared, dict) and declared["type"] == "boolean" and OUTSIDE_SANDBOX not in required
    said = str(declared["description"])
    assert "person is always asked" in said and "sandbox blocked" in said
    validate(params, {"command": "true", OUTSIDE_SANDBOX: True}, ShellArgs)  # the schema takes it


@pytest.mark.parametrize(
    ("args", "wanted"),
    [({}, False), ({OUTSIDE_SANDBOX: None}, False), ({OUTSIDE_SANDBOX: False}, False), ({OUTSIDE_SANDBOX: True}, True)],
)
def test_only_a_json_true_asks_for_it(args: dict[str, object], wanted: bool) -> None:
    assert outside_sandbox({"command": "x", **args}) is wanted


@settings(max_examples=examples(100))
@given(st.recursive(st.integers() | st.floats() | st.text(), lambda v: st.lists(v) | st.dictionaries(st.text(), v)))
def test_any_other_value_is_an_error_of_the_call_naming_the_argument(value: object) -> None:
    with pytest.raises(ToolError, match=r"^Argument `outside_sandbox` must be the JSON value true or false, not "):
        outside_sandbox({"command": "x", OUTSIDE_SANDBOX: value})


def test_a_string_true_is_refused_though_validate_takes_it_for_other_booleans(tmp_path: Path) -> None:
    """The tool refuses the call before anything runs: the approver asked about no run outside the sandbox."""
    ctx = ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))
    with pytest.raises(ToolError, match="not 'true'"):
        args: dict[str, object] = {"command": "touch ran", OUTSIDE_SANDBOX: "true"}
        anyio.run(ShellTool().run, args, ctx)
    assert not (tmp_path / "ran").exists()


def test_the_approver_asks_only_for_run_command_where_a_sandbox_is_on(tmp_path: Path) -> None:
    ctx = ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))  # sandboxed unless told
    flag = {"command": "x", OUTSIDE_SANDBOX: True}
    assert unconfined.wanted("run_command", flag, ctx)
    assert not unconfined.wanted("write_file", flag, ctx)
    assert not unconfined.wanted("run_command", {"command": "x"}, ctx)
    off = ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]), sandboxed=False)
    assert not unconfined.wanted("run_command", flag, off)  # unconfined anyway: the usual question
    with pytest.raises(ToolError):
        unconfined.wanted("run_command", {"command": "x", OUTSIDE_SANDBOX: 1}, ctx)
    assert [o.option_id for o in unconfined.OPTIONS] == ["allow_once", "reject_once"]


@needs_landlock
def test_the_workspace_runs_unconfined_only_when_told(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    # No launcher kept ready (sandbox/warm.py): each anyio.run is an event loop of its own, and a launcher belongs to one.
    workspace = LocalWorkspace(sandbox=Sandbox(sandbox_state(SandboxConfig()), [str(ws)], warm=False))
    target = tmp_path / "outside.txt"
    line = f"echo out > {target}"
    confined = anyio.run(workspace.run_command, line, str(ws), 30.0, 1000)
    assert confined.exit_code != 0 and confined.sandbox.startswith("writes outside the workspace")
    assert not target.exists()
    free = anyio.run(workspace.run_command, line, str(ws), 30.0, 1000, False)
    assert free.exit_code == 0 and free.sandbox == "" and target.read_text() == "out\n"
