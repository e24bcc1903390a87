"""The workspace's git state for the handoff request (tools/git_state.py; docs/context.md "Compaction"): read
from a real repository made with `git init`, bounded, cleaned, and with no program the repository names ever
run — fsmonitor, clean/smudge/process filters, textconv, external diff drivers, pagers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ama_acp.tools.git_state import LINE_CLIP, MAX_LINES, GitState, Listing, clean_line, read_git_state

HAS_GIT = shutil.which("git") is not None
needs_git = pytest.mark.skipif(not HAS_GIT, reason="git not installed")
MARKS = ("fsmonitor", "clean", "smudge", "process", "textconv", "extcmd", "external", "pager", "pagerstatus")


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout


def make_repo(root: Path, branch: str = "main") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", branch)
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "tracked.txt").write_text("one\n")
    (root / "same.txt").write_text("same\n")
    (root / "other.txt").write_text("other\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    return root


def read(cwd: Path, seconds: float = 20.0) -> GitState | None:
    return anyio.run(lambda: read_git_state(str(cwd), seconds))


@pytest.fixture(autouse=True)
def _no_outer_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The machine's own git config and any repository above tmp_path play no part.
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


@needs_git
def test_branch_status_and_diff_stat_of_a_work_tree(tmp_path):
    root = make_repo(tmp_path / "repo", branch="feature/handoff")
    (root / "tracked.txt").write_text("one\ntwo\n")
    (root / "new.txt").write_text("x\n")
    state = read(root)
    assert state is not None and state.problems == []
    assert state.head == "branch feature/handoff"
    assert state.status == Listing([" M tracked.txt", "?? new.txt"], 2)
    assert state.diff is not None and state.diff.total == 2
    assert state.diff.lines[0].split() == ["tracked.txt", "|", "1", "+"]
    assert state.diff.lines[1] == " 1 file changed, 1 insertion(+)"
    text = state.render()
    assert "- branch feature/handoff" in text and "     M tracked.txt" in text and "1 file changed" in text


@needs_git
def test_a_subdirectory_of_a_work_tree_is_read_and_a_clean_tree_says_so(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "sub").mkdir()
    state = read(root / "sub")
    assert state is not None and state.head == "branch main"
    assert state.status == Listing([], 0) and state.diff == Listing([], 0)
    assert "nothing to commit" in state.render() and "no unstaged changes" in state.render()


@needs_git
def test_a_detached_head_is_its_short_commit(tmp_path):
    root = make_repo(tmp_path / "repo")
    sha = git(root, "rev-parse", "--short", "HEAD").strip()
    git(root, "checkout", "-q", "--detach")
    state = read(root)
    assert state is not None and state.head == f"detached HEAD at {sha}"


def test_outside_a_work_tree_or_without_git_there_is_no_state(tmp_path, monkeypatch):
    assert read(tmp_path) is None  # not a repository (GIT_CEILING_DIRECTORIES: nothing above counts)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert read(tmp_path) is None  # no git at all


def _hostile_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose config names a program for everything git status/diff could run; each creates a
    marker file named after what ran it."""
    root = make_repo(tmp_path / "repo")
    marks = tmp_path / "marks"
    marks.mkdir()
    evil = tmp_path / "evil"
    evil.write_text(
        f'#!/bin/sh\ntouch "{marks}/$1"\nshift\nif [ "$#" -gt 0 ] && [ -f "$1" ]; then cat "$1"; else cat; fi\n'
    )
    evil.chmod(0o755)
    with open(root / ".git" / "config", "a") as f:
        f.write(
            f'[core]\n\tfsmonitor = "{evil} fsmonitor"\n\tpager = "{evil} pager"\n\tuntrackedCache = true\n'
            f'[pager]\n\tstatus = "{evil} pagerstatus"\n\tdiff = "{evil} pager"\n'
            f'[diff]\n\texternal = "{evil} external"\n'
            f'[diff "tc"]\n\ttextconv = "{evil} textconv"\n'
            f'[diff "ext"]\n\tcommand = "{evil} extcmd"\n'
            f'[filter "e.v=x"]\n\tclean = "{evil} clean"\n\tsmudge = "{evil} smudge"\n\trequired = true\n'
            f'[filter "proc"]\n\tprocess = "{evil} process"\n'
            "[color]\n\tui = always\n"
        )
    # Drivers for every file, from the work tree and from .git/info: what status/diff read contents through.
    (root / ".gitattributes").write_text("* diff=tc\ntracked.txt diff=ext\n")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("* filter=e.v=x\nsame.txt filter=proc\n")
    (root / "tracked.txt").write_text("one\nmore\n")
    return root, marks


_dirtied: list[int] = []


def stat_dirty(root: Path) -> None:
    """Same size, another mtime: git must read the contents (through the filters) to know they did not change.
    Each plain `git status` refreshes the index, so this comes before each run."""
    _dirtied.append(len(_dirtied) + 1)
    old = time.time() - 3600 * _dirtied[-1]  # a whole other second each time: git may compare seconds only
    for name in ("same.txt", "other.txt"):
        os.utime(root / name, (old, old))


