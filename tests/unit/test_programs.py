"""Programs ama starts by name are found by absolute path, never inside the workspace (tools/programs.py;
docs/tools.md "What runs"; issue 23, "The person's PATH").

Real files on disk: a workspace with programs in it, directories outside it, symlinks between them, PATH
strings as shells leave them (`./node_modules/.bin`, `bin`, a leading, trailing or doubled `:`).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ama_acp.tools import programs
from ama_acp.tools.git_state import read_git_state
from ama_acp.tools.programs import find_program, resolve_program, safe_path
from ama_acp.tools.search.filewalk import helper_env
from tests.support.hypothesis_profiles import examples

HAS_GIT = shutil.which("git") is not None


def program(path: Path, body: str = "exit 0\n", mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    root = tmp_path / "outside"
    root.mkdir()
    return root


def find(name: str, path: str, ws: Path, *, roots: tuple[str, ...] | None = None) -> str | None:
    return resolve_program(name, workspace_roots=(str(ws),) if roots is None else roots, cwd=str(ws), path=path)


# --- bare names: only absolute entries outside the workspace ------------------------------------------------


@pytest.mark.parametrize("entry", ["./node_modules/.bin", "node_modules/.bin", "../ws/node_modules/.bin"])
def test_a_relative_entry_is_never_searched(ws, outside, entry, monkeypatch):
    monkeypatch.chdir(ws)  # ama's own directory is the project too (an editor starts it there)
    program(ws / "node_modules/.bin/git")
    assert find("git", entry, ws) is None
    real = program(outside / "bin/git")
    # The relative entry comes first, and is still passed over for the one outside.
    assert find("git", f"{entry}:{outside / 'bin'}", ws) == str(real)
    # Even with no workspace roots at all: a relative entry is refused for what it is, not where it leads.
    assert find("git", entry, ws, roots=()) is None


@pytest.mark.parametrize("shape", ["{d}:", ":{d}", "{d}::{d}", "", ":"])
def test_an_empty_entry_is_not_the_current_directory(ws, outside, shape, monkeypatch):
    monkeypatch.chdir(ws)
    program(ws / "rg")  # what an empty entry (the current directory, which is the project) would find
    empty = outside / "nothing-here"
    empty.mkdir()
    path = shape.format(d=empty)
    assert find("rg", path, ws) is None
    assert find("rg", path, ws, roots=()) is None
    lookup = find_program("rg", workspace_roots=[str(ws)], cwd=str(ws), path=path)
    assert "rg (an empty PATH entry (the current directory))" in lookup.why_not()


def test_an_absolute_entry_inside_the_workspace_is_refused_through_a_symlink_too(ws, outside):
    program(ws / "tools/npx")
    link = outside / "link-to-tools"
    link.symlink_to(ws / "tools")
    assert find("npx", str(ws / "tools"), ws) is None
    assert find("npx", str(link), ws) is None  # the entry's real path is what counts
    lookup = find_program("npx", workspace_roots=[str(ws)], cwd=str(ws), path=str(link))
    assert "inside the workspace" in lookup.why_not() and "absolute path" in lookup.why_not()
    # A workspace root given through a symlink resolves the same way.
    ws_link = outside / "ws-link"
    ws_link.symlink_to(ws)
    assert find("npx", str(ws / "tools"), ws, roots=(str(ws_link),)) is None


def test_a_program_outside_that_links_into_the_workspace_is_refused(ws, outside):
    target = program(ws / "pkg/cli.js")
    (outside / "bin").mkdir()
    (outside / "bin/mytool").symlink_to(target)  # what `npm link` leaves in a global bin directory
    lookup = find_program("mytool", workspace_roots=[str(ws)], cwd=str(ws), path=str(outside / "bin"))
    assert lookup.path is None
    assert "a link into the workspace" in lookup.why_not()
    # A link that stays outside is fine, and the path returned is the link (a multi-call binary needs its name).
    real = program(outside / "opt/real-tool")
    (outside / "bin/tool").symlink_to(real)
    assert find("tool", str(outside / "bin"), ws) == str(outside / "bin/tool")


def test_a_file_that_cannot_be_executed_is_passed_over(ws, outside):
    program(outside / "a/git", mode=0o644)
    good = program(outside / "b/git")
    assert find("git", f"{outside / 'a'}:{outside / 'b'}", ws) == str(good)
    assert find("git", str(outside / "a"), ws) is None


def test_a_directory_or_a_fifo_named_like_the_program_is_passed_over(ws, outside):
    (outside / "a/git").mkdir(parents=True)
    (outside / "b").mkdir()
    os.mkfifo(outside / "b/git")
    good = program(outside / "c/git")
    assert find("git", f"{outside / 'a'}:{outside / 'b'}:{outside / 'c'}", ws) == str(good)
    assert find("git", f"{outside / 'a'}:{outside / 'b'}", ws) is None


def test_nothing_found_says_where_it_did_not_look(ws, outside):
    lookup = find_program("npx", workspace_roots=[str(ws)], cwd=str(ws), path=str(outside))
    assert lookup.path is None
    assert lookup.why_not().startswith("'npx' was not found in PATH (relative and empty PATH entries")
    program(ws / "node_modules/.bin/npx")
    lookup = find_program("npx", workspace_roots=[str(ws)], cwd=str(ws), path=f"./node_modules/.bin:{outside}")
    assert "'npx' was found only where ama does not run programs from" in lookup.why_not()
    assert "./node_modules/.bin/npx (a relative PATH entry)" in lookup.why_not()


@pytest.mark.parametrize("name", ["", "gi\x00t"])
def test_an_unusable_name_is_refused(ws, name):
    lookup = find_program(name, workspace_roots=[str(ws)], cwd=str(ws), path="/usr/bin:/bin")
    assert lookup.path is None and "empty or holds a NUL" in lookup.why_not()


# --- names with a slash: the person configured that exact file ----------------------------------------------


def test_a_configured_path_is_used_even_inside_the_workspace(ws):
    server = program(ws / "scripts/server")
    assert find(str(server), "./node_modules/.bin", ws) == str(server)
    # Relative to the directory the program runs in, as exec would take it.
    assert find("scripts/server", "", ws) == str(ws / "scripts/server")
    assert find("./scripts/server", "", ws) == os.path.join(ws, "./scripts/server")


def test_a_configured_path_must_be_a_regular_executable(ws):
    (ws / "dir").mkdir()
    program(ws / "plain", mode=0o644)
    for name, problem in [
        (str(ws / "dir"), "is not a regular file"),
        (str(ws / "plain"), "is not executable"),
        (str(ws / "missing"), "does not exist"),
    ]:
        lookup = find_program(name, workspace_roots=[str(ws)], cwd=str(ws), path="")
        assert lookup.path is None and lookup.why_not() == f"{name!r} {problem}"


def test_a_relative_configured_path_needs_a_directory(ws):
    lookup = find_program("bin/server", workspace_roots=[], cwd=None, path="")
    assert lookup.path is None and "no directory to run it in" in lookup.why_not()


# --- the PATH the helpers run with, the log, the cache ------------------------------------------------------


def test_safe_path_keeps_only_absolute_entries_outside_the_workspace(ws, outside):
    (ws / "bin").mkdir()
    link = outside / "ws-bin"
    link.symlink_to(ws / "bin")
    path = f"./node_modules/.bin::{outside}:bin:{ws / 'bin'}:{link}:/usr/bin:"
    assert safe_path(path, [str(ws)]) == f"{outside}:/usr/bin"
    # Never empty: an empty PATH is the current directory to exec.
    assert safe_path("./x::", [str(ws)]) == programs._NOWHERE
    assert safe_path(str(ws / "bin"), [str(ws)]) == programs._NOWHERE


def test_helper_env_has_the_safe_path(ws, outside, monkeypatch):
    monkeypatch.setenv("PATH", f"./node_modules/.bin:{outside}:")
    assert helper_env([str(ws)])["PATH"] == str(outside)


def test_each_refused_entry_is_logged_once_per_process(ws, outside, caplog):
    entry = f"./rel-{outside.parent.name}"  # an entry no other test names: its line is not already told
    caplog.set_level(logging.WARNING, logger="ama_acp.tools.programs")
    for name in ("git", "rg", "npx"):
        find(name, f"{entry}:{outside}", ws)
    safe_path(f"{entry}:{outside}", [str(ws)])
    told = [r.getMessage() for r in caplog.records if entry in r.getMessage()]
    assert told == [f"PATH entry {entry!r} is skipped: a relative PATH entry, from which ama runs no program"]


def test_answers_are_cached_per_path_and_roots(ws, outside):
    first = program(outside / "a/git")
    path = str(outside / "a")
    assert find("git", path, ws) == str(first)
    first.unlink()
    assert find("git", path, ws) == str(first)  # resolved once, not per search
    second = program(outside / "b/git")
    assert find("git", f"{outside / 'b'}", ws) == str(second)  # another PATH: asked again
    assert find("git", path, ws, roots=(str(ws), str(outside / "x"))) is None  # other roots: asked again
    programs._lookup.cache_clear()  # the cache the product keeps for the process: emptied by hand
    assert find("git", path, ws) is None


# --- a property: whatever PATH, the answer is absolute, executable and outside every root -------------------


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    picks=st.lists(
        st.sampled_from(["", ".", "./node_modules/.bin", "bin", "WS/bin", "WS/link", "OUT/bin", "OUT/link", "OUT/no"]),
        max_size=8,
    )
)
def test_any_path_finds_only_a_program_outside_the_workspace(tmp_path_factory, picks):
    base = tmp_path_factory.mktemp("prop")
    ws, out = base / "ws", base / "out"
    for where in (ws, ws / "bin", ws / "node_modules/.bin", out / "bin"):
        program(where / "tool")
    (ws / "link").symlink_to(out / "bin")  # inside the workspace by name (the project can retarget it)
    (out / "link").symlink_to(ws / "bin")  # outside by name, inside by real path
    path = ":".join(p.replace("WS", str(ws)).replace("OUT", str(out)) for p in picks)
    found = find("tool", path, ws)
    if found is None:
        assert "OUT/bin" not in picks
        return
    assert found == str(out / "bin/tool"), (path, found)
    real = os.path.realpath(found)
    assert not real.startswith(str(ws) + os.sep)


# --- git for a compaction's handoff: the same rule --------------------------------------------------------


@pytest.mark.skipif(not HAS_GIT, reason="git not installed")
def test_the_git_state_never_runs_a_git_from_a_relative_path_entry(ws, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    program(ws / "node_modules/.bin/git", f": > '{marker}'\necho true\n")
    monkeypatch.chdir(ws)  # where the relative entry leads, for ama's own lookup too
    monkeypatch.setenv("PATH", f"./node_modules/.bin:{os.environ['PATH']}:")
    assert anyio.run(lambda: read_git_state(str(ws))) is None  # not a work tree, as the real git says
    assert not marker.exists()


def test_the_git_state_without_a_safe_git_is_no_state(ws, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    program(ws / "git", f": > '{marker}'\necho true\n")
    monkeypatch.chdir(ws)
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}:")  # the trailing entry is the project
    assert anyio.run(lambda: read_git_state(str(ws))) is None
    assert not marker.exists()


def test_the_current_interpreter_is_found_by_name_where_it_lives(ws):
    """The ordinary case still works: a program in an absolute entry outside the workspace."""
    directory, name = os.path.split(sys.executable)
    assert find(name, f"./x:{directory}:", ws) == sys.executable
