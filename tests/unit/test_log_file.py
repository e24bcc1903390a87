"""ama's log file rotates as logging.handlers' RotatingFileHandler did (ama.log → ama.log.1 … .3 at 5 MiB), without
importing logging.handlers (a cold start's ~5 ms): sizes, order, privacy and a link planted among the old files."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ama_acp.logs import _PrivateLogFile


def _handler(folder: Path, max_bytes: int, backups: int = 3) -> _PrivateLogFile:
    folder.mkdir(parents=True, exist_ok=True)
    handler = _PrivateLogFile(folder / "ama.log", max_bytes=max_bytes, backups=backups)
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


def _emit(handler: logging.Handler, text: str) -> None:
    handler.handle(logging.LogRecord("t", logging.INFO, __file__, 1, text, None, None))


def test_the_log_rotates_into_three_older_files_newest_first(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    handler = _handler(logs, max_bytes=100)
    lines = [f"line {i:03d} " + "x" * 20 for i in range(40)]  # 29 bytes each: three lines a file
    for line in lines:
        _emit(handler, line)
    handler.close()
    names = sorted(p.name for p in logs.iterdir())
    assert names == ["ama.log", "ama.log.1", "ama.log.2", "ama.log.3"]
    kept = [(logs / n).read_text().splitlines() for n in ("ama.log.3", "ama.log.2", "ama.log.1", "ama.log")]
    assert all(len(part) == 3 for part in kept[:3]) and 1 <= len(kept[3]) <= 3
    assert sum(kept, []) == lines[-sum(len(part) for part in kept) :]  # the newest lines, in order, none lost
    for name in names:
        assert os.path.getsize(logs / name) < 100
        assert stat.S_IMODE(os.stat(logs / name).st_mode) == 0o600


def test_a_link_planted_among_the_old_logs_is_moved_never_written_through(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    logs.mkdir()
    (logs / "ama.log.1").symlink_to(target)
    handler = _handler(logs, max_bytes=60)
    for i in range(6):
        _emit(handler, f"line {i} " + "y" * 30)
    handler.close()
    assert target.read_text() == "precious\n"
    links = [p for p in logs.iterdir() if p.is_symlink()]
    assert [p.name for p in links] in (["ama.log.2"], ["ama.log.3"], [])  # moved along, or past the last backup
    assert (logs / "ama.log").read_text().endswith("y" * 30 + "\n")


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=90), min_size=1, max_size=60))
def test_every_file_stays_under_the_limit_and_the_newest_lines_are_all_kept(tmp_path_factory, sizes) -> None:  # type: ignore[no-untyped-def]
    logs = tmp_path_factory.mktemp("rot") / "logs"
    handler = _handler(logs, max_bytes=200, backups=2)
    lines = [f"{i}:" + "z" * n for i, n in enumerate(sizes)]
    for line in lines:
        _emit(handler, line)
    handler.close()
    order = ["ama.log.2", "ama.log.1", "ama.log"]
    kept: list[str] = [line for n in order if (logs / n).exists() for line in (logs / n).read_text().splitlines()]
    assert kept == lines[len(lines) - len(kept) :]  # a tail of what was written, in order
    assert kept[-1] == lines[-1]
    for name in order:
        if (logs / name).exists():
            # a file past the limit holds one line only: a line is never split across files
            assert os.path.getsize(logs / name) < 200 or len((logs / name).read_text().splitlines()) == 1
