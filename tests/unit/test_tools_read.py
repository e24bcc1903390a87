from pathlib import Path

import anyio
import pytest

from ama_acp.tools import read as read_mod
from ama_acp.tools.base import ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.read import ReadTool
from ama_acp.tools.workspace import LocalWorkspace


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))


def read(ctx: ToolContext, **args: object) -> ToolResult:
    return anyio.run(ReadTool().run, args, ctx)


def test_numbered_lines(tmp_path, ctx):
    (tmp_path / "a.py").write_text("one\ntwo\nthree\n")
    result = read(ctx, path="a.py")
    assert result.text == "     1\tone\n     2\ttwo\n     3\tthree"
    assert not result.is_error
    assert result.locations[0].path == str(tmp_path / "a.py")


def test_offset_and_limit(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = read(ctx, path="a.txt", offset=10, limit=3)
    lines = result.text.split("\n")
    assert lines[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "lines 10–12 of 100" in result.text
    assert "offset=13" in result.text
    assert result.locations[0].line == 10


def test_default_limit_says_how_to_continue(tmp_path, ctx):
    (tmp_path / "big.txt").write_text("x\n" * 2500)
    result = read(ctx, path="big.txt")
    assert "  2000\tx" in result.text
    assert "  2001\t" not in result.text
    assert "of 2500" in result.text and "offset=2001" in result.text


def test_last_window_has_no_continuation(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("a\nb\nc")
    result = read(ctx, path="a.txt", offset=2)
    assert result.text == "     2\tb\n     3\tc"


def test_offset_past_end(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("a\nb\n")
    with pytest.raises(ToolError, match="past the end"):
        read(ctx, path="a.txt", offset=5)


def test_long_line_is_cut(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("y" * 5000 + "\nshort\n")
    result = read(ctx, path="a.txt")
    first = result.text.split("\n")[0]
    assert "line cut: 5000 characters" in first
    assert len(first) < 2100
    assert "     2\tshort" in result.text


def test_crlf_is_not_shown(tmp_path, ctx):
    (tmp_path / "a.txt").write_bytes(b"a\r\nb\r\n")
    assert read(ctx, path="a.txt").text == "     1\ta\n     2\tb"


def test_binary_file(tmp_path, ctx):
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    result = read(ctx, path="img.png")
    assert "binary file" in result.text
    assert "image/png" in result.text
    assert "\x00" not in result.text


def test_undecodable_file(tmp_path, ctx):
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert "binary file" in read(ctx, path="latin.txt").text


def test_missing_file_suggests(tmp_path, ctx):
    (tmp_path / "config.py").write_text("")
    with pytest.raises(ToolError, match="Did you mean: config.py"):
        read(ctx, path="confg.py")


def test_directory(tmp_path, ctx):
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="list_dir"):
        read(ctx, path="d")


def test_empty_file(tmp_path, ctx):
    (tmp_path / "e.txt").write_text("")
    assert "empty" in read(ctx, path="e.txt").text


def test_missing_required(ctx):
    with pytest.raises(ToolError, match="`path`"):
        read(ctx)


def test_unknown_argument(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("a")
    with pytest.raises(ToolError, match="Unknown argument `lines`"):
        read(ctx, path="a.txt", lines=3)


def test_huge_file_needs_offset_and_streams(tmp_path, ctx, monkeypatch):
    monkeypatch.setattr(read_mod, "HUGE_FILE_BYTES", 1000)
    (tmp_path / "huge.log").write_text("".join(f"row {i}\n" for i in range(1, 1001)))
    with pytest.raises(ToolError, match="too large"):
        read(ctx, path="huge.log")
    result = read(ctx, path="huge.log", offset=500, limit=2)
    assert result.text.startswith("   500\trow 500\n   501\trow 501")
    assert "offset=502" in result.text
    tail = read(ctx, path="huge.log", offset=1000, limit=5)
    assert tail.text == "  1000\trow 1000"


def test_titles():
    tool = ReadTool()
    assert tool.title({"path": "src/app.py"}) == "Read src/app.py"
    assert tool.title({"path": "src/app.py", "offset": 10, "limit": 31}) == "Read src/app.py (lines 10–40)"
    assert tool.title({}) == "Read file"
    assert tool.locations({"path": "a/b.py", "offset": 3}, "/w")[0].line == 3
