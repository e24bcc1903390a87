"""MCP prompts as slash commands, the pure parts (mcp/prompts.py): a listing bounded, an argument line parsed, a
prompts/get result made into the parts of a user message; and resources (mcp/resources.py) as bounded text.
Hostile JSON never raises and stays within the bounds."""

from __future__ import annotations

import shlex
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.conversation.messages import ImagePart, TextPart
from ama_acp.mcp.prompts import (
    DESCRIPTION_BUDGET,
    MAX_ARGUMENTS,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS_PER_SERVER,
    McpPrompt,
    PromptArgument,
    parse_arguments,
    prompt_parts,
    prompts_from_listing,
)
from ama_acp.mcp.resources import MAX_LISTING_CHARS, MAX_READ_CHARS, listing, listing_lines, read_text
from ama_acp.mcp.results import is_base64
from tests.support.hypothesis_profiles import examples

PNG = "iVBORw0KGgo="


def review(*arguments: PromptArgument) -> McpPrompt:
    return McpPrompt("notes", "review", "mcp__notes__review", "Review.", list(arguments))


FILE, FOCUS = PromptArgument("file", required=True), PromptArgument("focus")


def test_a_listing_becomes_commands_with_hints_and_tool_style_names() -> None:
    prompts, dropped = prompts_from_listing(
        "my server",
        [
            {"name": "review", "description": "Review  a\nfile.", "arguments": [{"name": "file", "required": True}]},
            {"name": "plain"},
            {"name": "review"},
            {"description": "no name"},
            {"name": "with.dots/and space", "title": "Dotted"},
        ],
        set(),
    )
    assert [p.command for p in prompts] == [
        "mcp__my_server__review",
        "mcp__my_server__plain",
        "mcp__my_server__with_dots_and_space",
    ]
    assert prompts[0].description == "Review a file." and prompts[0].hint == "file"
    assert prompts[1].hint is None and "plain" in prompts[1].description
    assert prompts[2].description == "Dotted" and prompts[2].name == "with.dots/and space"
    assert len(dropped) == 2


def test_a_listing_is_bounded() -> None:
    raw = [
        {"name": f"p{i}", "description": "d" * 5000, "arguments": [{"name": f"a{j}"} for j in range(50)]}
        for i in range(1000)
    ]
    prompts, dropped = prompts_from_listing("s", raw, set())
    assert len(prompts) == MAX_PROMPTS_PER_SERVER
    assert all(len(p.description) == DESCRIPTION_BUDGET and p.description.endswith("…") for p in prompts)
    assert all(len(p.arguments) == MAX_ARGUMENTS for p in prompts)
    assert any("left out" in line for line in dropped)


def test_a_prompts_arguments_are_kept_as_its_server_s_prompts_are() -> None:
    """A usable name, the first of a name listed twice; each one left out said, with its prompt."""
    raw = [{"name": "p", "arguments": [{"name": "a", "required": True}, {"name": ""}, 7, {"name": "a"}, {"name": "b"}]}]
    [prompt], dropped = prompts_from_listing("s", raw, set())
    assert [(a.name, a.required) for a in prompt.arguments] == [("a", True), ("b", False)]
    assert dropped == [
        "argument of prompt 'p' #2 has no usable name",
        "argument of prompt 'p' #3 has no usable name",
        "argument of prompt 'p' 'a' is listed twice (the first is kept)",
    ]


def test_arguments_are_positional_and_the_last_takes_the_rest() -> None:
    prompt = review(FILE, FOCUS)
    assert parse_arguments(prompt, "a.py") == {"file": "a.py"}
    assert parse_arguments(prompt, '"my file.py" security and speed') == {
        "file": "my file.py",
        "focus": "security and speed",
    }
    assert parse_arguments(prompt, "'$(rm -rf /)' `x`") == {"file": "$(rm -rf /)", "focus": "`x`"}  # never run


def test_a_missing_required_argument_and_an_unclosed_quote_are_sentences() -> None:
    prompt = review(FILE, FOCUS)
    missing = parse_arguments(prompt, "")
    assert isinstance(missing, str) and "needs `file`" in missing and "file [focus]" in missing
    unclosed = parse_arguments(prompt, '"a.py')
    assert isinstance(unclosed, str) and "Could not read the arguments" in unclosed
    none = parse_arguments(review(), "extra")
    assert isinstance(none, str) and "takes no arguments" in none
    assert parse_arguments(review(), "") == {}


words = st.lists(st.text(min_size=1, max_size=12).filter(lambda w: "\x00" not in w), min_size=0, max_size=6)


@settings(max_examples=examples(300), deadline=None)
@given(words, st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=4))
def test_quoted_words_come_back_as_the_arguments(typed: list[str], required: int, optional: int) -> None:
    arguments = [PromptArgument(f"r{i}", required=True) for i in range(required)]
    arguments += [PromptArgument(f"o{i}") for i in range(optional)]
    prompt = review(*arguments)
    got = parse_arguments(prompt, " ".join(shlex.quote(w) for w in typed))
    if typed and not arguments:
        assert isinstance(got, str)
    elif len(typed) < required:
        assert isinstance(got, str) and "needs" in got
    else:
        assert isinstance(got, dict)
        names = [a.name for a in arguments]
        assert list(got) == names[: len(typed)]
        for index, name in enumerate(list(got)[:-1]):
            assert got[name] == typed[index]
        if got:
            assert got[names[len(got) - 1]] == " ".join(typed[len(got) - 1 :])


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=200))
def test_any_argument_line_gives_a_dict_or_a_sentence(line: str) -> None:
    got = parse_arguments(review(FILE, FOCUS), line)
    assert isinstance(got, dict | str)
    if isinstance(got, dict):
        assert set(got) <= {"file", "focus"} and "file" in got


