"""Logging: stderr at --log-level and `<data dir>/logs/ama.log` (rotated). Never stdout.

API keys never reach the log: a filter masks the values of secret-looking environment variables.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from ama_acp.session.redact import redact


class _Redact(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


def setup_logging(data_dir: str, level: str = "warning") -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(getattr(logging, level.upper(), logging.WARNING))
    err.setFormatter(fmt)
    err.addFilter(_Redact())
    root.addHandler(err)
    try:
        logs = Path(data_dir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        fh = logging.handlers.RotatingFileHandler(
            logs / "ama.log", maxBytes=5 * 1024 * 1024, backupCount=3, encoding="utf-8", delay=True
        )
        fh.setLevel(logging.INFO)
        fh.setFormatter(fmt)
        fh.addFilter(_Redact())
        root.addHandler(fh)
    except OSError as exc:
        root.warning("no log file in %s: %s", data_dir, exc)
    # httpx logs every request URL at INFO; a key put in a base URL's query string must not reach the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
