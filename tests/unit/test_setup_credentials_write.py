"""Writing the credentials file (`credentials.write_credentials`) and both files together (`write.commit`): merged,
0600 from the first byte, in a 0700 directory, atomic, and a failed second write puts the first back."""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ama_acp import credentials
from ama_acp.credentials import CredentialsError, read_credentials, write_credentials
from ama_acp.setup.choices import SetupError
from ama_acp.setup.write import Plan, commit, write_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask: whatever ama writes privately must be private by itself, not thanks to the umask."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_a_new_file_in_a_new_directory_is_private(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "a" / "b" / "credentials.toml"
    write_credentials(path, {"OPENAI_API_KEY": "sk-one"})
    assert read_credentials(path) == {"OPENAI_API_KEY": "sk-one"}
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700 and _mode(path.parent.parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["credentials.toml"]  # no temporary file left


def test_keys_are_merged_with_the_stored_ones(tmp_path: Path) -> None:
    path = tmp_path / "credentials.toml"
    path.write_text('[keys]\nOPENAI_API_KEY = "old"\nLOCAL_API_KEY = "keep"\n"odd-name" = "kept too"\n')
    os.chmod(path, 0o644)  # a file someone loosened: rewritten private
    write_credentials(path, {"OPENAI_API_KEY": 'new"\\value'})
    assert read_credentials(path) == {"OPENAI_API_KEY": 'new"\\value', "LOCAL_API_KEY": "keep", "odd-name": "kept too"}
    assert _mode(path) == 0o600


def test_the_temporary_file_is_created_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask: None) -> None:
    """Never readable by others at any moment: the open itself asks for 0600, before a byte is written."""
    seen: list[tuple[str, int]] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *args, **kwargs):
        if flags & os.O_CREAT:
            seen.append((os.fspath(path), mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr("ama_acp.credentials.os.open", spy)
    write_credentials(tmp_path / "credentials.toml", {"K": "v"})
    assert seen and all(mode == 0o600 for _, mode in seen)


def test_a_malformed_file_is_an_error_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "credentials.toml"
    path.write_text("[keys\nX = 1\n")
    with pytest.raises(CredentialsError, match="line 1"):
        write_credentials(path, {"K": "v"})
    assert path.read_text() == "[keys\nX = 1\n"


@pytest.mark.parametrize(
    ("name", "value"), [("BAD NAME", "sk-zz9"), ("", "sk-zz9"), ("K", ""), ("K", "sk-zz\n9"), ("K", "sk-\udcff")]
)
def test_a_bad_name_or_key_is_refused_without_quoting_the_key(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(CredentialsError) as caught:
        write_credentials(tmp_path / "credentials.toml", {name: value})
    assert not value or value not in str(caught.value)
    assert not (tmp_path / "credentials.toml").exists()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "credentials.toml"
    write_credentials(path, {"K": "old"})

    def broken(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ama_acp.credentials.os.fsync", broken)
    with pytest.raises(CredentialsError, match="No space left"):
        write_credentials(path, {"K": "new"})
    assert read_credentials(path) == {"K": "old"}
    assert [p.name for p in tmp_path.iterdir()] == ["credentials.toml"]


def test_the_written_file_is_read_again_by_key_source(tmp_path: Path) -> None:
    env = {"AMA_CREDENTIALS": str(tmp_path / "c.toml")}
    assert credentials.key_source(env).get("X_API_KEY") is None
    write_credentials(tmp_path / "c.toml", {"X_API_KEY": "sk-fresh"})
    assert credentials.key_source(env)["X_API_KEY"] == "sk-fresh"


# --- the config, and both together ----------------------------------------------------------------------------


def test_write_atomic_keeps_an_existing_files_permissions(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("x = 1\n")
    os.chmod(path, 0o640)
    write_atomic(path, b'model = "a/b"\n')
    assert path.read_text() == 'model = "a/b"\n' and _mode(path) == 0o640
    new = tmp_path / "new" / "config.toml"
    write_atomic(new, b"")
    assert new.exists() and not _mode(new) & 0o022


def _plan(tmp_path: Path, old: str | None, cred_path: Path | None = None) -> Plan:
    return Plan(
        tmp_path / "config.toml",
        'model = "local/m"\n',
        old,
        cred_path or tmp_path / "credentials.toml",
        {"LOCAL_API_KEY": "sk-k"},
    )


def test_commit_writes_both(tmp_path: Path) -> None:
    commit(_plan(tmp_path, None))
    assert tomllib.loads((tmp_path / "config.toml").read_text()) == {"model": "local/m"}
    assert read_credentials(tmp_path / "credentials.toml") == {"LOCAL_API_KEY": "sk-k"}


def test_a_failed_credentials_write_puts_the_old_config_back(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('model = "openai/gpt-4.1"\n# mine\n')
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(SetupError, match="nothing was written") as caught:
        commit(_plan(tmp_path, config.read_text(), blocker / "credentials.toml"))
    assert caught.value.code == 1
    assert config.read_text() == 'model = "openai/gpt-4.1"\n# mine\n'


def test_a_failed_credentials_write_removes_a_config_that_was_not_there(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(SetupError):
        commit(_plan(tmp_path, None, blocker / "credentials.toml"))
    assert not (tmp_path / "config.toml").exists()


def test_an_interrupt_between_the_writes_undoes_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ama_acp.setup import write

    def interrupted(path, updates):
        raise KeyboardInterrupt

    monkeypatch.setattr(write, "write_credentials", interrupted)
    with pytest.raises(KeyboardInterrupt):
        commit(_plan(tmp_path, None))
    assert list(tmp_path.iterdir()) == []


def test_a_symlinked_file_is_written_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "credentials.toml"
    real.parent.mkdir()
    real.write_text('[keys]\nA = "1"\n')
    link = tmp_path / "credentials.toml"
    link.symlink_to(real)
    write_credentials(link, {"B": "2"})
    assert link.is_symlink() and read_credentials(real) == {"A": "1", "B": "2"} and _mode(real) == 0o600
    config_real = tmp_path / "dotfiles" / "config.toml"
    config_real.write_text("")
    (tmp_path / "config.toml").symlink_to(config_real)
    write_atomic(tmp_path / "config.toml", b'model = "a/b"\n')
    assert (tmp_path / "config.toml").is_symlink() and config_real.read_text() == 'model = "a/b"\n'
