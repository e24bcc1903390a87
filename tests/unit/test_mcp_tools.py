"""Wire names for MCP tools: what both providers accept, unique in the session; listings read defensively."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.mcp.tools import (
    DESCRIPTION_BUDGET,
    MAX_TOOLS_PER_SERVER,
    WIRE_NAME_PATTERN,
    tools_from_listing,
    wire_names,
)
from tests.support.hypothesis_profiles import examples


def test_plain_names_read_as_mcp_server_tool() -> None:
    assert wire_names("github", ["create_issue", "list-prs"], set()) == [
        "mcp__github__create_issue",
        "mcp__github__list-prs",
    ]


def test_characters_providers_refuse_become_underscores() -> None:
    assert wire_names("my server", ["files.read/all", "ünïcode"], set()) == [
        "mcp__my_server__files_read_all",
        "mcp__my_server___n_code",
    ]


def test_long_names_are_clipped_to_64_keeping_the_tool_part() -> None:
    [name] = wire_names("s" * 100, ["t" * 100], set())
    assert len(name) == 64 and WIRE_NAME_PATTERN.match(name)
    assert name.startswith("mcp__" + "s" * 16 + "__ttt")


def test_collisions_are_made_unique_and_stable() -> None:
    first = wire_names("a.b", ["x"], set())
    second = wire_names("a_b", ["x"], set(first))
    assert first == ["mcp__a_b__x"] and second[0] != first[0]
    assert second == wire_names("a_b", ["x"], set(first))  # the same tool keeps its name on a re-listing
    same_after_sanitising = wire_names("s", ["a.b", "a/b", "a b"], set())
    assert len(set(same_after_sanitising)) == 3


names = st.text(min_size=0, max_size=120)


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(st.tuples(names, st.lists(names, max_size=8)), max_size=5),
    st.sets(st.from_regex(WIRE_NAME_PATTERN, fullmatch=True), max_size=5),
)
def test_wire_names_always_match_the_pattern_and_are_unique(
    servers: list[tuple[str, list[str]]], taken: set[str]
) -> None:
    used = set(taken)
    for server, tools in servers:
        out = wire_names(server, tools, used)
        assert len(out) == len(tools)
        for name in out:
            assert WIRE_NAME_PATTERN.match(name), name
            assert name not in used
            used.add(name)


def test_listing_maps_annotations_schema_description_and_title() -> None:
    raw: list[Any] = [
        {
            "name": "read",
            "description": "Reads.",
            "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}},
            "annotations": {"readOnlyHint": True, "title": "Read a file"},
        },
        {"name": "write", "description": "d" * 5000, "inputSchema": {"type": "array"}, "title": "Write"},
        {"name": "loose", "inputSchema": {"properties": {"a": {}}}, "annotations": {"readOnlyHint": "yes"}},
        {"name": "odd", "inputSchema": "not a schema", "annotations": []},
    ]
    tools, dropped = tools_from_listing("fs", raw, set())
    assert dropped == []
    read, write, loose, odd = tools
    assert (read.wire_name, read.read_only, read.title) == ("mcp__fs__read", True, "Read a file")
    assert read.input_schema == raw[0]["inputSchema"]
    assert write.read_only is False and write.title == "Write"
    assert len(write.description) == DESCRIPTION_BUDGET and write.description.endswith("…")
    assert write.input_schema == {"type": "object"}
    assert loose.input_schema == {"type": "object", "properties": {"a": {}}}
    assert loose.read_only is False  # only a real `true` counts
    assert odd.input_schema == {"type": "object"} and odd.description == ""


def test_listing_drops_nameless_and_repeated_tools_and_caps_the_count() -> None:
    raw: list[Any] = [{"name": "a"}, {"name": ""}, "junk", {"name": "a"}, {"nope": 1}]
    tools, dropped = tools_from_listing("s", raw, set())
    assert [t.name for t in tools] == ["a"]
    assert len(dropped) == 4
    many = [{"name": f"t{i}"} for i in range(MAX_TOOLS_PER_SERVER + 10)]
    tools, dropped = tools_from_listing("s", many, set())
    assert len(tools) == MAX_TOOLS_PER_SERVER and "10 left out" in dropped[-1]
    assert tools_from_listing("s", {"tools": []}, set()) == ([], ["the tool list is not a list"])
