"""Hostile inputs to the tools: patterns that make backtracking engines explode, FIFOs and devices, a
repository config that names programs, writes into .git, escaping process trees, bad argument values.

Every timing assertion is a bound that a linear-time matcher meets by orders of magnitude and a
backtracking one misses by hours, so the tests are not flaky either way.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.tools.base import JSONObject, Location, Tool, ToolArgs, ToolError, ToolKind, ToolResult
from ama_acp.tools.context import ToolContext
from ama_acp.tools.edit import EditTool
from ama_acp.tools.ls import ListTool
from ama_acp.tools.paths import PathPolicy
from ama_acp.tools.read import ReadTool
from ama_acp.tools.registry import deadline_for, default_tools, run_with_deadline
from ama_acp.tools.search import grep as grep_mod
from ama_acp.tools.search.filewalk import GIT_HARDENING, parse_gitignore, walk_files
from ama_acp.tools.search.glob import GlobTool
from ama_acp.tools.search.globs import GlobError, glob_match, glob_regex
from ama_acp.tools.search.grep import GrepTool, compile_pattern
from ama_acp.tools.shell import ShellTool
from ama_acp.tools.workspace import LocalWorkspace
from ama_acp.tools.write import WriteTool
from tests.support.hypothesis_profiles import examples
from tests.support.leaks import processes_with_cmdline
from tests.support.waiting import holds_within

HAS_GIT = shutil.which("git") is not None
P = ParamSpec("P")
T = TypeVar("T")


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(LocalWorkspace(), str(tmp_path), PathPolicy([str(tmp_path)]))


def run(tool: Tool, ctx: ToolContext, **args: object) -> ToolResult:
    return anyio.run(tool.run, args, ctx)


def timed(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> tuple[T, float]:
    start = time.monotonic()
    value = fn(*args, **kwargs)
    return value, time.monotonic() - start


# --- 1. globs: linear time, and the semantics a reference matcher gives ------------------------------


# Stands where a brace group began or ended in an expanded pattern (see _expand_braces).
BOUNDARY = "\0"


def _expand_braces(pat: str) -> list[str]:
    """Every brace alternative spelled out (the reference may be exponential: its inputs are tiny)."""
    depth, start = 0, -1
    for i, c in enumerate(pat):
        if c == "\\":
            continue
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                body, alts, d, cur = pat[start + 1 : i], [], 0, ""
                for ch in body:
                    if ch == "," and d == 0:
                        alts.append(cur)
                        cur = ""
                        continue
                    d += ch == "{"
                    d -= ch == "}"
                    cur += ch
                alts.append(cur)
                # BOUNDARY marks where the braces stood: ripgrep reads `**` only as written, so `*{*/b}` is
                # two stars, not the `**/` that pasting the text together would spell.
                return [x for a in alts for x in _expand_braces(pat[:start] + BOUNDARY + a + BOUNDARY + pat[i + 1 :])]
    return [pat]


def _tokens(pat: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == BOUNDARY:
            i += 1
            continue
        if c == "*":
            j = i
            while j < len(pat) and pat[j] == "*":
                j += 1
            if j - i == 1:
                out.append(("star", None))
            elif j < len(pat) and pat[j] == "/":
                out.append(("dirs", None))
                j += 1
            else:
                out.append(("all", None))
            i = j
            continue
        if c == "?":
            out.append(("one", None))
        elif c == "[":
            end = pat.index("]", i + 2)
            body = pat[i + 1 : end]
            neg = body.startswith("!")
            lo, hi = body.lstrip("!").split("-")
            out.append(("class", (neg, lo, hi)))
            i = end
        elif c == "\\":
            i += 1
            out.append(("lit", pat[i]))
        else:
            out.append(("lit", c))
        i += 1
    return out


def reference_match(pattern: str, path: str) -> bool:
    """Glob semantics by dynamic programming over (token, position), written independently of the RE2
    translation: `*` any run without '/', `**/` empty or anything ending in '/', `**` anything, `?` one
    non-'/' character, a class one non-'/' character in (or, negated, out of) its range."""
    for alt in _expand_braces(pattern):
        toks = _tokens(alt)

        @cache
        def m(t: int, p: int, toks: tuple[tuple[str, Any], ...] = tuple(toks)) -> bool:
            if t == len(toks):
                return p == len(path)
            kind, arg = toks[t]
            if kind == "lit":
                return p < len(path) and path[p] == arg and m(t + 1, p + 1)
            if kind == "one":
                return p < len(path) and path[p] != "/" and m(t + 1, p + 1)
            if kind == "class":
                neg, lo, hi = arg
                if p >= len(path) or path[p] == "/":
                    return False
                return ((lo <= path[p] <= hi) != neg) and m(t + 1, p + 1)
            if kind == "star":
                q = p
                while True:
                    if m(t + 1, q):
                        return True
                    if q >= len(path) or path[q] == "/":
                        return False
                    q += 1
            if kind == "all":
                return any(m(t + 1, q) for q in range(p, len(path) + 1))
            # dirs: nothing, or any text that ends with '/'
            return m(t + 1, p) or any(path[q - 1] == "/" and m(t + 1, q) for q in range(p + 1, len(path) + 1))

        if m(0, 0):
            return True
    return False


GLOB_ATOMS = st.sampled_from(["*", "**/", "?", "[a-c]", "[!a-c]", "{a,b}", "{a,*/b}", "a", "b", "z", "/", ".", "\\*"])
PATHS = st.text(alphabet="abcz/.*", max_size=12)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(atoms=st.lists(GLOB_ATOMS, max_size=7), path=PATHS)
def test_globs_agree_with_the_reference_semantics(atoms, path):
    pattern = "".join(atoms)
    assert glob_regex(pattern).fullmatch(path) == reference_match(pattern, path), (pattern, path)


@settings(max_examples=examples(60), deadline=None)
@given(n=st.integers(min_value=5, max_value=200), depth=st.integers(min_value=100, max_value=3000))
def test_glob_matching_time_is_bounded_on_adversarial_inputs(n, depth):
    for pattern, path in (
        ("**/" * n + "*x", "a/" * depth + "y"),
        ("*a" * n, "a" * depth + "b"),
        ("{a,**/}" * min(n, 30) + "b", "a/" * depth + "c"),
        ("**" * n + "z", "ab/" * depth),
    ):
        matched, seconds = timed(glob_regex(pattern).fullmatch, path)
        assert not matched and seconds < 0.5, (pattern[:40], seconds)


def test_unusable_globs_are_errors_not_hangs_or_crashes():
    with pytest.raises(GlobError):
        glob_regex("{" * 100 + "a" + "}" * 100)
    with pytest.raises(GlobError):
        glob_regex("a" * 5000)
    # Odd but harmless syntax: unclosed brackets and braces are literals, reversed ranges match nothing.
    assert glob_match("[abc", "[abc") and glob_match("{a,b", "{a,b") and not glob_match("[z-a]", "m")
    # An undecodable file name (surrogate escapes from git or the disk) is matched, not a crash.
    assert glob_match("*.txt", "caf\udce9.txt")


def test_a_pathological_gitignore_outside_git_is_read_in_linear_time(tmp_path):
    (tmp_path / ".gitignore").write_text("**/" * 30 + "*x\n" + "*a" * 60 + "\n")
    deep = tmp_path.joinpath(*(["d"] * 40))
    deep.mkdir(parents=True)
    (deep / ("a" * 200 + "b")).write_text("kept\n")
    (deep / "gone.x").write_text("ignored\n")
    (files, stopped), seconds = timed(walk_files, str(tmp_path))
    assert seconds < 2.0 and not stopped
    assert any(f.endswith("a" * 200 + "b") for f in files)
    assert not any(f.endswith("gone.x") for f in files)
    # A rule that cannot be compiled is dropped, the others still count.
    assert len(parse_gitignore("{" * 100 + "x" + "}" * 100 + "\n*.log\n")) == 1


def test_find_files_with_repeated_double_star_answers_quickly(tmp_path, ctx, monkeypatch):
    monkeypatch.setenv("PATH", os.devnull)  # no git, no rg (tools/programs.py): the walk and its matcher
    deep = tmp_path.joinpath(*(["d"] * 30))
    deep.mkdir(parents=True)
    (deep / "yx").write_text("")
    result, seconds = timed(run, GlobTool(), ctx, pattern="**/" * 30 + "*x")
    assert seconds < 2.0
    assert result.text.endswith("yx")
    with pytest.raises(ToolError, match="Unusable `pattern`"):
        run(GlobTool(), ctx, pattern="{" * 100 + "}" * 100)


# --- 2. search: RE2, refused constructs named, cancellable, bounded ---------------------------------


@pytest.fixture
def python_grep(monkeypatch):
    monkeypatch.setenv("PATH", os.devnull)  # finds no git and no rg (tools/programs.py)
    return GrepTool()


def test_catastrophic_regex_is_linear(tmp_path, ctx, python_grep):
    (tmp_path / "a.txt").write_text("a" * 200_000 + "!\n" + "a" * 50 + "\n")
    result, seconds = timed(run, python_grep, ctx, pattern="(a+)+$")
    assert seconds < 2.0
    assert result.text.splitlines()[0] == "1 match in 1 file:"
    assert result.text.splitlines()[1] == "a.txt:2:" + "a" * 50


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", "backreferences"),
        ("foo(?!bar)", "negative look-ahead"),
        ("(?<=x)y", "look-behind"),
        ("(?<!x)y", "negative look-behind"),
        ("(?>ab)", "atomic groups"),
        ("a++", "possessive"),
    ],
)
def test_unsupported_constructs_are_named(tmp_path, ctx, python_grep, pattern, named):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(ToolError, match=named):
        run(python_grep, ctx, pattern=pattern)


def test_a_match_never_spans_lines_and_anchors_are_per_line(tmp_path, ctx, python_grep):
    (tmp_path / "a.txt").write_text("foo\nbar\nfoo bar\n")
    assert run(python_grep, ctx, pattern=r"foo\s+bar").text.splitlines()[1:] == ["a.txt:3:foo bar"]
    assert run(python_grep, ctx, pattern="^bar$").text.splitlines()[1:] == ["a.txt:2:bar"]
    assert run(python_grep, ctx, pattern="o[^x]*r").text.splitlines()[1:] == ["a.txt:3:foo bar"]


def test_the_search_budget_is_enforced_inside_the_loop(tmp_path, ctx, python_grep, monkeypatch):
    for i in range(300):
        (tmp_path / f"f{i:03}.txt").write_text("needle\n" * 100)
    monkeypatch.setattr(grep_mod, "SEARCH_SECONDS", 0.0)
    result = run(python_grep, ctx, pattern="needle")
    # Out of time before the first file: said so, not a plain "no matches", which would be a false answer.
    assert "stopped early" in result.text


def test_the_budget_is_checked_between_files_and_between_matches(tmp_path):
    from ama_acp.tools.budget import Budget

    paths = []
    for i in range(50):
        (tmp_path / f"f{i:02}.txt").write_text("needle\n" * 1000)
        paths.append(str(tmp_path / f"f{i:02}.txt"))
    budget = Budget(60)
    regex = compile_pattern("needle", False)
    original = grep_mod._search_bytes
    calls = []

    def stop_after_three(data, path, *rest):
        calls.append(path)
        if len(calls) == 3:
            budget.stop()  # what a cancel or the deadline does, mid-file
        return original(data, path, *rest)

    grep_mod._search_bytes = stop_after_three
    try:
        found = grep_mod._python_search(budget, paths, regex, 0, True)
    finally:
        grep_mod._search_bytes = original
    assert len(calls) == 3 and not found.complete
    assert found.matches == 2000  # two whole files, then nothing more from the third


def test_a_cancelled_search_leaves_no_thread_running(tmp_path, ctx, python_grep, monkeypatch):
    # Many files with many matches: far more work than the cancel leaves time for.
    line = ("x" * 60 + "\n").encode()
    for i in range(400):
        (tmp_path / f"f{i:03}.txt").write_bytes(line * 20_000)
    before = {t.ident for t in threading.enumerate()}
    started = threading.Event()
    original = grep_mod._search_bytes

    def spy(*args):
        started.set()
        return original(*args)

    monkeypatch.setattr(grep_mod, "_search_bytes", spy)
    monkeypatch.setattr(grep_mod, "COUNT_LIMIT", 10**12)  # never stop early on its own

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(python_grep.run, {"pattern": "zzz|x{61}"}, ctx)
            assert await anyio.to_thread.run_sync(started.wait, 10)
            tg.cancel_scope.cancel()

    start = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - start < 2.0

    def busy_workers() -> list[threading.Thread]:
        # anyio keeps idle workers around for reuse; a worker still inside the search is the leak.
        return [
            t for t in threading.enumerate() if t.ident not in before and any("grep.py" in f for f in _frames_of(t))
        ]

    assert holds_within(lambda: not busy_workers(), 2.0), busy_workers()


def _frames_of(thread: threading.Thread) -> list[str]:
    import sys
    import traceback

    frame = sys._current_frames().get(thread.ident or -1)
    return [f.filename for f in traceback.extract_stack(frame)] if frame else []


def test_compile_pattern_ignore_case_and_bad_unicode():
    assert compile_pattern("HELLO", True).search(b"say hello") is not None
    assert compile_pattern("HELLO", False).search(b"say hello") is None


# --- 3. only regular files --------------------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_read_file_refuses_a_fifo_at_once(tmp_path: Path, ctx: ToolContext, fifo: Path) -> None:
    with pytest.raises(ToolError, match="is a FIFO .* only regular files can be read"):
        _, seconds = timed(run, ReadTool(), ctx, path="pipe")
    # Straight at the workspace too (a path swapped for a FIFO after the tool's own check).
    with pytest.raises(OSError, match="FIFO"):
        anyio.run(LocalWorkspace().read_text, str(fifo))


def test_writes_never_go_through_to_a_fifo_or_device(tmp_path, ctx, fifo):
    with pytest.raises(ToolError, match="FIFO .* only regular files can be written"):
        run(WriteTool(), ctx, path="pipe", content="x")
    with pytest.raises(ToolError, match="FIFO .* only regular files can be edited"):
        run(EditTool(), ctx, path="pipe", edits=[{"old_text": "a", "new_text": "b"}])
    with pytest.raises(OSError, match="FIFO"):
        anyio.run(LocalWorkspace().write_text, str(fifo), "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_kernel_file_systems_are_refused_even_through_a_symlink(tmp_path, ctx):
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "status").symlink_to("/proc/self/status")
    with pytest.raises(ToolError, match="under /dev"):
        run(ReadTool(), ctx, path="zero")
    with pytest.raises(ToolError, match="under /proc"):
        run(ReadTool(), ctx, path="status")
    with pytest.raises(ToolError, match="under /proc"):
        run(GrepTool(use_ripgrep=False), ctx, pattern="x", path="status")
    with pytest.raises(ToolError, match="under /dev"):
        run(WriteTool(), ctx, path="zero", content="x")


def test_listing_finding_and_searching_skip_a_fifo(tmp_path, ctx, fifo, python_grep, monkeypatch):
    (tmp_path / "a.txt").write_text("needle\n")
    listing = run(ListTool(), ctx).text
    assert "pipe  (a FIFO (named pipe), not readable)" in listing
    found, seconds = timed(run, GlobTool(), ctx, pattern="*")
    assert found.text.splitlines() == ["a.txt"] and seconds < 2.0
    hits, seconds = timed(run, python_grep, ctx, pattern="needle")
    assert hits.text.splitlines()[1:] == ["a.txt:1:needle"] and seconds < 2.0


def test_a_fifo_named_gitignore_does_not_block_the_walk(tmp_path):
    os.mkfifo(tmp_path / ".gitignore")
    (tmp_path / "a.txt").write_text("")
    (files, _), seconds = timed(walk_files, str(tmp_path))
    assert "a.txt" in files and seconds < 2.0  # the FIFO is listed by name; find/search never open it


# --- 4. git runs nothing the repository names ---------------------------------------------------------


def _evil_repo(root: Path) -> Path:
    marker = root.parent / f"{root.name}-pwned"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    hook = root.parent / f"{root.name}-hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with open(root / ".git" / "config", "a") as f:
        f.write(f"[core]\n\tfsmonitor = {hook}\n\tuntrackedCache = true\n")
    (root / "a.py").write_text("needle\n")
    subprocess.run(["git", "-C", str(root), "-c", "core.fsmonitor=false", "add", "a.py"], check=True)
    return marker


@pytest.mark.skipif(not HAS_GIT, reason="git not installed")
def test_a_repository_fsmonitor_never_runs(tmp_path):
    root = tmp_path / "repo"
    marker = _evil_repo(root)
    # The trap is real: plain git would run it.
    subprocess.run(["git", "-C", str(root), "status", "--short"], capture_output=True, check=False)
    assert marker.exists(), "the fsmonitor hook did not fire for plain git; the test proves nothing"
    marker.unlink()
    ctx = ToolContext(LocalWorkspace(), str(root), PathPolicy([str(root)]))
    assert run(GlobTool(), ctx, pattern="**/*.py").text == "a.py"
    assert run(GrepTool(), ctx, pattern="needle").text.splitlines()[1:] == ["a.py:1:needle"]
    assert run(GrepTool(use_ripgrep=False), ctx, pattern="needle").text.splitlines()[1:] == ["a.py:1:needle"]
    assert not marker.exists()
    assert "core.fsmonitor=false" in GIT_HARDENING and "safe.bareRepository=explicit" in GIT_HARDENING


@pytest.mark.skipif(not HAS_GIT, reason="git not installed")
def test_an_embedded_bare_repository_is_not_discovered(tmp_path, ctx):
    # What the model could write with write_file alone: HEAD, config, objects/, refs/ in a folder.
    bare = tmp_path / "sub"
    for d in ("objects", "refs"):
        (bare / d).mkdir(parents=True)
    (bare / "HEAD").write_text("ref: refs/heads/main\n")
    hook = tmp_path / "hook.sh"
    marker = tmp_path / "pwned"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (bare / "config").write_text(f"[core]\n\tbare = true\n\tfsmonitor = {hook}\n")
    run(GlobTool(), ctx, pattern="*", path="sub")
    run(GrepTool(), ctx, pattern="x", path="sub")
    assert not marker.exists()


@pytest.mark.parametrize("target", [".git/config", ".git/hooks/pre-commit", "sub/.git/config", ".git", ".GIT/x"])
def test_write_and_edit_refuse_git_internals(tmp_path, ctx, target):
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    with pytest.raises(ToolError, match="inside a .git directory"):
        run(WriteTool(), ctx, path=target, content="[core]\n\tfsmonitor = /bin/evil\n")
    with pytest.raises(ToolError, match="inside a .git directory"):
        run(EditTool(), ctx, path=target, edits=[{"old_text": "[core]", "new_text": "[core]\n\tx = 1"}])
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"


def test_write_refuses_git_internals_through_a_symlink(tmp_path, ctx):
    (tmp_path / ".git").mkdir()
    (tmp_path / "innocent").symlink_to(tmp_path / ".git")
    with pytest.raises(ToolError, match="inside a .git directory"):
        run(WriteTool(), ctx, path="innocent/config", content="x")
    assert not (tmp_path / ".git" / "config").exists()
    # A file merely named like it is fine.
    run(WriteTool(), ctx, path=".gitignore", content="*.log\n")


def test_run_command_is_the_only_tool_that_executes():
    kinds = {t.name: t.kind for t in default_tools()}
    assert [name for name, kind in kinds.items() if kind == "execute"] == ["run_command"]


# --- 5. the per-tool deadline ----------------------------------------------------------------------


class _Sleeper:
    name = "sleeper"
    kind: ToolKind = "read"
    description = ""
    parameters: JSONObject = {}

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def title(self, args: ToolArgs) -> str:
        return "sleep"

    def locations(self, args: ToolArgs, cwd: str) -> list[Location]:
        return []

    def deadline_seconds(self, args: Any) -> float:
        return self.seconds

    async def run(self, args: ToolArgs, ctx: ToolContext) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def test_run_with_deadline_turns_a_hang_into_a_tool_error(ctx):
    start = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 0.2 s"):
        no_args: ToolArgs = {}
        sleeper: Tool = _Sleeper(0.2)
        anyio.run(run_with_deadline, sleeper, no_args, ctx)
    assert time.monotonic() - start < 2.0


def test_deadlines_per_tool():
    tools = {t.name: t for t in default_tools()}
    assert deadline_for(tools["read_file"], {}) == 60.0
    assert deadline_for(tools["run_command"], {"timeout": 5}) == 20.0
    assert deadline_for(tools["run_command"], {"timeout": "junk"}) == 135.0
    assert deadline_for(tools["run_command"], {"timeout": 10**30}) == 615.0
    assert deadline_for(tools["run_command"], None) == 135.0


def test_run_with_deadline_passes_results_through(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("hi\n")
    args: ToolArgs = {"path": "a.txt"}
    assert "hi" in anyio.run(run_with_deadline, ReadTool(), args, ctx).text


# --- 6. process trees end with the command --------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_setsid_child_does_not_outlive_the_command(tmp_path, ctx):
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    result = run(ShellTool(), ctx, command=f"setsid sleep 1{tag} & echo started")
    assert result.text.startswith("started")
    assert holds_within(lambda: not processes_with_cmdline(f"sleep 1{tag}"), 5.0), processes_with_cmdline(
        f"sleep 1{tag}"
    )


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_setsid_child_is_killed_when_the_command_times_out(tmp_path, ctx):
    tag = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    result = run(ShellTool(), ctx, command=f"setsid sleep 2{tag} & sleep 30", timeout=1)
    assert "Timed out after 1 s" in result.text
    assert holds_within(lambda: not processes_with_cmdline(f"sleep 2{tag}"), 5.0)


# --- 8. argument values that cannot reach the OS -------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (ReadTool(), {"path": "a\0b"}),
        (ReadTool(), {"path": "a\ud800"}),
        (ReadTool(), {"path": "~\0x"}),
        (WriteTool(), {"path": "x\0", "content": "y"}),
        (EditTool(), {"path": "\0", "edits": [{"old_text": "a", "new_text": "b"}]}),
        (ListTool(), {"path": "\0"}),
        (GlobTool(), {"pattern": "*", "path": "\0"}),
        (GrepTool(use_ripgrep=False), {"pattern": "x", "path": "\0"}),
        (GrepTool(use_ripgrep=False), {"pattern": "x", "glob": "\0"}),
        (ShellTool(), {"command": "echo \0"}),
        (WriteTool(), {"path": "ok.txt", "content": "\ud800"}),
    ],
)
def test_unusable_strings_are_tool_errors(tmp_path, ctx, tool, args):
    with pytest.raises(ToolError):
        run(tool, ctx, **args)


def test_nul_bytes_in_content_are_data(tmp_path, ctx):
    run(WriteTool(), ctx, path="bin.dat", content="a\0b")
    assert (tmp_path / "bin.dat").read_bytes() == b"a\0b"


def test_huge_integers_are_answered(tmp_path, ctx):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    with pytest.raises(ToolError, match="past the end"):
        run(ReadTool(), ctx, path="a.txt", offset=10**30)
    assert "one" in run(ReadTool(), ctx, path="a.txt", limit=10**30).text
    with pytest.raises(ToolError):
        run(ReadTool(), ctx, path="a.txt", offset="9" * 5000)
    with pytest.raises(ToolError):
        run(ShellTool(), ctx, command="true", timeout=10**30)
