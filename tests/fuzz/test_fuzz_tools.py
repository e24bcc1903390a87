"""Every tool against generated arguments: valid shapes with hostile values, and random JSON.

Invariant: the call ends, in bounded time, with a ToolResult or a ToolError — never another exception —
and nothing outside the workspace changes. Edits to paths outside the workspace are not run, as the
permission layer would stop them first (it asks); run_command runs only harmless command lines.

AMA_FUZZ_EXAMPLES sets the number of examples (default 300 under the `ci` hypothesis profile, about 15 s; a
quarter under `dev`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.registry import default_tools, run_with_deadline
from ama_acp.tools.workspace import LocalWorkspace
from tests.support.hypothesis_profiles import examples

EXAMPLES = int(os.environ.get("AMA_FUZZ_EXAMPLES") or examples(300))
PER_EXAMPLE_SECONDS = 20.0
TOOLS = {t.name: t for t in default_tools()}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
hostile_strings = st.sampled_from(
    [
        "a.txt", "sub", "sub/b.py", "pipe", "zero", "proc", ".git/config", "new/file.txt", "../outside/x",
        "/etc/passwd", "", ".", "~", "~\0", "a\0b", "\ud800", "a" * 5000, "**/" * 40 + "*x", "(a+)+$",
        "{" * 60, "[z-a]", "\\", "*", "*.py", "x" * 300 + "/" + "y" * 300, "sub/../../outside", "\n",
    ]
)  # fmt: skip
hostile_ints = st.sampled_from([0, -1, 1, 2, 10**30, -(10**30), "12", "x", 1.5, 1e308, float("nan"), True, None])
HARMLESS_COMMANDS = ["true", "echo hi", "printf 'a\\0b'", "exit 3", "echo out; echo err >&2", "cat a.txt"]


def _value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if kind == "string":
        return hostile_strings | st.text(max_size=30) | json_values
    if kind in ("integer", "number"):
        return hostile_ints | st.integers() | json_values
    if kind == "boolean":
        return st.sampled_from([True, False, "true", "no", 0]) | json_values
    if kind == "array":
        return st.lists(_value_for(schema.get("items", {})), max_size=3) | json_values
    if kind == "object":
        return _shaped(schema) | json_values
    return json_values


def _shaped(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props: dict[str, Any] = schema.get("properties", {})
    fields = {k: _value_for(v) for k, v in props.items()}
    extra = st.dictionaries(st.text(max_size=6), json_values, max_size=2)
    return st.fixed_dictionaries({}, optional=fields) | st.builds(
        lambda a, b: {**a, **b}, st.fixed_dictionaries(fields), extra
    )


def _arguments(name: str) -> st.SearchStrategy[Any]:
    shaped = _shaped(TOOLS[name].parameters)
    if name == "run_command":
        # Random values everywhere but the command line itself.
        shaped = st.builds(
            lambda a, c: {**a, "command": c} if isinstance(a, dict) else a, shaped, st.sampled_from(HARMLESS_COMMANDS)
        )
        return shaped
    return shaped | json_values


calls = st.sampled_from(sorted(TOOLS)).flatmap(lambda name: st.tuples(st.just(name), _arguments(name)))


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p)] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    ws, outside = base / "ws", base / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "x").write_text("outside\n")
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "sub" / "b.py").write_text("print('b')\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    os.mkfifo(ws / "pipe")
    (ws / "zero").symlink_to("/dev/zero")
    (ws / "proc").symlink_to("/proc/self/status")
    return ws, outside


def _would_be_stopped_by_permission(name: str, args: Any, ctx: ToolContext) -> bool:
    tool = TOOLS[name]
    if tool.kind not in ("edit", "delete", "move"):
        return False
    return any(not ctx.resolve(loc.path).inside for loc in tool.locations(args, ctx.cwd))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(call=calls)
def test_every_tool_answers_every_argument(world, call):
    ws, outside = world
    name, args = call
    ctx = ToolContext(LocalWorkspace(kill_grace=0.2), str(ws), PathPolicy([str(ws)]))
    if _would_be_stopped_by_permission(name, args, ctx):
        return
    before = _snapshot(outside), sorted(os.listdir(ws.parent))

    async def one() -> ToolResult | ToolError:
        with anyio.fail_after(PER_EXAMPLE_SECONDS):
            try:
                return await run_with_deadline(TOOLS[name], args, ctx)
            except ToolError as e:
                return e

    outcome = anyio.run(one)
    assert isinstance(outcome, ToolResult | ToolError)
    assert isinstance(outcome.text if isinstance(outcome, ToolResult) else str(outcome), str)
    assert (_snapshot(outside), sorted(os.listdir(ws.parent))) == before