@needs_git
def test_no_program_the_repository_names_is_ever_run(tmp_path):
    root, marks = _hostile_repo(tmp_path)
    # The traps are real: plain git runs them.
    stat_dirty(root)
    for args in (["status", "--short"], ["diff"], ["diff", "--stat"]):
        subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    fired = {p.name for p in marks.iterdir()}
    assert {"fsmonitor", "extcmd"} <= fired, fired
    for p in marks.iterdir():
        p.unlink()
    # The filter drivers' own trap: with fsmonitor off, plain git status runs the clean filter or process.
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    stat_dirty(root)
    subprocess.run(["git", "-C", str(root), "-c", "core.fsmonitor=false", "status"], capture_output=True, env=env)
    assert {"clean", "process"} <= {p.name for p in marks.iterdir()}, "a filter did not fire for plain git"
    for p in marks.iterdir():
        p.unlink()
    stat_dirty(root)

    state = read(root)
    assert sorted(p.name for p in marks.iterdir()) == []
    assert state is not None and state.problems == [], state
    assert state.head == "branch main"
    assert state.status is not None and " M tracked.txt" in state.status.lines
    assert state.diff is not None and any(line.startswith(" tracked.txt") for line in state.diff.lines)
    assert "\x1b" not in state.render() and "[31m" not in state.render()  # color.ui=always was switched off


@needs_git
def test_many_changes_are_bounded_and_counted_with_the_summary_line_kept(tmp_path):
    root = make_repo(tmp_path / "repo")
    for i in range(120):
        (root / f"f{i:03}.txt").write_text("x\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "many")
    for i in range(120):
        (root / f"f{i:03}.txt").write_text("x\ny\n")
    state = read(root)
    assert state is not None and state.status is not None and state.diff is not None
    assert len(state.status.lines) == MAX_LINES and state.status.total == 120 and state.status.last is None
    assert len(state.diff.lines) == MAX_LINES - 1 and state.diff.total == 121
    assert state.diff.last == " 120 files changed, 120 insertions(+)"
    text = state.render()
    assert "(120 lines, 50 shown):" in text and "… 70 more lines" in text
    assert "… 71 more lines" in text and text.endswith("120 files changed, 120 insertions(+)")


def _fake_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """A `git` on PATH that answers rev-parse like a work tree and does `body` for everything else. Its
    directory is beside the work tree, not in it: no git is taken from inside the workspace."""
    bin_dir = tmp_path.with_name(tmp_path.name + "-fakebin")
    bin_dir.mkdir()
    script = bin_dir / "git"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, time\n"
        "args = sys.argv[1:]\n"
        "if 'rev-parse' in args and '--is-inside-work-tree' in args:\n"
        "    print('true'); sys.exit(0)\n"
        "if 'symbolic-ref' in args:\n"
        "    sys.stdout.buffer.write(b'ma\\x1b]0;pwn\\x07in\\xff\\n'); sys.exit(0)\n"
        "if 'config' in args:\n"
        "    sys.exit(1)\n" + body
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_odd_output_is_decoded_cleaned_clipped_and_counted(tmp_path, monkeypatch):
    _fake_git(
        tmp_path,
        monkeypatch,
        "out = sys.stdout.buffer\n"
        "if 'status' in args:\n"
        "    out.write(b'?? \\xff\\xfe bad\\tname\\x1b[31m\\r\\n' + b'?? ' + b'y' * 100000 + b'\\n')\n"
        "    out.write(b'?? more\\n' * 200000)\n"
        "    out.write(b'no newline at the end')\n"
        "else:\n"
        "    out.write(b' a.txt | 1 +\\n 1 file changed, 1 insertion(+)')\n",
    )
    state = read(tmp_path)
    assert state is not None and state.problems == []
    assert state.head == "branch ma]0;pwnin\ufffd"  # the escape and the bell are gone; the bad byte replaced
    assert state.status is not None and state.status.total == 200003
    assert state.status.lines[0] == "?? \ufffd\ufffd bad name[31m"
    assert len(state.status.lines[1]) == LINE_CLIP and state.status.lines[1].endswith("…")
    assert len(state.status.lines) == MAX_LINES
    assert state.diff == Listing([" a.txt | 1 +", " 1 file changed, 1 insertion(+)"], 2)


def test_a_git_that_hangs_is_given_up_and_the_state_says_what_was_not_read(tmp_path, monkeypatch):
    _fake_git(tmp_path, monkeypatch, "time.sleep(60)\n")
    started = time.monotonic()
    state = read(tmp_path, seconds=1.0)
    assert time.monotonic() - started < 10
    assert state is not None and state.head == "branch ma]0;pwnin\ufffd"
    assert state.status is None and state.diff is None
    assert state.problems == ["git did not answer within 1 s"]
    assert "- not read: git did not answer within 1 s" in state.render()


def test_a_failing_git_is_a_state_that_says_so(tmp_path, monkeypatch):
    _fake_git(tmp_path, monkeypatch, "sys.exit(128)\n")
    state = read(tmp_path)
    assert state is not None
    assert state.problems == ["git status failed (exit 128)", "git diff --stat failed (exit 128)"]


@given(st.text(max_size=600))
def test_property_a_cleaned_line_has_no_control_character_and_fits(text):
    line = clean_line(text)
    assert len(line) <= LINE_CLIP
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line)
    assert not any(c in line for c in "\u202e\u2066\u2028\u200f")
