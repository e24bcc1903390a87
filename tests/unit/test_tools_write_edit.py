from pathlib import Path

import anyio
import pytest

from ama_acp.tools.base import ToolArgs, ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.edit import EditTool
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.workspace import LocalWorkspace
from ama_acp.tools.write import WriteTool


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))


def write(ctx: ToolContext, **args: object) -> ToolResult:
    return anyio.run(WriteTool().run, args, ctx)


def edit(ctx: ToolContext, path: str, *edits: dict[str, object]) -> ToolResult:
    args: ToolArgs = {"path": path, "edits": list(edits)}
    return anyio.run(EditTool().run, args, ctx)


def e(old: str, new: str, **kw: object) -> dict[str, object]:
    return {"old_text": old, "new_text": new, **kw}


# --- write ---


def test_write_new_file_creates_parents(tmp_path, ctx):
    result = write(ctx, path="a/b/new.py", content="print(1)\n")
    target = tmp_path / "a" / "b" / "new.py"
    assert target.read_text() == "print(1)\n"
    assert result.diffs[0].old_text is None
    assert result.diffs[0].new_text == "print(1)\n"
    assert result.diffs[0].path == str(target)
    assert result.locations[0].line == 1
    assert "Created a/b/new.py" in result.text


def test_overwrite_has_diff_and_first_changed_line(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("a\nb\nc\n")
    result = write(ctx, path="f.txt", content="a\nB\nc\n")
    assert (tmp_path / "f.txt").read_text() == "a\nB\nc\n"
    assert result.diffs[0].old_text == "a\nb\nc\n"
    assert result.locations[0].line == 2


def test_write_keeps_exact_newlines(tmp_path, ctx):
    write(ctx, path="w.txt", content="x\r\ny\n")
    assert (tmp_path / "w.txt").read_bytes() == b"x\r\ny\n"


def test_write_no_diff_above_limit(tmp_path, ctx):
    (tmp_path / "big.txt").write_text("x" * 300_000)
    result = write(ctx, path="big.txt", content="small\n")
    assert result.diffs == []
    assert "256 KiB" in result.text


def test_write_over_directory_fails(tmp_path, ctx):
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="directory"):
        write(ctx, path="d", content="x")


# --- edit ---


def test_single_edit(tmp_path, ctx):
    (tmp_path / "f.py").write_text("def a():\n    return 1\n")
    result = edit(ctx, "f.py", e("return 1", "return 2"))
    assert (tmp_path / "f.py").read_text() == "def a():\n    return 2\n"
    assert result.diffs[0].old_text == "def a():\n    return 1\n"
    assert result.diffs[0].new_text == "def a():\n    return 2\n"
    assert result.locations[0].line == 2
    assert not result.is_error


def test_several_edits_in_order(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("alpha\nbeta\ngamma\n")
    result = edit(ctx, "f.txt", e("gamma", "GAMMA"), e("alpha", "ALPHA"), e("ALPHA\nbeta", "ALPHA\nBETA"))
    assert (tmp_path / "f.txt").read_text() == "ALPHA\nBETA\nGAMMA\n"
    assert result.locations[0].line == 1
    assert "3 edits" in result.text


def test_old_text_missing(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("hello world\n")
    with pytest.raises(ToolError, match="not found") as info:
        edit(ctx, "f.txt", e("hello wrld", "x"))
    assert "closest line is 1" in str(info.value)


def test_old_text_missing_whitespace_hint(tmp_path, ctx):
    (tmp_path / "f.py").write_text("if x:\n\treturn 1\n")
    with pytest.raises(ToolError, match="indentation"):
        edit(ctx, "f.py", e("if x:\n    return 1", "pass"))


def test_old_text_with_line_numbers_hint(tmp_path, ctx):
    (tmp_path / "f.py").write_text("a = 1\n")
    with pytest.raises(ToolError, match="line numbers"):
        edit(ctx, "f.py", e("     1\ta = 1", "a = 2"))


def test_non_unique(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times") as info:
        edit(ctx, "f.txt", e("x = 1", "x = 3"))
    assert "lines 1, 3" in str(info.value)
    assert "replace_all" in str(info.value)
    assert (tmp_path / "f.txt").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_replace_all(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("foo bar foo\nfoo\n")
    result = edit(ctx, "f.txt", e("foo", "baz", replace_all=True))
    assert (tmp_path / "f.txt").read_text() == "baz bar baz\nbaz\n"
    assert "3 replacements" in result.text


def test_atomic_when_a_later_edit_fails(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    with pytest.raises(ToolError, match="Edit 2"):
        edit(ctx, "f.txt", e("one", "ONE"), e("three", "THREE"))
    assert (tmp_path / "f.txt").read_text() == "one\ntwo\n"


def test_earlier_edit_changed_the_text(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    with pytest.raises(ToolError, match="earlier edit"):
        edit(ctx, "f.txt", e("one", "ONE"), e("one", "uno"))


def test_location_is_first_changed_line(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("".join(f"l{i}\n" for i in range(1, 21)))
    result = edit(ctx, "f.txt", e("l15\n", "fifteen\n"), e("l7\n", "seven\n"))
    assert result.locations[0].line == 7


def test_missing_file(ctx):
    with pytest.raises(ToolError, match="write_file"):
        edit(ctx, "nope.txt", e("a", "b"))


def test_empty_and_identical(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("a\n")
    with pytest.raises(ToolError, match="empty"):
        edit(ctx, "f.txt", e("", "b"))
    with pytest.raises(ToolError, match="same"):
        edit(ctx, "f.txt", e("a", "a"))


def test_missing_edit_field(tmp_path, ctx):
    (tmp_path / "f.txt").write_text("a\n")
    with pytest.raises(ToolError, match=r"edits\[0\]\.new_text"):
        edit(ctx, "f.txt", {"old_text": "a"})


def test_crlf_file_matches_lf_old_text(tmp_path, ctx):
    (tmp_path / "f.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    edit(ctx, "f.txt", e("a\nb", "A\nB"))
    assert (tmp_path / "f.txt").read_bytes() == b"A\r\nB\r\nc\r\n"


def test_no_diff_above_limit(tmp_path, ctx):
    (tmp_path / "big.txt").write_text("head\n" + "x" * 300_000 + "\n")
    result = edit(ctx, "big.txt", e("head", "HEAD"))
    assert result.diffs == []
    assert "256 KiB" in result.text
    assert result.locations[0].line == 1
    assert (tmp_path / "big.txt").read_text().startswith("HEAD\n")


def test_titles_and_kinds():
    assert EditTool().title({"path": "src/app.py"}) == "Edit src/app.py"
    assert EditTool().kind == "edit" and WriteTool().kind == "edit"
