from pathlib import Path

import anyio
import msgspec
import pytest

from ama_acp.tools.base import ToolArgs, ToolError, ToolResult
from ama_acp.tools.common import validate
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.read import ReadArgs
from ama_acp.tools.registry import by_name, default_tools, tool_specs
from ama_acp.tools.todo import TodoTool
from ama_acp.tools.workspace import LocalWorkspace


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))


def todo(ctx: ToolContext, **args: object) -> ToolResult:
    return anyio.run(TodoTool().run, args, ctx)


def test_todo_sets_the_plan_whole(ctx):
    todos = [
        {"content": "Write tests", "status": "completed", "priority": "high"},
        {"content": "Fix bug", "status": "in_progress"},
        {"content": "Ship", "status": "pending", "priority": "low"},
    ]
    result = todo(ctx, todos=todos)
    assert result.plan == [
        {"content": "Write tests", "status": "completed", "priority": "high"},
        {"content": "Fix bug", "status": "in_progress", "priority": "medium"},
        {"content": "Ship", "status": "pending", "priority": "low"},
    ]
    assert "[x] Write tests" in result.text and "[~] Fix bug" in result.text and "(1/3 done)" in result.text
    # Replaced whole, not merged.
    again = todo(ctx, todos=[{"content": "Only", "status": "pending"}])
    assert again.plan == [{"content": "Only", "status": "pending", "priority": "medium"}]
    assert TodoTool().title({"todos": todos}) == "Update plan (1/3 done)"


def test_todo_rejects_bad_status(ctx):
    with pytest.raises(ToolError, match=r"todos\[0\]\.status"):
        todo(ctx, todos=[{"content": "x", "status": "done"}])


def test_registry():
    tools = default_tools()
    names = [t.name for t in tools]
    assert names == [
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "find_files",
        "search",
        "run_command",
        "todo_write",
        "web_fetch",
        "task",
    ]
    assert set(by_name()) == set(names)
    kinds = {t.name: t.kind for t in tools}
    assert kinds["read_file"] == "read" and kinds["edit_file"] == "edit" and kinds["search"] == "search"
    assert kinds["run_command"] == "execute" and kinds["todo_write"] == "think"
    specs = tool_specs()
    assert [s.name for s in specs] == names
    for spec in specs:
        schema = spec.parameters
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        assert spec.description
        msgspec.json.encode(spec)  # travels to the provider as JSON


def test_schemas_are_valid_json_schema():
    jsonschema = pytest.importorskip("jsonschema")
    for tool in default_tools():
        jsonschema.Draft202012Validator.check_schema(tool.parameters)


def test_titles_never_fail_on_garbage():
    for tool in default_tools():
        garbage: list[ToolArgs] = [{}, {"path": 3, "command": None, "pattern": [], "todos": "x", "offset": "a"}]
        for args in garbage:
            assert isinstance(tool.title(args), str)
            tool.locations(args, "/w")


def test_validate_is_lenient_where_harmless():
    schema = default_tools()[0].parameters
    assert validate(schema, {"path": "a", "offset": "10", "limit": None}, ReadArgs) == {"path": "a", "offset": 10}
    with pytest.raises(ToolError, match="at least 1"):
        validate(schema, {"path": "a", "offset": 0}, ReadArgs)
    with pytest.raises(ToolError, match="must be a string"):
        validate(schema, {"path": 5}, ReadArgs)
    with pytest.raises(ToolError, match="JSON object"):
        validate(schema, ["a"], ReadArgs)
