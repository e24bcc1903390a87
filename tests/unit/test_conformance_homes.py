"""Each group's fresh home (conformance/core/homes.py): HOME and the XDG base directories point into it, it is
seeded with what --home-copy names (at the same place relative to HOME or to its XDG directory, links copied as
links), and a path that cannot be copied is refused before any agent starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ama_conformance.core.config import RunConfig
from ama_conformance.core.homes import XDG_DIRS, HomeCopyError, group_env, resolve_copies, seed_path


def _config(tmp: Path, env: dict[str, str], copies: tuple[Path, ...] = (), homes: bool = True) -> RunConfig:
    return RunConfig(
        command=["agent"],
        cwd=tmp,
        workspace=tmp,
        scratch=tmp,
        env=env,
        homes=tmp / "homes" if homes else None,
        home_copy=copies,
    )


def test_a_group_gets_a_home_of_its_own_with_its_xdg_dirs(tmp_path: Path) -> None:
    person = tmp_path / "person"
    env = {"HOME": str(person), "XDG_CONFIG_HOME": "/somewhere/else", "PATH": "/bin"}
    config = _config(tmp_path, env)
    one, two = group_env(config, env, "config"), group_env(config, env, "load")
    assert one["HOME"] == str(tmp_path / "homes" / "config") and two["HOME"] == str(tmp_path / "homes" / "load")
    for var, rel in XDG_DIRS.items():
        assert one[var] == str(tmp_path / "homes" / "config" / rel) and Path(one[var]).is_dir()
    assert one["PATH"] == "/bin" and env["HOME"] == str(person)  # the rest passed on, the given env unchanged
    with pytest.raises(FileExistsError):  # a group's home is never reused
        group_env(config, env, "config")


def test_keep_home_passes_the_environment_as_it_is(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert group_env(_config(tmp_path, env, homes=False), env, "config") is env


def test_the_seed_lands_where_the_agent_looks_for_it(tmp_path: Path) -> None:
    person = tmp_path / "person"
    (person / ".vibe").mkdir(parents=True)
    (person / ".vibe" / "config.toml").write_text("model = 'x'\n")
    (person / ".vibe" / "link").symlink_to("/etc/passwd")
    (person / ".claude.json").write_text("{}")
    xdg = tmp_path / "xdg-config"
    (xdg / "opencode").mkdir(parents=True)
    (xdg / "opencode" / "opencode.json").write_text("{}")
    env = {"HOME": str(person), "XDG_CONFIG_HOME": str(xdg)}
    copies = resolve_copies([".vibe", ".claude.json", str(xdg / "opencode")], env)
    assert copies == (person / ".vibe", person / ".claude.json", xdg / "opencode")
    out = group_env(_config(tmp_path, env, copies), env, "modes")
    home = Path(out["HOME"])
    assert (home / ".vibe" / "config.toml").read_text() == "model = 'x'\n"
    assert (home / ".vibe" / "link").is_symlink()  # copied as a link, not followed
    assert (home / ".claude.json").read_text() == "{}"
    assert (Path(out["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json").exists()
    assert (person / ".vibe" / "config.toml").exists()  # the person's own files stay where they were


@pytest.mark.parametrize(
    ("given", "why"),
    [("no-such-file", "does not exist"), ("/etc/hostname", "not inside HOME"), (".", "not inside HOME")],
)
def test_a_path_that_cannot_seed_a_home_is_refused(tmp_path: Path, given: str, why: str) -> None:
    env = {"HOME": str(tmp_path)}
    if given == "/etc/hostname" and not Path(given).exists():
        pytest.skip("no /etc/hostname here")
    with pytest.raises(HomeCopyError, match=why):
        resolve_copies([given], env)


def test_an_xdg_dir_inside_home_decides_where_its_files_go(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    (tmp_path / "cfg" / "agent").mkdir(parents=True)
    assert seed_path(tmp_path / "cfg" / "agent", env) == Path(".config/agent")
