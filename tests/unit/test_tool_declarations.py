"""The built-in tools' declarations as the model sees them, written once in ama_acp/tools/declared.py so that a
session's first request does not import every tool's module (issue 41): they must stay the tools' own.

After a change to a tool's name, description or schema, regenerate the table:

    .venv/bin/python -m tests.unit.test_tool_declarations > ama_acp/tools/declared.py
    .venv/bin/ruff format ama_acp/tools/declared.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence

import pytest

from ama_acp.config import WebConfig
from ama_acp.conversation.tools import ToolSpec
from ama_acp.tools.declared import DECLARED
from ama_acp.tools.registry import declared_specs, default_tools, make_tool, tool_specs

HEADER = '''"""The built-in tools as the model sees them (name, description, JSON schema of the arguments), with where each
is defined: what a session's requests declare before any tool runs, without importing every tool's module (~15 ms
of a fresh ama's first answer, issue 41). Generated from the tools themselves, and checked equal to them, by
tests/unit/test_tool_declarations.py; `task` is left out (its declaration lists the configured agents: task.py
builds it).
"""

from __future__ import annotations

from ama_acp.tools.base import JSONObject

# name → (module, class, description, parameters), in the order the model sees the tools (registry.default_tools).
DECLARED: dict[str, tuple[str, str, str, JSONObject]] = '''


def render() -> str:
    table = {
        t.name: (type(t).__module__, type(t).__qualname__, t.description, t.parameters)
        for t in default_tools()
        if t.name != "task"
    }
    return HEADER + repr(table) + "\n"


def _exact(specs: Sequence[ToolSpec]) -> str:
    """Key order included: a request's bytes, and so the meter's figures, depend on it."""
    return json.dumps([[s.name, s.description, s.parameters] for s in specs], ensure_ascii=False)


@pytest.mark.parametrize("agents", [None, {}, {"reviewer": "reads diffs", "quiet": ""}])
def test_the_declared_specs_are_the_tools_own_byte_for_byte(agents: Mapping[str, str] | None) -> None:
    made = tool_specs(default_tools(WebConfig(allow_hosts=["example.org"]), agents))
    assert _exact(declared_specs(agents)) == _exact(made), "regenerate ama_acp/tools/declared.py (this module's doc)"


def test_each_declared_tool_is_made_from_the_module_and_class_the_table_names() -> None:
    web = WebConfig(allow_hosts=["example.org"])
    agents = {"reviewer": "reads diffs"}
    for tool in default_tools(web, agents):
        made = make_tool(tool.name, web, agents)
        assert type(made) is type(tool)
        assert vars(made) == vars(tool)  # web_fetch's hosts, task's agents: made as default_tools makes them
        if tool.name != "task":
            assert DECLARED[tool.name][:2] == (type(tool).__module__, type(tool).__qualname__)


@pytest.mark.parametrize("name", ["", "nope", "ama_acp.tools.read", "ReadTool", "__class__", "task "])
def test_a_name_that_is_no_built_in_tool_makes_none(name: str) -> None:
    assert make_tool(name) is None


if __name__ == "__main__":
    sys.stdout.write(render())