def test_prompt_messages_become_parts() -> None:
    parts = prompt_parts(
        {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Do it."}},
                {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
                {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "a://b", "text": "body"}}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "a://c", "blob": "AAAA"}}},
                {"role": "user", "content": {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}},
                {"role": "user", "content": {"type": "resource_link", "uri": "a://d", "name": "d"}},
            ]
        },
        "p",
    )
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    assert texts[0] == "Do it." and "assistant's message" in texts[1] and texts[2] == "Sure."
    assert ImagePart(PNG, "image/png") in parts
    assert '<context uri="a://b">\nbody\n</context>' in texts
    assert any("binary resource a://c" in t and "3 bytes" in t for t in texts)
    assert any("'audio'" in t for t in texts)
    assert "[@d](a://d)" in texts


def test_a_huge_prompt_is_cut_with_a_marker() -> None:
    parts = prompt_parts({"messages": [{"role": "user", "content": {"type": "text", "text": "x" * 10_000_000}}]}, "p")
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    assert MAX_PROMPT_CHARS <= len(text) < MAX_PROMPT_CHARS + 200
    assert "characters of the prompt left out" in text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
content = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "resource", "resource_link", "audio"]) | json_values},
    optional={
        "text": json_values,
        "data": st.just(PNG) | json_values,
        "mimeType": st.just("image/png") | json_values,
        "resource": json_values,
        "uri": json_values,
        "name": json_values,
    },
)
message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]) | json_values, "content": content})


@settings(max_examples=examples(300), deadline=None)
@given(st.fixed_dictionaries({}, optional={"messages": st.lists(message | json_values, max_size=5)}) | json_values)
def test_any_prompt_result_gives_parts_without_an_exception(raw: Any) -> None:
    parts = prompt_parts(raw, "p")
    assert parts and all(isinstance(p, TextPart | ImagePart) for p in parts)
    # An image reaches the model only with data a provider can take (bad base64 would fail the whole request).
    assert all(is_base64(p.data) and p.mime_type.startswith("image/") for p in parts if isinstance(p, ImagePart))


def test_an_image_whose_data_is_not_base64_is_named_not_sent() -> None:
    bad = {"type": "image", "data": "not base64!", "mimeType": "image/png"}
    parts = prompt_parts({"messages": [{"role": "user", "content": bad}]}, "p")
    assert not any(isinstance(p, ImagePart) for p in parts)
    assert any("[an image (image/png) the prompt gave, not shown]" in p.text for p in parts if isinstance(p, TextPart))
    resource = read_text({"contents": [{"uri": "u", "mimeType": "image/png", "blob": "not base64!"}]}, "u")
    assert resource.images == [] and "[binary resource u (image/png," in resource.text


entry = st.fixed_dictionaries(
    {},
    optional={
        "name": json_values,
        "description": json_values,
        "title": json_values,
        "arguments": st.lists(st.fixed_dictionaries({"name": json_values, "required": json_values}), max_size=3)
        | json_values,
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(entry | json_values, max_size=8) | json_values)
def test_any_prompt_listing_gives_bounded_prompts(raw: Any) -> None:
    prompts, dropped = prompts_from_listing("s", raw, set())
    assert len({p.command for p in prompts}) == len(prompts)
    for p in prompts:
        assert len(p.description) <= DESCRIPTION_BUDGET and len(p.arguments) <= MAX_ARGUMENTS
        assert p.command.startswith("mcp__s__") and len(p.command) <= 64


def test_resources_are_lines_and_reads_are_bounded() -> None:
    lines = listing_lines(
        "notes",
        [{"uri": "notes://a", "name": "a", "mimeType": "text/plain", "description": "A."}, {"name": "no uri"}],
        [{"uriTemplate": "notes://{x}", "name": "by x"}],
    )
    assert lines == [
        "- notes://a — a (text/plain): A.",
        "- (1 entries without a uri left out)",
        "- template notes://{x} — by x",
    ]
    many = listing_lines("s", [{"uri": f"u{i}", "name": "n" * 5000} for i in range(5000)], None)
    assert len(many) == 201 and all(len(line) < 400 for line in many)
    assert many[-1] == "- (4800 more resource entries left out)"
    whole = listing([("s", many), ("t", many), ("u", [])])
    assert len(whole) < MAX_LISTING_CHARS + 200 and "(ask for one `server` at a time) left out" in whole
    assert listing([("u", [])]) == "## u\n- (none)"
    big = read_text({"contents": [{"uri": "u", "text": "x" * 1_000_000}]}, "u")
    assert len(big.text) < MAX_READ_CHARS + 200 and "left out" in big.text
    image = read_text({"contents": [{"uri": "u", "mimeType": "image/png", "blob": PNG}]}, "u")
    assert image.images == [ImagePart(PNG, "image/png")] and PNG not in image.text
    blob = read_text({"contents": [{"uri": "u", "mimeType": "application/zip", "blob": "AAAA" * 1000}]}, "u")
    assert "3000 bytes" in blob.text and "AAAA" not in blob.text


@settings(max_examples=examples(300), deadline=None)
@given(json_values, json_values, json_values)
def test_any_resource_answer_gives_text_without_an_exception(resources: Any, templates: Any, read: Any) -> None:
    assert all(isinstance(line, str) for line in listing_lines("s", resources, templates))
    assert isinstance(read_text(read, "u").text, str)
    assert isinstance(read_text({"contents": [read, {"blob": read, "mimeType": read}]}, "u").text, str)
