"""What the benchmarks share about a running ama: waiting, with a deadline, for its preload to finish."""

from __future__ import annotations

from pathlib import Path

from ama_acp.server import PRELOADED
from tests.support.waiting import poll_until


def preloads(data_dir: str | Path) -> int:
    """How many ama processes logged the end of their preload into this data directory so far."""
    try:
        text = (Path(data_dir) / "logs" / "ama.log").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return 0
    return text.count(PRELOADED)


def wait_preloaded(data_dir: str | Path, before: int, timeout: float = 10.0) -> None:
    """Until one more ama than `before` logged that its session modules are imported (the state a person's
    first thread meets)."""
    poll_until(lambda: preloads(data_dir) > before, timeout, f"ama's preload in {data_dir}")
