import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from ama_acp.tools.base import Tool, ToolError, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.ls import ListTool
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.search import grep as grep_mod
from ama_acp.tools.search.filewalk import glob_match, glob_regex, parse_gitignore, walk_files
from ama_acp.tools.search.glob import GlobTool
from ama_acp.tools.search.grep import GrepTool
from ama_acp.tools.workspace import LocalWorkspace

HAS_RG = shutil.which("rg") is not None
HAS_GIT = shutil.which("git") is not None


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))


def run(tool: Tool, ctx: ToolContext, **args: object) -> ToolResult:
    return anyio.run(tool.run, args, ctx)


def make_tree(root: Path) -> None:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "src" / "app.py").write_text("import os\ndef main():\n    return 'needle'\n")
    (root / "src" / "pkg" / "util.py").write_text("NEEDLE = 1\n")
    (root / "src" / "notes.md").write_text("a needle in md\n")
    (root / "build" / "gen.py").write_text("needle = 'generated'\n")
    (root / "debug.log").write_text("needle in log\n")
    (root / "top.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("build/\n*.log\n")


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


# --- list_dir ---


def test_list_dir(tmp_path, ctx):
    make_tree(tmp_path)
    text = run(ListTool(), ctx).text
    lines = text.split("\n")
    assert lines[1:3] == ["build/", "src/"]
    assert any(line.startswith("top.py  6 B") for line in lines)
    assert ".gitignore" in text


def test_list_dir_cap(tmp_path, ctx, monkeypatch):
    from ama_acp.tools import ls

    monkeypatch.setattr(ls, "MAX_ENTRIES", 5)
    for i in range(8):
        (tmp_path / f"f{i}").write_text("")
    assert "3 more entries" in run(ListTool(), ctx).text


def test_list_dir_errors(tmp_path, ctx):
    (tmp_path / "f").write_text("")
    with pytest.raises(ToolError, match="read_file"):
        run(ListTool(), ctx, path="f")
    with pytest.raises(ToolError, match="not found"):
        run(ListTool(), ctx, path="nope")


# --- globs and .gitignore ---


def test_glob_regex():
    assert glob_regex("**/*.py").fullmatch("a.py")
    assert glob_regex("**/*.py").fullmatch("x/y/a.py")
    assert not glob_regex("*.py").fullmatch("x/a.py")
    assert glob_regex("src/**/test_*.ts").fullmatch("src/test_a.ts")
    assert glob_regex("src/**/test_*.ts").fullmatch("src/a/b/test_a.ts")
    assert glob_regex("*.{json,toml}").fullmatch("p.toml")
    assert not glob_regex("*.{json,toml}").fullmatch("p.yaml")
    assert glob_regex("[!a]?.c").fullmatch("bx.c")
    assert glob_match("*.py", "deep/dir/a.py")
    assert not glob_match("src/*.py", "other/a.py")


def test_gitignore_rules_without_git(tmp_path):
    make_tree(tmp_path)
    (tmp_path / "src" / ".gitignore").write_text("*.md\n!keep.md\n/pkg/\n")
    (tmp_path / "src" / "keep.md").write_text("")
    (tmp_path / ".git").mkdir()  # never walked, repo or not
    (tmp_path / ".git" / "config").write_text("")
    files, stopped = walk_files(str(tmp_path))
    assert not stopped
    assert sorted(files) == [".gitignore", "src/.gitignore", "src/app.py", "src/keep.md", "top.py"]


def test_parse_gitignore_anchoring():
    rules = parse_gitignore("# c\n\n/only-root\nany\n")
    assert rules[0].regex.fullmatch("only-root") and not rules[0].regex.fullmatch("a/only-root")
    assert rules[1].regex.fullmatch("a/b/any")


@pytest.mark.skipif(not HAS_GIT, reason="git not installed")
def test_find_files_in_git_repo_respects_gitignore(tmp_path, ctx):
    make_tree(tmp_path)
    git_init(tmp_path)
    # Newest first.
    os.utime(tmp_path / "src" / "app.py", (1_000_000, 1_000_000))
    os.utime(tmp_path / "src" / "pkg" / "util.py", (2_000_000, 2_000_000))
    os.utime(tmp_path / "top.py", (3_000_000, 3_000_000))
    result = run(GlobTool(), ctx, pattern="**/*.py")
    assert result.text.split("\n") == ["top.py", "src/pkg/util.py", "src/app.py"]
    assert result.locations[0].path == str(tmp_path)


def test_find_files_without_git(tmp_path, ctx):
    make_tree(tmp_path)
    result = run(GlobTool(), ctx, pattern="**/*.py")
    assert sorted(result.text.split("\n")) == ["src/app.py", "src/pkg/util.py", "top.py"]


def test_find_files_in_subdir_and_top_level_only(tmp_path, ctx):
    make_tree(tmp_path)
    assert run(GlobTool(), ctx, pattern="*.py", path="src").text == "src/app.py"
    assert run(GlobTool(), ctx, pattern="*.py").text == "top.py"


def test_find_files_falls_back_to_any_depth(tmp_path, ctx):
    make_tree(tmp_path)
    text = run(GlobTool(), ctx, pattern="*.md").text
    assert "showing matches for `**/*.md`" in text
    assert "src/notes.md" in text


def test_find_files_cap_and_none(tmp_path, ctx, monkeypatch):
    from ama_acp.tools.search import glob

    monkeypatch.setattr(glob, "MAX_RESULTS", 3)
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("")
    assert "2 more files" in run(GlobTool(), ctx, pattern="*.txt").text
    assert "No files match" in run(GlobTool(), ctx, pattern="*.rs").text


# --- search ---


@pytest.fixture(params=["rg", "python"])
def grep_tool(request, monkeypatch):
    if request.param == "rg":
        if not HAS_RG:
            pytest.skip("ripgrep not installed")
        return GrepTool()
    # The fallback path as it runs on a machine without rg.
    monkeypatch.setattr(grep_mod, "helper_program", lambda name, roots: None)  # no rg; git as it is
    return GrepTool()


def test_search_basic_respects_gitignore(tmp_path, ctx, grep_tool):
    make_tree(tmp_path)
    text = run(grep_tool, ctx, pattern="needle").text
    lines = text.split("\n")
    assert lines[0] == "2 matches in 2 files:"
    assert lines[1:] == ["src/app.py:3:    return 'needle'", "src/notes.md:1:a needle in md"]


@pytest.mark.skipif(not HAS_GIT, reason="git not installed")
def test_search_in_git_repo(tmp_path, ctx, grep_tool):
    make_tree(tmp_path)
    git_init(tmp_path)
    text = run(grep_tool, ctx, pattern="needle", ignore_case=True).text
    assert "src/pkg/util.py:1:NEEDLE = 1" in text
    assert "build/" not in text and "debug.log" not in text


def test_search_glob_and_case(tmp_path, ctx, grep_tool):
    make_tree(tmp_path)
    text = run(grep_tool, ctx, pattern="NEEDLE", glob="*.py").text
    assert text.split("\n")[1:] == ["src/pkg/util.py:1:NEEDLE = 1"]
    text = run(grep_tool, ctx, pattern="needle", glob="*.py", ignore_case=True, path="src").text
    assert "src/app.py:3:" in text and "src/pkg/util.py:1:" in text and "notes.md" not in text


def test_search_context(tmp_path, ctx, grep_tool):
    (tmp_path / "f.txt").write_text("a\nb\nhit\nc\nd\ne\nf\nhit\ng\n")
    text = run(grep_tool, ctx, pattern="hit", context=1).text
    assert text.split("\n")[1:] == [
        "f.txt-2-b",
        "f.txt:3:hit",
        "f.txt-4-c",
        "--",
        "f.txt-7-f",
        "f.txt:8:hit",
        "f.txt-9-g",
    ]


def test_search_single_file_and_binary_skipped(tmp_path, ctx, grep_tool):
    (tmp_path / "bin.dat").write_bytes(b"needle\x00\x01\x02")
    (tmp_path / "t.txt").write_text("needle\n")
    text = run(grep_tool, ctx, pattern="needle").text
    assert "t.txt:1:needle" in text and "bin.dat" not in text
    assert run(grep_tool, ctx, pattern="needle", path="t.txt").text.split("\n")[1] == "t.txt:1:needle"


def test_search_cap(tmp_path, ctx, grep_tool, monkeypatch):
    monkeypatch.setattr(grep_mod, "MAX_MATCHES", 5)
    (tmp_path / "many.txt").write_text("hit\n" * 12)
    text = run(grep_tool, ctx, pattern="hit").text
    assert text.count("many.txt:") == 5
    assert "7 more matches not shown" in text
    assert text.startswith("12 matches")


def test_search_no_match_and_bad_regex(tmp_path, ctx, grep_tool):
    (tmp_path / "t.txt").write_text("x\n")
    assert run(grep_tool, ctx, pattern="zzz").text.startswith("No matches for `zzz`")
    with pytest.raises(ToolError, match="Invalid regular expression"):
        run(grep_tool, ctx, pattern="(unclosed")


def test_search_for_a_nul_byte_answers_instead_of_raising(tmp_path, ctx, grep_tool):
    """A NUL in the pattern or glob cannot go into rg's argv (found by tests/fuzz/test_fuzz_tools.py once rg
    ran in the tests): the search falls back to RE2 and answers, it never raises out of the tool."""
    (tmp_path / "a.txt").write_text("plain text\n")
    assert run(grep_tool, ctx, pattern="\x00", path="a.txt").text.startswith("No matches")
    result = run(grep_tool, ctx, pattern="\x00", glob="a.txt", ignore_case=True)
    assert result.text.startswith("No matches")


def test_search_lookaround_is_refused_with_the_construct_named(tmp_path, ctx, grep_tool):
    # ripgrep's syntax (and RE2's, the linear-time engine of the fallback) has no look-around.
    (tmp_path / "t.txt").write_text("foobar\nfoobaz\n")
    with pytest.raises(ToolError, match="look-ahead"):
        run(grep_tool, ctx, pattern="foo(?=baz)")


def test_search_titles():
    assert GrepTool().title({"pattern": "foo", "path": "src"}) == "Search for `foo` in src"
    assert GlobTool().title({"pattern": "**/*.py"}) == "Find `**/*.py`"


def test_search_does_not_follow_symlinks_out(tmp_path, grep_tool):
    root = tmp_path / "proj"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("needle outside\n")
    (root / "link.txt").symlink_to(outside)
    (root / "in.txt").write_text("needle inside\n")
    ctx = ToolContext(LocalWorkspace(), str(root), PathPolicy([str(root)]))
    text = run(grep_tool, ctx, pattern="needle").text
    assert "in.txt:1:needle inside" in text and "outside" not in text


def test_search_stops_counting_at_the_limit(tmp_path, ctx, grep_tool, monkeypatch):
    monkeypatch.setattr(grep_mod, "COUNT_LIMIT", 5)
    monkeypatch.setattr(grep_mod, "MAX_MATCHES", 3)
    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text("hit\n" * 3)
    text = run(grep_tool, ctx, pattern="hit").text
    assert text.startswith("At least")
    assert text.count(":hit") == 3
    assert "more matches not shown" in text
