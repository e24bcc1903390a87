"""shaping/front_matter.py: a file's YAML front matter read as hostile input (docs/commands.md)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.shaping.front_matter import MAX_BYTES, FrontMatterError, split, text_field


def test_front_matter_and_body_are_split_with_the_bodys_first_line() -> None:
    doc = split("---\ndescription: Review a file\nargument-hint: <path>\n---\nLook at $1.\n")
    assert doc.meta == {"description": "Review a file", "argument-hint": "<path>"}
    assert doc.body == "Look at $1.\n" and doc.body_line == 5


def test_a_file_without_front_matter_is_all_body() -> None:
    doc = split("Just a prompt\n---\nwith a rule\n")
    assert doc.meta == {} and doc.body == "Just a prompt\n---\nwith a rule\n" and doc.body_line == 1


def test_block_scalars_and_lists_as_other_agents_write_them() -> None:
    doc = split("---\ndescription: |\n  two\n  lines\nallowed-tools: [Bash(git add:*)]\n---\nbody")
    assert doc.meta["description"] == "two\nlines\n" and doc.meta["allowed-tools"] == ["Bash(git add:*)"]
    assert text_field(doc.meta, "description") == "two lines"


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("---\na: &x [1]\nb: *x\n---\n", 3, "aliases"),
        ("---\n- 1\n---\n", 2, "mapping"),
        ("---\na: [\n---\n", 3, "malformed YAML"),
        ("---\na: 1\n", 1, "never closed"),
        ("---\n1: x\n---\n", 2, "mapping"),
        ("---\na: !!python/object:os.system x\n---\n", 2, "malformed YAML"),
    ],
)
def test_what_is_not_read_is_an_error_naming_its_line(text: str, line: int, says: str) -> None:
    with pytest.raises(FrontMatterError) as caught:
        split(text)
    assert caught.value.line == line and says in str(caught.value)


def test_an_alias_bomb_is_refused_at_once() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [*a{n - 1}, *a{n - 1}, *a{n - 1}, *a{n - 1}]" for n in range(1, 30)]
    start = time.perf_counter()
    with pytest.raises(FrontMatterError, match="aliases"):
        split("---\n" + "\n".join(lines) + "\n---\nbody")
    assert time.perf_counter() - start < 2


def test_front_matter_past_the_bound_is_refused() -> None:
    with pytest.raises(FrontMatterError, match="KiB"):
        split("---\nd: " + "x" * MAX_BYTES + "\n---\n")


def test_a_text_field_takes_bare_scalars_refuses_structures_and_cuts_with_a_marker() -> None:
    assert text_field({"d": 3}, "d") == "3" and text_field({"d": True}, "d") == "true"
    assert text_field({}, "d") is None
    with pytest.raises(FrontMatterError, match="must be text"):
        text_field({"d": ["x"]}, "d")
    cut = text_field({"d": "y" * 50}, "d", limit=10)
    assert cut == "y" * 10 + "… [+40 chars]"


@given(st.text(max_size=400))
def test_any_text_is_split_or_refused_with_a_line(text: str) -> None:
    try:
        doc = split("---\n" + text + "\n---\nbody")
    except FrontMatterError as exc:
        assert exc.line >= 1
    else:
        assert isinstance(doc.meta, dict) and all(isinstance(k, str) for k in doc.meta)


@pytest.mark.parametrize("opener", ["[", "{"])
def test_deep_flow_nesting_is_refused_before_parsing(opener: str) -> None:
    """PyYAML's Python scanner is quadratic in the depth (30,000 levels took 47 s): refused in one pass."""
    closer = "]" if opener == "[" else "}"
    start = time.perf_counter()
    with pytest.raises(FrontMatterError, match="nested 30000 levels"):
        split("---\na: " + opener * 30000 + closer * 30000 + "\n---\n")
    assert time.perf_counter() - start < 1


def test_deep_block_nesting_within_the_bound_parses_quickly() -> None:
    source = "\n".join(" " * n + f"k{n}:" for n in range(300)) + " x"
    start = time.perf_counter()
    assert "k0" in split("---\n" + source + "\n---\n").meta
    assert time.perf_counter() - start < 2
